"""The op families. Importing this package declares every op and every `ml.` builtin.

One module per family: memory (the memory ops; buffers and views), transfers (register reads and writes of refs, TMA copies), access (masked and scalar
accesses), atomic (atomic updates), elementwise (type rules of the math ops; elementwise_ops the ops and their kinds; elementwise_checks their dtype checks and hints' wording; elementwise_fns their builtins; fast_math ml.exp2(emulate=...) on the FMA units; libdevice Triton's libdevice math: asin, atan2, pow, ...), shape (broadcasting, reshapes,
transposes, and the Reduce op; column_slices its Slice op, `x[:, a:b]` of a tensor-core tile), reduce (the reductions' builtins: sum, mean, max, min; arg_reduce argmax, argmin), mma (tensor cores), control (grid, loops, barriers), debug (print, breakpoint),
random (counter-based random numbers), gather (GMEM indexed by tensors of indices; take_along ml.take_along_axis, declared with the gathers), scan (cumulative sums, products, max, min), sort (sorts and argsorts); roll (register rolls, also ml.concatenate's of rotated windows); permute (transposes, permutes of 3-D and wider tensors, strided slices); register_gather (gathers from register tensors); assoc_scan (ml.associative_scan: log2(n) steps of rolled copies and the user's combine); stats (softmax, logsumexp, var, std, any, all: composed of reductions); stacking (stack, join, interleave, repeat, pad, expand_dims, squeeze, split: composed of shape ops); power (`x ** y`, composed from elementwise ops); promotion
(no ops: jnp's promotion with NumPy/JAX scalars, for elementwise).
See docs/design-notes.md, "How to add an op".
"""
from . import base, memory, transfers, elementwise_ops, elementwise, elementwise_checks, elementwise_fns, fast_math, fma, libdevice, shape, reduce, arg_reduce, mma, control, debug, access, atomic, random, gather, take_along, scan, sort, power, stats, stacking, roll, permute, register_gather, assoc_scan  # noqa: F401
from .base import BUILTINS, METHODS, REF_METHODS  # noqa: F401

# Every op class, by name (`ops.Copy`, `ops.Reduce`, ...).
from .access import MaskedLoad, MaskedStore, ScalarLoad, ScalarRead, ScalarStore  # noqa: F401,E402
from .atomic import AtomicKind, AtomicUpdate  # noqa: F401,E402
from .control import (AwaitStores, Barrier, BarrierAlloc, BarrierArrive, BarrierWait,  # noqa: F401,E402
                      ClusterSync, CommitShared, Condition, For, If, NumPrograms, ProgramId, WaitLoad,
                      WarpSpecialize, While, Yield)
from .debug import Breakpoint, Print  # noqa: F401,E402
from .fast_math import Exp2Emulated  # noqa: F401,E402
from .fma import Fma  # noqa: F401,E402
from .elementwise import (Arange, BinOp, Binary, Cast, CmpOp, Compare, Constant, Full, UnOp,  # noqa: F401,E402
                          Unary, Where)
from .memory import ClusterRef, Copy, Load, SmemAlloc, Store, View  # noqa: F401,E402
from .mma import Dot, DotWait  # noqa: F401,E402
from .random import Philox  # noqa: F401,E402
from .shape import Broadcast, Reduce, ReduceKind, Reshape  # noqa: F401,E402
from .column_slices import Slice  # noqa: F401,E402
from .gather import Gather  # noqa: F401,E402
from .scan import Scan, ScanKind  # noqa: F401,E402
from .sort import Sort  # noqa: F401,E402
from .roll import FlipLoad, RollLoad  # noqa: F401,E402
from .permute import RestrideLoad, TransposeLoad, TransposeStore  # noqa: F401,E402
from .register_gather import ScratchGather  # noqa: F401,E402

__all__ = [   # the family modules (imported for their ops and builtins), the tables, every op class
    "base", "memory", "transfers", "elementwise_ops", "elementwise", "elementwise_checks", "elementwise_fns",
    "fast_math", "fma", "libdevice", "shape", "reduce", "arg_reduce", "mma", "control", "debug", "access", "atomic",
    "random", "gather", "scan", "sort", "power", "stats", "stacking", "roll", "permute", "register_gather",
    "assoc_scan", "take_along", "BUILTINS", "METHODS", "REF_METHODS", "MaskedLoad", "MaskedStore", "ScalarLoad",
    "ScalarRead", "ScalarStore", "AtomicKind", "AtomicUpdate", "AwaitStores", "Barrier", "BarrierAlloc",
    "BarrierArrive", "BarrierWait", "ClusterSync", "CommitShared", "Condition", "For", "If", "NumPrograms",
    "ProgramId", "WaitLoad", "WarpSpecialize", "While", "Yield", "Breakpoint", "Print", "Exp2Emulated", "Fma",
    "Arange", "BinOp", "Binary", "Cast", "CmpOp", "Compare", "Constant", "Full", "UnOp", "Unary", "Where",
    "ClusterRef", "Copy", "Load", "SmemAlloc", "Store", "View", "Dot", "DotWait", "Philox", "Broadcast", "Reduce",
    "ReduceKind", "Reshape", "Slice", "Gather", "Scan", "ScanKind", "Sort", "FlipLoad", "RollLoad", "RestrideLoad",
    "TransposeLoad", "TransposeStore", "ScratchGather"]
