"""mgpu_dsl's backends for the typed IR: Mosaic GPU (kernel.py, the family modules' rules in registry.py) and the
numpy interpreter (interpret.py). Never reads the Python AST."""
