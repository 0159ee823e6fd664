"""Hand-written Lane-semantics Mosaic GPU matmul for Hopper (sm_90a).

    C[M, N] = A[M, K] @ B[K, N]      A, B: f16 or bf16, f32 accumulation, C in the input dtype.

Standalone prototype: it uses ``jax.experimental.mosaic.gpu`` (``mgpu``) directly through
``mgpu.as_gpu_kernel`` and does not depend on ``mgpu_dsl``.  Tested to build and export
(``jax.export(..., platforms=["cuda"])``) on a CPU with jax 0.10.2; written against the APIs
that are unchanged in jax 0.11.2 (no ``BarrierRef.test()``, ``arrive_expect_tx`` called with a
positional byte count, dialect builders only where their signatures are stable).

Design (warp-specialized, persistent, "cooperative" in CUTLASS terms)
--------------------------------------------------------------------
* block = 384 threads = 3 warpgroups.
    - WG 0 and WG 1 are *consumers*. Each owns ``tile_m // 2`` rows of the CTA tile and all
      ``tile_n`` columns, i.e. a (tile_m/2, tile_n) f32 accumulator in registers (WGMMA_LAYOUT).
      With the default 128x256 tile each consumer WG issues m64n256k16 WGMMAs on a
      64x256 accumulator (128 f32 registers per thread).
    - WG 2 is the *producer*. One elected thread of it issues all TMA loads.
    - ``setmaxnreg``: the producer drops to 40 registers, the consumers raise to 232
      (2*232 + 40 = 504 <= 512 registers per thread-slot of the 64K register file).
* Persistent grid: ``num_ctas`` CTAs (default = number of SMs, 132 on an H200) walk the
  output tiles ``t = blockIdx.x, blockIdx.x + num_ctas, ...``.  Tile ids are mapped to
  (pid_m, pid_n) with Triton's grouped ordering (GROUP_M = ``group_m`` tile-rows) so
  concurrently running CTAs share A row-panels and B column-panels in L2.
* SMEM ring of ``stages`` slots, each holding one (tile_m, tile_k) A tile and one
  (tile_k, tile_n) B tile, TMA-loaded with swizzle=128 and TileTransform((8, 64)) (the
  layout WGMMA consumes directly; B is MN-major, which mgpu.wgmma detects from strides).
  Two mbarrier groups synchronize the ring:
    - ``full[s]``  (arrival count 1): producer does arrive.expect_tx(bytes of A+B tile) and
      the two TMA loads complete the transaction bytes.
    - ``empty[s]`` (arrival count 256 = 2 consumer WGs x 128 threads): every consumer thread
      arrives once it knows the WGMMAs reading slot s have completed.
  A single running step counter ``it`` (over all tiles of the CTA) gives
  ``slot = it % stages`` and ``phase = (it // stages) & 1`` for both sides; the producer
  waits ``empty`` with the opposite parity, so its first pass through the ring does not
  block (the standard "producer starts in phase 1" trick).
* Consumer main loop per k-step: wait full[slot] -> wgmma (acc += A_wg @ B) ->
  wgmma.commit_group -> wgmma.wait_group(1) (keeps the current group in flight; guarantees
  the *previous* step's group finished) -> arrive on empty[previous slot].  After the last
  k-step: wait_group(0) and release the last slot.
* Epilogue (per consumer WG, overlapped with the producer already prefetching the next
  tile): acc -> dtype, split into (epi_m, epi_n) = (64, 64) chunks; each chunk is
  ``store_tiled`` (swizzle 128) into one of two SMEM staging buffers per WG,
  ``commit_shared`` (fence.proxy.async + WG barrier), then TMA-stored to GMEM by one
  elected thread.  Before a staging buffer is reused the WG waits with
  ``cp.async.bulk.wait_group.read 1``.  The staging buffers are separate from the ring
  (the producer keeps loading during the epilogue), which is why they are chunked:
  4 x 48 KiB ring + 4 x 8 KiB staging = 224 KiB < 227 KiB.

Constraints: M % tile_m == 0, N % tile_n == 0, K % tile_k == 0 (checked; raise ValueError).
"""

from __future__ import annotations

import contextlib
import dataclasses

import jax
import jax.numpy as jnp
import jax.experimental.mosaic.gpu as mgpu
from jax._src.interpreters import mlir as jax_mlir
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, gpu, llvm, nvvm, scf

__all__ = ["MatmulConfig", "build_matmul", "matmul", "smem_bytes", "default_num_ctas"]

SWIZZLE = 128                      # bytes; one swizzle row = 64 16-bit elements
NUM_CONSUMERS = 2                  # consumer warpgroups
WG_SIZE = 128
MAX_SMEM = 227 * 1024              # Hopper opt-in SMEM per block (what Mosaic assumes w/o GPU)


@dataclasses.dataclass(frozen=True)
class MatmulConfig:
  tile_m: int = 128        # CTA tile rows; each of the 2 consumer WGs owns tile_m // 2 rows
  tile_n: int = 256        # CTA tile cols (<= 256: one WGMMA N group)
  tile_k: int = 64         # K per pipeline stage, multiple of 64 (128-byte swizzle)
  stages: int = 4          # SMEM ring depth
  group_m: int = 8         # grouped tile order (Triton GROUP_M)
  epi_m: int = 64          # epilogue chunk rows
  epi_n: int = 64          # epilogue chunk cols (64 = one 128-byte swizzle row)
  num_ctas: int | None = None   # persistent grid size; None -> #SMs (132 without a GPU)
  producer_regs: int = 40
  consumer_regs: int = 232

  def describe(self) -> str:
    d = (f"{self.tile_m}x{self.tile_n}x{self.tile_k} s{self.stages} g{self.group_m}"
         f" epi{self.epi_m}x{self.epi_n}")
    if self.num_ctas is not None:
      d += f" c{self.num_ctas}"
    if (self.producer_regs, self.consumer_regs) != (40, 232):
      d += f" r{self.producer_regs}/{self.consumer_regs}"
    return d


def default_num_ctas() -> int:
  try:
    dev = jax.devices()[0]
    if dev.platform == "gpu":
      return int(dev.core_count)
  except Exception:  # pragma: no cover - defensive
    pass
  return 132  # H100 SXM / H200


def smem_bytes(cfg: MatmulConfig, itemsize: int = 2) -> int:
  ring = cfg.stages * (cfg.tile_m * cfg.tile_k + cfg.tile_k * cfg.tile_n) * itemsize
  epi = NUM_CONSUMERS * 2 * cfg.epi_m * cfg.epi_n * itemsize
  bars = 2 * cfg.stages * 8
  return ring + epi + bars


def _check(m, n, k, dtype, cfg: MatmulConfig):
  dtype = jnp.dtype(dtype)
  if dtype not in (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16)):
    raise ValueError(f"only f16/bf16 supported, got {dtype}")
  swz_elems = SWIZZLE // dtype.itemsize
  wg_m = cfg.tile_m // NUM_CONSUMERS
  if cfg.tile_m % (NUM_CONSUMERS * 64):
    raise ValueError(f"tile_m={cfg.tile_m} must be a multiple of {NUM_CONSUMERS * 64}")
  if cfg.tile_n % swz_elems or not 0 < cfg.tile_n <= 256:
    raise ValueError(f"tile_n={cfg.tile_n} must be a multiple of {swz_elems} and <= 256")
  if cfg.tile_k % swz_elems:
    raise ValueError(f"tile_k={cfg.tile_k} must be a multiple of {swz_elems}")
  if cfg.tile_m > 256 or cfg.tile_k > 256:
    raise ValueError("TMA boxes are limited to 256 rows")
  if wg_m * cfg.tile_n > 128 * 256:
    raise ValueError(f"accumulator {wg_m}x{cfg.tile_n} per warpgroup is too large "
                     "(> 128 f32 registers per thread)")
  if wg_m % cfg.epi_m or cfg.epi_m % 64:
    raise ValueError(f"epi_m={cfg.epi_m} must be a multiple of 64 dividing {wg_m}")
  if cfg.tile_n % cfg.epi_n or cfg.epi_n != swz_elems:
    raise ValueError(f"epi_n={cfg.epi_n} must be {swz_elems} and divide tile_n")
  if cfg.stages < 2:
    raise ValueError("need at least 2 stages")
  if 2 * cfg.stages > 32:
    raise ValueError("at most 16 stages (32 barriers per group)")
  if m % cfg.tile_m or n % cfg.tile_n or k % cfg.tile_k:
    raise ValueError(f"shape M={m} N={n} K={k} must be divisible by the tile "
                     f"({cfg.tile_m}, {cfg.tile_n}, {cfg.tile_k})")
  if cfg.producer_regs + NUM_CONSUMERS * cfg.consumer_regs > 512:
    raise ValueError("register budget: producer_regs + 2*consumer_regs must be <= 512")
  for r in (cfg.producer_regs, cfg.consumer_regs):
    if r % 8 or not 24 <= r <= 256:
      raise ValueError(f"setmaxnreg counts must be multiples of 8 in [24, 256], got {r}")
  if smem_bytes(cfg, dtype.itemsize) > MAX_SMEM:
    raise ValueError(f"config {cfg.describe()} needs {smem_bytes(cfg, dtype.itemsize)} B "
                     f"of SMEM > {MAX_SMEM}")


# ----------------------------------------------------------------------------- IR helpers
def _idx(v: int) -> ir.Value:
  return arith.constant(ir.IndexType.get(), v)


def _i32(v: int) -> ir.Value:
  return arith.constant(ir.IntegerType.get_signless(32), v)


@contextlib.contextmanager
def _for(lb: ir.Value, ub: ir.Value, step: ir.Value):
  """scf.for without loop-carried values; yields the induction variable."""
  op = scf.ForOp(lb, ub, step)
  with ir.InsertionPoint(op.body):
    yield op.induction_variable
    scf.YieldOp([])


def _parity(it: ir.Value, stages: int, flip: bool) -> ir.Value:
  """i1 parity of ring pass number it // stages (optionally inverted)."""
  ph = arith.andi(arith.divui(it, _idx(stages)), _idx(1))
  pred = arith.CmpIPredicate.eq if flip else arith.CmpIPredicate.ne
  return arith.cmpi(pred, ph, _idx(0))


def _setmaxnreg(n: int, increase: bool):
  try:
    action = (nvvm.SetMaxRegisterAction.increase if increase
              else nvvm.SetMaxRegisterAction.decrease)
    nvvm.setmaxregister(n, action)
  except (AttributeError, TypeError):  # fall back to raw PTX (same instruction)
    kind = "inc" if increase else "dec"
    llvm.inline_asm(ir.Type.parse("!llvm.void"), [],
                    f"setmaxnreg.{kind}.sync.aligned.u32 {n};", "",
                    has_side_effects=True)


def _tile_coords(t: ir.Value, num_pid_m: int, num_pid_n: int, group_m: int):
  """Triton grouped ordering: linear tile id -> (pid_m, pid_n) (index values)."""
  in_group = _idx(group_m * num_pid_n)
  group_id = arith.divui(t, in_group)
  first_m = arith.muli(group_id, _idx(group_m))
  gsize = arith.minui(arith.subi(_idx(num_pid_m), first_m), _idx(group_m))
  r = arith.remui(t, in_group)
  pid_m = arith.addi(first_m, arith.remui(r, gsize))
  pid_n = arith.divui(r, gsize)
  return pid_m, pid_n


# ----------------------------------------------------------------------------- kernel
def _build(m: int, n: int, k: int, dtype, cfg: MatmulConfig):
  dtype = jnp.dtype(dtype)
  _check(m, n, k, dtype, cfg)
  itemsize = dtype.itemsize
  swz_elems = SWIZZLE // itemsize
  tiling = (8, swz_elems)
  tile_m, tile_n, tile_k, S = cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.stages
  wg_m = tile_m // NUM_CONSUMERS
  epi_m, epi_n = cfg.epi_m, cfg.epi_n
  num_pid_m, num_pid_n = m // tile_m, n // tile_n
  num_tiles = num_pid_m * num_pid_n
  k_steps = k // tile_k
  num_ctas = min(cfg.num_ctas or default_num_ctas(), num_tiles)
  stage_bytes = (tile_m * tile_k + tile_k * tile_n) * itemsize
  n_chunks = (wg_m // epi_m) * (tile_n // epi_n)
  # A staging slot is reused every 2 chunks; with an odd chunk count the same slot can be
  # reused by consecutive chunks (across tiles), so then wait for all stores.
  epi_allow = 1 if n_chunks % 2 == 0 else 0

  a_tiled = mgpu.tile_shape((tile_m, tile_k), tiling)   # (tile_m/8, tile_k/64, 8, 64)
  b_tiled = mgpu.tile_shape((tile_k, tile_n), tiling)   # (tile_k/8, tile_n/64, 8, 64)
  e_tiled = mgpu.tile_shape((epi_m, epi_n), tiling)     # (epi_m/8, 1, 8, 64)
  scratch_shape = (
      jax.ShapeDtypeStruct((S, *a_tiled), dtype),
      jax.ShapeDtypeStruct((S, *b_tiled), dtype),
      jax.ShapeDtypeStruct((NUM_CONSUMERS, 2, *e_tiled), dtype),
      mgpu.Barrier(arrival_count=1, num_barriers=S),                        # full
      mgpu.Barrier(arrival_count=NUM_CONSUMERS * WG_SIZE, num_barriers=S),  # empty
  )
  xform = mgpu.TileTransform(tiling)

  def body(ctx: mgpu.LaunchContext, a_gmem, b_gmem, c_gmem, scratch):
    a_smem, b_smem, e_smem, full, empty = scratch
    out_ty = c_gmem.type.element_type
    index = ir.IndexType.get()
    wg = mgpu.warpgroup_idx(sync=True)                       # i32, uniform per warp
    bid = gpu.block_id(gpu.Dimension.x)

    def tiles():
      """Loop over this CTA's output tiles; yields (tile, base step counter, m0, n0)."""
      @contextlib.contextmanager
      def cm():
        with _for(bid, _idx(num_tiles), _idx(num_ctas)) as t:
          local = arith.divui(arith.subi(t, bid), _idx(num_ctas))
          base = arith.muli(local, _idx(k_steps))
          pid_m, pid_n = _tile_coords(t, num_pid_m, num_pid_n, cfg.group_m)
          m0 = arith.muli(pid_m, _idx(tile_m))
          n0 = arith.muli(pid_n, _idx(tile_n))
          yield base, m0, n0
      return cm()

    # ------------------------------------------------------------------ producer (WG 2)
    is_producer = arith.cmpi(arith.CmpIPredicate.eq, wg, _i32(NUM_CONSUMERS))
    with mgpu.when(is_producer):
      _setmaxnreg(cfg.producer_regs, increase=False)
      with mgpu.single_thread(scope=mgpu.ThreadSubset.WARPGROUP):
        with tiles() as (base, m0, n0):
          with _for(_idx(0), _idx(k_steps), _idx(1)) as ki:
            it = arith.addi(base, ki)
            slot = arith.remui(it, _idx(S))
            # Slot free? (first pass through the ring: parity trick returns at once.)
            empty[slot].wait_parity(_parity(it, S, flip=True))
            bar = full[slot]
            bar.arrive_expect_tx(stage_bytes)       # positional: renamed in jax 0.11
            k0 = arith.muli(ki, _idx(tile_k))
            ctx.async_copy(
                src_ref=a_gmem, dst_ref=mgpu.memref_slice(a_smem, slot),
                gmem_slice=(mgpu.ds(m0, tile_m), mgpu.ds(k0, tile_k)),
                gmem_transform=xform, swizzle=SWIZZLE, barrier=bar,
                arrive=False, predicate=None)
            ctx.async_copy(
                src_ref=b_gmem, dst_ref=mgpu.memref_slice(b_smem, slot),
                gmem_slice=(mgpu.ds(k0, tile_k), mgpu.ds(n0, tile_n)),
                gmem_transform=xform, swizzle=SWIZZLE, barrier=bar,
                arrive=False, predicate=None)

    # ------------------------------------------------------------- consumers (WG 0, 1)
    is_consumer = arith.cmpi(arith.CmpIPredicate.ult, wg, _i32(NUM_CONSUMERS))
    with mgpu.when(is_consumer):
      _setmaxnreg(cfg.consumer_regs, increase=True)
      wg_idx = arith.index_cast(index, wg)
      wg_row = arith.muli(wg_idx, _idx(wg_m))                 # first row of this WG
      wg_row_tiles = arith.muli(wg_idx, _idx(wg_m // 8))      # same, in 8-row tiles
      with tiles() as (base, m0, n0):
        acc0 = mgpu.WGMMAAccumulator.zero(wg_m, tile_n)

        @mgpu.fori(_idx(k_steps), acc0)
        def kloop(ki, acc):
          it = arith.addi(base, ki)
          slot = arith.remui(it, _idx(S))
          full[slot].wait_parity(_parity(it, S, flip=False))
          a_ref = mgpu.memref_slice(a_smem, (slot, mgpu.ds(wg_row_tiles, wg_m // 8)))
          b_ref = mgpu.memref_slice(b_smem, slot)
          acc = mgpu.wgmma(acc, a_ref, b_ref, swizzle=SWIZZLE)
          nvvm.wgmma_commit_group_sync_aligned()
          nvvm.wgmma_wait_group_sync_aligned(1)
          # The group of step ki-1 has completed: hand its slot back to the producer.
          prev_slot = arith.remui(arith.addi(it, _idx(S - 1)), _idx(S))
          not_first = arith.cmpi(arith.CmpIPredicate.ne, ki, _idx(0))
          empty[prev_slot].arrive(predicate=not_first)
          return acc

        nvvm.wgmma_wait_group_sync_aligned(0)
        last_slot = arith.remui(arith.addi(base, _idx(k_steps - 1)), _idx(S))
        empty[last_slot].arrive()

        # Epilogue: registers -> dtype -> swizzled SMEM chunk -> TMA store.
        out = kloop.result.value.astype(out_ty)
        row0 = arith.addi(m0, wg_row)
        chunk = 0
        for i in range(wg_m // epi_m):
          for j in range(tile_n // epi_n):
            buf = mgpu.memref_slice(e_smem, (wg_idx, chunk % 2))
            ctx.await_async_copy(epi_allow, await_read_only=True)   # buf free again
            out[i * epi_m:(i + 1) * epi_m, j * epi_n:(j + 1) * epi_n].store_tiled(
                buf, swizzle=SWIZZLE)
            mgpu.commit_shared()
            ctx.async_copy(
                src_ref=buf, dst_ref=c_gmem,
                gmem_slice=(mgpu.ds(arith.addi(row0, _idx(i * epi_m)), epi_m),
                            mgpu.ds(arith.addi(n0, _idx(j * epi_n)), epi_n)),
                gmem_transform=xform, swizzle=SWIZZLE)
            chunk += 1
      ctx.await_async_copy(0)   # all output stores done before the CTA exits

  a_ty = jax.ShapeDtypeStruct((m, k), dtype)
  b_ty = jax.ShapeDtypeStruct((k, n), dtype)
  c_ty = jax.ShapeDtypeStruct((m, n), dtype)
  return mgpu.as_gpu_kernel(
      body, (num_ctas, 1, 1), ((NUM_CONSUMERS + 1) * WG_SIZE, 1, 1),
      (a_ty, b_ty), c_ty, scratch_shape)


_CACHE: dict = {}


def build_matmul(m: int, n: int, k: int, dtype=jnp.float16,
                 config: MatmulConfig | None = None):
  """Returns a jitted callable f(a, b) -> c for fixed shapes/dtype/config (cached)."""
  cfg = config or MatmulConfig()
  if cfg.num_ctas is None:
    cfg = dataclasses.replace(cfg, num_ctas=default_num_ctas())
  key = (m, n, k, jnp.dtype(dtype).name, cfg)
  if key not in _CACHE:
    with jax_mlir.make_ir_context(), ir.Location.unknown():
      _CACHE[key] = _build(m, n, k, dtype, cfg)
  return _CACHE[key]


def matmul(a: jax.Array, b: jax.Array, config: MatmulConfig | None = None) -> jax.Array:
  if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
    raise ValueError(f"bad shapes {a.shape} @ {b.shape}")
  if a.dtype != b.dtype:
    raise ValueError(f"dtype mismatch {a.dtype} vs {b.dtype}")
  (m, k), (_, n) = a.shape, b.shape
  return build_matmul(m, n, k, a.dtype, config)(a, b)


if __name__ == "__main__":
  # Smoke test: build + export for the default config.
  for dt in (jnp.float16, jnp.bfloat16):
    f = build_matmul(4096, 4096, 4096, dt)
    spec = jax.ShapeDtypeStruct((4096, 4096), dt)
    exp = jax.export.export(jax.jit(f), platforms=["cuda"])(spec, spec)
    print(jnp.dtype(dt).name, "export OK", "mosaic_gpu_v2" in exp.mlir_module())
