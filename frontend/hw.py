"""Hopper (sm_90a) hardware facts, stated once.

Checks, passes, the lowering and the interpreter all import these; a number that
describes the hardware appears nowhere else. Sources: Mosaic GPU's source (the
limits it enforces or silently needs) and the CUDA programming guide.
"""
from __future__ import annotations

from .dtypes import DType

# ---------------------------------------------------------------- threads
WARP = 32                     # threads in a warp
WARPGROUP = 128               # threads in a warpgroup: every Mosaic GPU register op is collective over one
WARPS_PER_WARPGROUP = WARPGROUP // WARP
# Lanes a row of a row-wise tile narrower than a warp's 32 x vec elements takes, widest first: 32 // lanes
# rows a warp (a router's 8 experts: 2 lanes of 4 elements a row; 3 coordinates: a row a thread).
NARROW_LANES = (16, 8, 4, 2, 1)


def rows_fit(rows: int, cols: int) -> bool:
  """Whether a 2-D register tile of (rows, cols) takes a row-wise layout (frontend/layouts.py): the 32 lanes of a
  warp along its columns (rows a multiple of 4, unless the columns are of whole warpgroups), or, narrower than
  a warp, `lanes` of NARROW_LANES a row and 32 // lanes rows a warp (rows a multiple of 128 // lanes)."""
  return (cols % WARP == 0 and (rows % WARPS_PER_WARPGROUP == 0 or cols % WARPGROUP == 0)
          or any(cols % lanes == 0 and rows % (WARPGROUP // lanes) == 0 for lanes in NARROW_LANES))
MAX_BLOCK = 1024              # threads in a CTA
MAX_CLUSTER = 16              # CTAs in a cluster (non-portable maximum on Hopper)
NUM_SMS = 132                 # streaming multiprocessors of an H100/H200 SXM (grid sizing without a GPU)

# ---------------------------------------------------------------- shared memory and barriers
# Bytes of SMEM a kernel's buffers (and barriers) may use: the 227 KiB a CTA may opt in to
# (cudaFuncAttributeMaxDynamicSharedMemorySize on sm_90), less 16 bytes. Mosaic GPU's module also
# holds static SMEM (ptxas: "1 bytes smem"), and static plus dynamic must fit the 227 KiB:
# benchmarks/probe_smem_limit.py on the H200 (seventeenth session) ran and checked kernels planned
# at every size up to 232432 bytes; one planned at exactly 227 KiB (232448) failed to launch with
# "INTERNAL: invalid argument". Buffers start 1024-aligned.
SMEM_LIMIT = 227 * 1024 - 16
SMEM_WORDS = "227 KiB less 16 bytes"
SMEM_BUFFER_ALIGN = 1024      # buffers start here: what 128-byte swizzled TMA and WGMMA need
MBARRIER_BYTES = 8
MAX_BARRIERS_PER_GROUP = 32   # mbarriers in one Mosaic GPU barrier group (utils.py)

# ---------------------------------------------------------------- warp specialisation
REGISTERS = 64 * 1024         # 32-bit registers of an SM (its CTA's, at one CTA per SM)
MAX_THREAD_REGISTERS = 256    # setmaxnreg's upper bound (multiples of 8)
THREAD_REGISTERS = 255        # 32-bit registers a thread may address (ptxas's limit; the rest spills)
MAX_GRID = (2 ** 31 - 1, 65535, 65535)   # CTAs a launch may have along x, y and z (CUDA's limits)
MAX_DIM = 2 ** 31 - 1         # elements along one array dimension: indices and TMA coordinates are 32-bit
PRODUCER_REGISTERS = 24       # per thread of a TMA producer warpgroup (setmaxnreg.dec); FA3's. 40 until session 57:
# at 24 (or 32) the three compute warpgroups of head_dim 64's attention forward get 160 registers, not 152, and
# ptxas no longer serialises their products (C7512): 471 TFLOP/s against 441 on an H100, the rest unchanged
# (benchmarks/producer_regs.py --regs 40 32 24; docs/benchmarks.md, fifty-seventh session)
# ptxas allocates a kernel's registers for its launch bound: REGISTERS // threads a thread (multiples of 8, at
# most 255), whatever setmaxnreg trades later. One WGMMA instruction holds its whole 64 x n accumulator block
# in registers and needs this many more beside them: on the H200, a 64 x 256 float32 block (128 registers) at
# 512 threads (a 128-register bound) failed with "C7602 Insufficient registers (128) ... register target of
# 154 or higher" (docs/logs/attn_cfg2_session27.log).
MMA_EXTRA_REGISTERS = 26


def launch_registers(threads: int) -> int:
  """Registers ptxas gives each thread of a CTA of `threads` threads."""
  return min(THREAD_REGISTERS, REGISTERS // threads // 8 * 8)


def consumer_registers(consumer_warpgroups: int, producer: int | None = None) -> int:
  """Registers per thread of each compute warpgroup once the producer (`producer` registers a thread, by default
  PRODUCER_REGISTERS) gave its own back. `setmaxnreg` trades within the CTA's launch allocation, not the SM's
  register file: a CTA of one producer and two compute warpgroups is launched at 168 a thread (384 x 168 = 64512
  of 65536), so a producer at 32 leaves (504 - 32) / 2 = 236 -> 232 a compute thread; asking for 240, the
  register file's (512 - 32) / 2, hung the kernel in `setmaxnreg.inc` on the H100 (session 55)."""
  producer = PRODUCER_REGISTERS if producer is None else producer
  threads = WARPGROUP * (consumer_warpgroups + 1)
  pool = launch_registers(threads) * threads // WARPGROUP   # registers a thread of each warpgroup, summed
  per = (pool - producer) // consumer_warpgroups
  return min(MAX_THREAD_REGISTERS, per // 8 * 8)


# ---------------------------------------------------------------- TMA (cp.async.bulk.tensor)
TMA_MAX_BOX = 256             # elements along each box dimension
TMA_MAX_RANK = 5              # box dimensions
TMA_ALIGN = 16                # bytes: GMEM strides and the minor extent
# The SMEM side of a TMA copy must start at a 128-byte boundary: on the H200 a window at
# 16, 32 or 64 bytes into a buffer faults (CUDA_ERROR_MISALIGNED_ADDRESS); Mosaic GPU does
# not check it.
TMA_SMEM_ALIGN = 128
TMA_DTYPES = frozenset(DType)   # bool travels as its bytes (one an element)

# ---------------------------------------------------------------- tensor cores (WGMMA)
SWIZZLE = 128                 # bytes: the swizzle of tiled SMEM operands
# The narrower swizzles WGMMA and TMA also take: operands whose minor dimension is not a multiple of 128
# bytes (a k of 16 or 32 16-bit elements, an MN-major B of 16 or 32 columns, head_dim 32, 80 or 96) are
# tiled (8, swizzle // itemsize) with the widest that divides it, together with every buffer of their dots.
SWIZZLES = (128, 64, 32)
MIN_SWIZZLE = SWIZZLES[-1]
TILE_ROWS = 8                 # a tiled SMEM operand is made of (8, SWIZZLE // itemsize) tiles
MMA_M = 64                    # rows per warpgroup per instruction
MMA_N_STEP = 8
MMA_N_MAX = 256
# Integer (int8) WGMMA has fewer N shapes: 8, 24 and the multiples of 16 (ptxas rejects
# wgmma .m64n40k32.s32.s8.s8 as an illegal matrix shape).
MMA_N_STEP_INT = 16
MMA_N_INT_EXTRA = frozenset({8, 24})
# float32 operands run as TF32: the tensor cores read the top 19 bits of each (sign, exponent,
# 10 mantissa bits), as cuBLAS and Triton do for float32 dots by default.
MMA_DTYPES = frozenset({DType.f16, DType.bf16, DType.f8e4m3, DType.f8e5m2, DType.i8, DType.f32})
# Accumulator dtypes each operand dtype may use (the first is the default).
MMA_ACC = {DType.f16: (DType.f32, DType.f16), DType.bf16: (DType.f32,),
           DType.f8e4m3: (DType.f32, DType.f16), DType.f8e5m2: (DType.f32, DType.f16),
           DType.i8: (DType.i32,), DType.f32: (DType.f32,)}
# Operand dtypes the tensor cores read MN-major (a transposed A, a B stored (k, n)); the
# others only K-major: A stored (m, k), B stored (n, k) and used transposed.
MMA_MN_MAJOR_DTYPES = frozenset({DType.f16, DType.bf16})
# Operand dtypes an A operand may come from registers in: a 16-bit tile in the WGMMA layout, or an 8-bit
# one (int8, float8), which the lowering moves into the 8-bit A layout (four bytes of a row a register).
MMA_REG_A_DTYPES = frozenset({DType.f16, DType.bf16, DType.i8, DType.f8e4m3, DType.f8e5m2})
# An int8 A from registers needs k steps of 64 bytes (a 64- or 128-byte swizzle): at the 32-byte one
# ptxas drops all but the first instruction's tile (Mosaic GPU's wgmma refuses it).
MMA_REG_A_INT_K = 64

# ---------------------------------------------------------------- register arithmetic
# Mosaic GPU has no pointwise arithmetic on 8-bit types (bitwise ops excepted).
ARITH_DTYPES = frozenset(d for d in DType if d.bits >= 16)


def tile_cols(itemsize: int, swizzle: int = SWIZZLE) -> int:
  """Columns of one (TILE_ROWS, swizzle bytes) SMEM tile of elements of `itemsize` bytes."""
  return swizzle // itemsize


def swizzle_for(nbytes: int) -> int | None:
  """The widest swizzle dividing `nbytes` (the bytes of an operand's minor dimension), or None."""
  return next((s for s in SWIZZLES if nbytes % s == 0), None)

# ---------------------------------------------------------------- atomics (PTX red, cp.reduce.async.bulk)
# Element types per atomic operation ("add", "max", "min"), from Mosaic GPU's register atomics
# (FragmentedArray.store_untiled(atomic=): f16/bf16 max/min only in GMEM, no f32 max/min), the
# single-thread `red` a scalar atomic is, and the TMA engine's reductions (no f32 max/min).
_F, _H = DType.f32, (DType.f16, DType.bf16)
_I = (DType.i32, DType.u32)
# f32 max and min in GMEM have no `red` of their own: they are two integer `red`s on the float's bits
# (lowering/atomic.py, _f32_extreme_red), one element at a time.
# int64 (jax_enable_x64) too, one `red.add.u64` / `.max.s64` / `.min.s64` per element (probe 50c).
ATOMIC_GMEM = {"add": frozenset((_F, *_H, *_I, DType.i64)), "max": frozenset((_F, *_H, *_I, DType.i64)),
               "min": frozenset((_F, *_H, *_I, DType.i64))}
ATOMIC_SMEM = {"add": frozenset((_F, *_H, *_I)), "max": frozenset(_I), "min": frozenset(_I)}
# (int64 with jax_enable_x64: one `red.add.u64` / `red.max.s64` of a single element, probe 49c; float16 and
# bfloat16 add: `red.add.noftz.f16` / `.bf16`, as a scatter's elements take, probe 50c)
ATOMIC_SCALAR = {"add": frozenset((_F, *_H, *_I, DType.i64)), "max": frozenset((_F, *_H, *_I, DType.i64)),
                 "min": frozenset((_F, *_H, *_I, DType.i64))}
# One element a `red` from every thread (scatters): float16/bfloat16 add one element at a time
# (`red.add.noftz.f16`, as tensor atomics of odd pairs do); their max and min come in pairs only; float32
# max and min are two integer `red`s on the bits, as in ATOMIC_GMEM.
# int64 add, max and min (jax_enable_x64's ints: `red.add.u64`, `red.max.s64`; probe 50c).
ATOMIC_ELEMENT = {"add": frozenset((_F, *_H, *_I, DType.i64)), "max": frozenset((_F, *_I, DType.i64)),
                  "min": frozenset((_F, *_I, DType.i64))}
# Scatters into an SMEM buffer (a CTA's histogram, probe 46k): `red.shared::cta` one element at a time,
# float32, float16, bfloat16 and 32-bit integer add (the 16-bit ones `red.shared::cta.add.noftz.f16`, as an
# SMEM window's odd elements take, probe 47d), 32-bit integer max and min, and float32 max and min as two
# integer `red`s on the bits (as in GMEM: lowering/atomic.py, _f32_extreme_red; probe 47d).
ATOMIC_SMEM_ELEMENT = {"add": frozenset((_F, *_H, *_I)), "max": frozenset((_F, *_I)), "min": frozenset((_F, *_I))}
# Atomics that return the old value (`atom`, one thread, a single GMEM element: ml.atomic_cas, ml.atomic_xchg,
# `t = ml.atomic_add(count, 1)`): PTX's atom.cas.b32 and atom.exch.b32 take any 32-bit word, atom.add f32 and
# 32-bit integers, atom.max and atom.min 32-bit integers.
# int64 too (jax_enable_x64's default ints: a 64-bit ticket or lock): atom.add.u64, max/min.s64, cas/exch.b64.
# float32 max and min too: one integer atom on the bits, by the value's sign (lowering/atomic_rmw.py, probe 49c).
# float16 and bfloat16 add and cas (probe 50c): atom.add.noftz.f16 / .bf16 and atom.cas.b16 (PTX has no 16-bit
# exch, max or min of its own).
# float16 and bfloat16 exch, max and min too (probe 53c): a loop of atom.cas.b16 on the element
# (lowering/atomic_rmw.py, _half_cas_loop); a single element's max or min takes it also where its value is unused.
ATOMIC_FETCH = {"add": frozenset((_F, *_H, *_I, DType.i64)), "max": frozenset((_F, *_H, *_I, DType.i64)),
                "min": frozenset((_F, *_H, *_I, DType.i64)), "cas": frozenset((_F, *_H, *_I, DType.i64)),
                "exch": frozenset((_F, *_H, *_I, DType.i64))}
# Triton's bitwise atomics (probe 49c): `red`/`atom` and, or, xor of 32-bit integers (.b32) everywhere.
for _t in (ATOMIC_GMEM, ATOMIC_SMEM, ATOMIC_SCALAR, ATOMIC_ELEMENT, ATOMIC_SMEM_ELEMENT, ATOMIC_FETCH):
  _t.update({k: frozenset(_I) for k in ("and", "or", "xor")})
# 8- and 16-bit integers (probe 56b): PTX has no atom or red of them, so every kind is a loop of `atom.cas.b32`
# on the aligned 32-bit word that holds the element, the other bytes kept as found (lowering/atomic_narrow.py),
# element by element, in GMEM and SMEM; in interpret mode jnp's .at[] numbers (an add wraps).
NARROW_INTS = (DType.i8, DType.u8, DType.i16, DType.u16)
for _t in (ATOMIC_GMEM, ATOMIC_SMEM, ATOMIC_SCALAR, ATOMIC_ELEMENT, ATOMIC_SMEM_ELEMENT, ATOMIC_FETCH):
  for _k in _t:
    _t[_k] = _t[_k] | frozenset(NARROW_INTS)
# float16 and bfloat16 max and min one element at a time (scatters, tensors held singly): a loop of `atom.cas.b16` on
# the element (GMEM, atomic_rmw._half_cas_loop, as their old values take) or of `atom.shared.cas.b32` on its word
# (SMEM, lowering/atomic_narrow.py); probe 56b.
for _t in (ATOMIC_ELEMENT, ATOMIC_SMEM_ELEMENT):
  for _k in ("max", "min"):
    _t[_k] = _t[_k] | frozenset(_H)


def dtype_list(dtypes) -> str:
  """An atomic's dtypes as its diagnostics list them: by name, the 8- and 16-bit integers (every kind takes all
  four, probe 56b) said once, at the end."""
  narrow = set(NARROW_INTS) <= set(dtypes)
  names = ", ".join(sorted(str(x) for x in dtypes if not (narrow and x in NARROW_INTS)))
  return names + (", and 8- and 16-bit integers" if narrow else "")


ATOMIC_SEMS = ("relaxed", "acquire", "release", "acq_rel")      # Triton's sem= (PTX's atom orders)
ATOMIC_SCOPES = ("gpu", "cta", "sys")                            # Triton's scope=
TMA_REDUCE = {"add": frozenset((_F, *_H, *_I, DType.i64)), "max": frozenset((*_H, *_I, DType.i64)),
              "min": frozenset((*_H, *_I, DType.i64))}
