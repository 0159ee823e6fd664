"""What Triton and jnp users reach for that mgpu_dsl does not have, and what to write instead:
the hints for a missing `ml.` name (the tracer's `ml.<name>` lookups), and for Triton's, Pallas's
and JAX's own functions called in a kernel out of habit."""
from __future__ import annotations

import difflib
import math

_SCAN = ("no general associative scan: ml.cumsum, ml.cumprod, ml.cummax and ml.cummin scan along an axis;"
         " for another combination, carry the running value through a loop")
_TOP = ("no top-k: ml.sort or ml.argsort the rows (descending) and take their first k columns, or pick"
        " the top k with k passes of ml.argmax and ml.where masks")
_TRANSPOSE = ("a 2-D tensor transposes with x.T or ml.transpose(x) (through SMEM); for the tensor cores,"
              " give ml.dot the transposed view buf.T, which moves no data")
_CONCAT = "build it in an SMEM buffer's windows: t.at[0:n][...] = a; t.at[n:2 * n][...] = b; then t[...]"
_POW = ("no ml.pow: use the ** operator for x ** n (a static int), x ** 0.5 and c ** t (c a positive"
        " Python number); otherwise, for x > 0, write ml.exp2(y * ml.log2(x))")
_DIV = "no ml.{}: divide with the / operator, x / y (ml.cdiv(a, b) is the ceiling of an integer division)"
_FLOOR_DIV = "no ml.{}: divide with the // operator, x // y (ml.cdiv(a, b) rounds up instead)"
NOT_YET = {   # what Triton and jnp users reach for that mgpu_dsl does not have, and what to write
    "associative_scan": _SCAN, "scan": _SCAN, "sort": _TOP, "topk": _TOP,
    "trans": _TRANSPOSE, "permute": _TRANSPOSE,
    "gather": "index the GMEM ref with a tensor of indices: table[ids, :] (NumPy's advanced indexing)",
    "take": "index the GMEM ref with a tensor of indices: x[idx] (NumPy's advanced indexing)",
    "join": _CONCAT, "cat": _CONCAT, "concatenate": _CONCAT,
    "split": "read the halves through windows of the ref: x.at[:, 0:n][...] and x.at[:, n:2 * n][...]",
    "log1p": "no ml.log1p: ml.log(1 + x) loses the digits of small x; accurate for finite x:"
             " u = 1 + x; ml.where(u == 1, x, ml.log(u) * (x / (u - 1)))",
    "expm1": "no ml.expm1: ml.exp(x) - 1 loses the digits of small x; accurate for x below 88:"
             " u = ml.exp(x); ml.where(u == 1, x, ml.where(x < -20, -1.0, (u - 1) * (x / ml.log(u))))",
    "pow": _POW, "power": _POW,
    "tan": "no ml.tan: ml.sin(x) / ml.cos(x)",
    "sinh": "no ml.sinh: (ml.exp(x) - ml.exp(-x)) * 0.5", "cosh": "no ml.cosh: (ml.exp(x) + ml.exp(-x)) * 0.5",
    "asinh": "no ml.asinh: ml.log(x + ml.sqrt(x * x + 1)) (for x >= 0; odd: use -asinh(-x) below 0)",
    "acosh": "no ml.acosh: ml.log(x + ml.sqrt(x * x - 1))",
    "atanh": "no ml.atanh: 0.5 * ml.log((1 + x) / (1 - x))",
    **{n: (f"no ml.{n}: the inverse trigonometric functions are not built in; write a polynomial or rational"
           f" approximation (as libdevice does) from ml.sqrt, * and +") for n in ("asin", "acos", "atan", "atan2",
                                                                                  "arcsin", "arccos", "arctan")},
    "sign": "no ml.sign: ml.where(x > 0, 1.0, ml.where(x < 0, -1.0, 0.0))",
    **{n: ("no block pointers or tensor descriptors: take a window of the ref, x.at[ml.ds(i * bm, bm), :], and"
           " ml.copy it into an ml.smem buffer (a TMA copy), or read it with x.at[...][...]")
       for n in ("make_block_ptr", "make_tensor_descriptor", "advance")},
    "debug_barrier": "no ml.debug_barrier: the compiler places the barriers between threads itself",
    "max_contiguous": "no ml.max_contiguous: not needed (the compiler vectorises contiguous windows);"
                      " ml.multiple_of(x, n) promises alignment",
    "max_constancy": "no ml.max_constancy: not needed",
    **{n: "no ml.{}: write Python's assert on static values; for run-time checks, interpret mode reports"
          " out-of-bounds windows and races itself".format(n) for n in ("static_assert", "device_assert")},
    **{n: "no ml.{}: Python's print(...) of static values prints while tracing; of run-time values, on the"
          " GPU and in interpret mode".format(n) for n in ("static_print", "device_print")},
    "reduce": "no general ml.reduce: ml.sum, ml.max, ml.min, ml.argmax and ml.argmin reduce along an axis;"
              " for another combination, reduce pairs of halves with windows, or carry it through a loop",
    "histogram": "no ml.histogram: scatter ones into a zeroed output, ml.atomic_add(out.at[bins], ml.full(bins.shape,"
                 " 1, jnp.int32))",
    "isinf": "no ml.isinf: ml.abs(x) == float('inf')",
    "rint": "no ml.rint: ml.round(x) rounds to the nearest integer, ties to even, as jnp.rint",
    "bincount": "no ml.bincount: ml.atomic_add(counts.at[ids], ml.full(ids.shape, 1, jnp.int32)) into a zeroed"
                " output (an output updated only by atomics starts at 0)",
    "scatter": "no ml.scatter (nor a plain scatter: repeated indices would race): accumulate into a zeroed"
               " output with ml.atomic_add(out.at[ids], values) (rows: out.at[ids, :]; indices outside the"
               " array are dropped), or write rows one at a time with scalar indices",
    "scatter_add": "ml.atomic_add(out.at[ids], values) (an output updated only by atomics starts at 0)",
    "top_k": _TOP,
    "nonzero": "no ml.nonzero (its length depends on the data): keep a mask, or compact with an exclusive"
               " ml.cumsum of the mask as each kept element's position and a scatter",
    "isfinite": "no ml.isfinite: ml.abs(x) < float('inf') (False for NaN too)",
    "fma": "no ml.fma: write a * b + c (the GPU may fuse it into one fused multiply-add; interpret mode rounds twice)",
    **{n: ("no compare-and-swap or exchange, so no locks: accumulate partial results with ml.atomic_add into"
           " an output (one reduced atomically starts at zero), or write each program's partials to rows of"
           " their own and sum them in a second kernel") for n in ("atomic_cas", "atomic_xchg")},
    **{n: _DIV.format(n) for n in ("fdiv", "div_rn", "divide", "true_divide")},
    **{n: _FLOOR_DIV.format(n) for n in ("floor_divide", "floordiv")},
    **{n: ("no ml.{}: a register tensor is not reversed in place; gather from the end of the input ref x"
           " instead: x[n - 1 - ml.arange(n)] along axis 0 of a 1-D x (rows: x.at[n - 1 - r][...]), x[:, n - 1 -"
           " ml.arange(n)] along axis 1 of a 2-D x (gathers read GMEM refs: a value computed in the kernel is"
           " reversed in a second kernel or outside); or reverse outside the kernel (call it on jnp.flip(x, axis)"
           " from your jitted function, where XLA fuses the reversal)").format(n)
       for n in ("flip", "fliplr", "flipud", "reverse")},
    "softmax": "no ml.softmax: spell it out, e = ml.exp(v - ml.max(v, axis=-1, keepdims=True));"
               " e / ml.sum(e, axis=-1, keepdims=True)",
    "log_softmax": "no ml.log_softmax: spell it out, s = v - ml.max(v, axis=-1, keepdims=True);"
                   " s - ml.log(ml.sum(ml.exp(s), axis=-1, keepdims=True))",
    "logsumexp": "no ml.logsumexp: spell it out, m = ml.max(v, axis=-1, keepdims=True);"
                 " m + ml.log(ml.sum(ml.exp(v - m), axis=-1, keepdims=True))",
    **{n: "no ml.{}: reshape the register tensor, v.reshape(shape) (or ml.reshape(v, shape))".format(n)
       for n in ("view", "ravel", "flatten")},
    **{n: ("no ml.{}: from 16-bit halves of uint32 a and b, al, ah, bl, bh = a & 0xFFFF, a >> 16, b & 0xFFFF,"
           " b >> 16; m = (al * bl >> 16) + (ah * bl & 0xFFFF) + (al * bh & 0xFFFF); the high word is"
           " ah * bh + (ah * bl >> 16) + (al * bh >> 16) + (m >> 16)").format(n) for n in ("umulhi", "mulhi")},
    "any": "no ml.any: ml.max of a bool tensor is whether any element holds, ml.max(m, axis=...) (m a comparison,"
           " x > 0)",
    "all": "no ml.all: ml.min of a bool tensor is whether every element holds, ml.min(m, axis=...) (m a"
           " comparison, x > 0)",
    "prod": "no ml.prod: take the last element of the running product, ml.cumprod(v, axis=1)[:, -1] along the"
            " rows of a 2-D v (ml.cumprod(v)[-1] for a 1-D v)",
}


def missing_hint(base, attr, args=None) -> str:
  """The hint for a name a module lacks: the ml function a Triton or jnp user meant, if any
  (`args`: the call's arguments as written, where it is called)."""
  if getattr(base, "__name__", "").endswith("language"):
    if args and attr in ("any", "all"):
      red, what = ("max", "any element holds") if attr == "any" else ("min", "every element holds")
      return f"write ml.{red}({', '.join(args)}): ml.{red} of a bool tensor is whether {what}"
    if args and len(args) >= 2 and attr == "view":
      return f"write {args[0]}.reshape({', '.join(args[1:])})"
    if attr in NOT_YET:
      return NOT_YET[attr]
    close = difflib.get_close_matches(attr, [n for n in dir(base) if not n.startswith("_")], n=1)
    if close:
      return f"did you mean ml.{close[0]}?"
  return "check the spelling"


def method_hint(attr, recv: str, *, ref: bool, shape=(), is_bool=False, args=None, axis=None,
                bitcast=None) -> str | None:
  """The hint for a Triton, torch or NumPy method a register tensor or ref lacks (`recv`: the
  receiver as written; `args`: the call's arguments as written, None where it is not called)."""
  if ref:
    if attr == "stride":
      return (f"refs are indexed by dimension, so no strides are needed: {recv}.at[r, ml.ds(c, n)] is row r's"
              f" columns c to c + n; for flat pointer arithmetic, reshape the array outside the kernel")
    return method_hint(attr, f"{recv}[...]", ref=False, shape=shape, args=args, axis=axis, bitcast=bitcast)
  a = ", ".join(args or ())
  first = (args or ["dtype"])[0]
  if attr == "to":
    if bitcast is None:
      return (f"write {recv}.astype({first}) to convert the values (Triton's .to(dtype, bitcast=True) is"
              f" ml.bitcast({recv}, {first}))")
    return f"write ml.bitcast({recv}, {first})" if bitcast else f"write {recv}.astype({first})"
  if attr in ("any", "all"):
    red, what = ("max", "any element holds") if attr == "any" else ("min", "every element holds")
    mask = recv if is_bool else f"{recv} != 0"
    return f"write ml.{red}({mask}{', ' + a if a else ''}): ml.{red} of a bool tensor is whether {what}"
  if attr == "prod":
    if axis is None and len(shape) == 1:
      return f"take the last element of the running product: ml.cumprod({recv})[-1]"
    if isinstance(axis, int) and len(shape) == 2 and -2 <= axis < 2:
      last = "[:, -1]" if axis % 2 == 1 else "[-1]"
      return f"take the last element of the running product: ml.cumprod({recv}, axis={axis}){last}"
    return NOT_YET["prod"]
  if attr == "view":
    return f"write {recv}.reshape({a or 'shape'})"
  if attr in ("flatten", "ravel"):
    return f"write {recv}.reshape(({math.prod(shape)},))"
  if attr in ("flip", "softmax", "log_softmax", "logsumexp"):
    return NOT_YET[attr]
  return None


# ---------------------------------------------------------------- other DSLs
FOREIGN_MODULES = {"tl": "Triton (triton.language)", "triton": "Triton", "pl": "Pallas", "plgpu": "Pallas Mosaic GPU"}
# Pallas and Triton functions a kernel may call out of habit -> what mgpu_dsl writes instead.
_FOREIGN = {"program_id": "ml.program_id(axis)", "num_programs": "ml.num_programs(axis)",
            "ds": "ml.ds(start, size)", "dslice": "ml.ds(start, size)", "cdiv": "ml.cdiv(a, b)",
            "copy_gmem_to_smem": "ml.copy(src, dst) (GMEM to SMEM, awaited for you)",
            "copy_smem_to_gmem": "ml.copy(src, dst) (SMEM to GMEM)", "wgmma": "ml.dot(a_s, b_s, acc)",
            "dot": "ml.dot(a_s, b_s, acc)", "load": "ref[...] or ml.load(ref, mask=..., other=...)",
            "store": "ref[...] = value or ml.store(ref, value, mask=...)", "arange": "ml.arange(n)",
            "zeros": "ml.zeros(shape, dtype)", "full": "ml.full(shape, value, dtype)",
            "atomic_add": "ml.atomic_add(ref, value)", "where": "ml.where(cond, a, b)",
            "multiple_of": "ml.multiple_of(x, n)", "barrier_wait": "nothing: mgpu_dsl places waits itself",
            "barrier_arrive": "nothing: mgpu_dsl places barriers itself", "commit_smem": "nothing: mgpu_dsl fences"
            " itself", "wait_smem_to_gmem": "nothing: mgpu_dsl waits for stores itself",
            "SMEM": "ml.smem(shape, dtype) in the kernel body", "GMEM": "nothing: the kernel's parameters are GMEM refs",
            "run_scoped": "ml.smem(shape, dtype) in the kernel body (scratch lives as long as its uses)",
            "emit_pipeline": "a pipelined loop: for k in ml.range(n, stages=s): ml.copy(x.at[...], buf); ...",
            "emit_pipeline_warp_specialized": "for k in ml.range(n, stages=s, warp_specialize=True): ...",
            "when": "a Python if on a scalar: if i == 0: ...", "loop": "a for loop: for i in range(n): ...",
            "fori_loop": "a for loop: for i in range(n): ...", "nd_loop": "nested for loops",
            "wgmma_wait": "nothing: mgpu_dsl waits for dots itself",
            "wgmma_accumulator_load": "nothing: ml.dot returns its accumulator in registers",
            "set_max_registers": "nothing: warp specialisation sets the registers itself",
            "layout_cast": "nothing: the compiler chooses register layouts",
            "broadcasted_iota": "ml.arange(n)[:, None] or ml.arange(n)[None, :], broadcast as needed",
            "iota": "ml.arange(n)", "debug_print": "print(...) (also in interpret mode)",
            "Barrier": "nothing: mgpu_dsl creates and waits on barriers itself",
            "kernel": "@mg.mgpu_kernel(out_shape=..., grid=...)", "pallas_call": "@mg.mgpu_kernel(out_shape=..., grid=...)",
            "BlockSpec": "windows in the kernel body: x.at[ml.ds(i * bm, bm), :] with i = ml.program_id(0)",
            "reciprocal": "1.0 / x", "multicast_ref": "ml.copy(src, buf, multicast=axis) in a warp-specialised loop",
            "async_prefetch": "ml.copy into SMEM (loads are asynchronous; a pipelined loop prefetches)",
            "commit_smem_to_gmem_group": "nothing: mgpu_dsl commits and fences stores itself",
            "dynamic_scheduling_loop": "a persistent loop: for t in ml.range(ml.program_id(0), n,"
                                       " ml.num_programs(0), stages=s)",
            "planar_snake": "ml.grouped_ids(pid, num_m, num_n, group=8)",
            "semaphore_signal": "no semaphores: ml.cluster_sync() within a cluster, or a second kernel",
            "semaphore_wait": "no semaphores: ml.cluster_sync() within a cluster, or a second kernel",
            "get_global": "an extra output, or ml.smem for scratch"}
_FOREIGN_PACKAGES = ("jax.experimental.pallas", "jax._src.pallas", "jax._src.state.indexing", "jax._src.indexing",
                     "triton")
# JAX's control flow called in a kernel -> the Python statement that is the kernel's control flow.
# jnp/np functions called on refs or register values -> what a kernel writes (others: ml.<name>).
_DOT = ("use ml.dot(a_s, b_s, acc): it takes SMEM buffers (and A from registers) and runs on the"
        " tensor cores")
_TAKE = ("index the GMEM ref with a tensor of indices: t[ids, :] gathers rows, t[:, ids] columns"
         " (as jnp indexes; `ml.atomic_add(out.at[ids, :], rows)` scatters)")
_ASTYPE = "convert with x.astype(dtype) (or ml.cast(x, dtype)); values in a kernel are arrays already"
ARRAY_CALLS = {"dot": _DOT, "matmul": _DOT, "einsum": _DOT, "take": _TAKE, "take_along_axis": _TAKE,
               "bitcast_convert_type": "use ml.bitcast(x, dtype): the same bits, another dtype of the same width",
               "convert_element_type": _ASTYPE, "asarray": _ASTYPE,
               "rint": "use ml.round(x) (to the nearest integer, ties to even, as jnp.rint)",
               "bincount": "no bincount: ml.atomic_add(counts.at[ids], ml.full(ids.shape, 1, jnp.int32)) into a"
                           " zeroed output (one updated only by atomics starts at 0)",
               "nonzero": "no nonzero (its length depends on the data): a mask, ml.where(x != 0, ...), or an"
                          " exclusive ml.cumsum of the mask as each kept element's position, scattered"}

LAX_CONTROL = {
    "fori_loop": "for j in range(lower, upper): acc = ... (ml.range(..., stages=s) to pipeline its loads)",
    "scan": "a for loop carrying the state: for j in range(n): carry = ...; store each step's output",
    "while_loop": "while cond: state = ... (the condition a scalar)",
    "cond": "if pred: ... else: ... (the predicate a scalar), or ml.where(pred, a, b) for tensors",
    "switch": "if index == 0: ... elif index == 1: ...",
    "map": "for j in range(n): ..."}


def foreign_dsl(fn, text: str = "") -> str | None:
  """'pl.ds' -> the hint naming mgpu_dsl's spelling, for a Pallas or Triton function (`text`: the
  call's function as written, for objects without a __name__)."""
  mod = getattr(fn, "__module__", None) or ""
  if not any(mod == p or mod.startswith(p + ".") for p in _FOREIGN_PACKAGES):
    return None                       # (a user's own triton_helpers module is not Triton)
  name = getattr(fn, "__name__", "") or text.rsplit(".", 1)[-1]
  if name in _FOREIGN:
    return f"write {_FOREIGN[name]}"
  from . import language
  if name and hasattr(language, name):
    return f"write ml.{name}"
  if name in NOT_YET:               # tl.flip, tl.umulhi: as a missing ml.flip, ml.umulhi
    return NOT_YET[name]
  return (f"mgpu_dsl has no {name or 'such function'}: docs/language.md lists the ml.* functions (pipelines"
          f" are ml.range(n, stages=s), scratch is ml.smem(shape, dtype), barriers and waits are placed for you)")
