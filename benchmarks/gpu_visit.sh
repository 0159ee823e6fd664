#!/usr/bin/env bash
# One device visit: install, then the named steps, each under its own timeout, logs to $OUT.
#   bash benchmarks/gpu_visit.sh STEP[:SECONDS] ...     (run from the repository root, with .whl/ carried)
# A step is a name below; the log of each is $OUT/STEP.log. Steps run in order; a failing or
# timed-out step is reported and the next one runs.
set -u
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/install.log" 2>&1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { echo "install failed"; tail "$OUT/install.log"; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv >"$OUT/gpu.txt" 2>&1
# Nsight Compute of the backward's main kernel: ncu_bwd HEAD_DIM [on|off (dQ deferred)] [TAG]; an archive a run
ncu_bwd() {
  local hd=$1 tag=${3:-$1} flags="--bwd --head-dim $1"
  [ -n "${2:-}" ] && flags="$flags --dq-deferred $2"
  echo "=== head_dim $hd ${2:+dq deferred $2}"
  MOSAIC_GPU_DUMP_PTXAS=1 python3 benchmarks/profile_attention.py $flags --runs 1 2>&1 | grep -E "error|spill|Used|dkv|deferred" | head -8
  ncu --clock-control none --kernel-name regex:"dkv|deferred" --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --import-source no -f -o "$OUT/bwd$tag" \
    python3 benchmarks/profile_attention.py $flags --runs 2 2>&1 | grep -E "error|==PROF==|ERR" | head -5
  ncu -i "$OUT/bwd$tag.ncu-rep" --page raw --csv >"$OUT/raw$tag.csv" 2>&1
  ncu -i "$OUT/bwd$tag.ncu-rep" --page source --csv --print-source sass >"$OUT/sass$tag.csv" 2>&1
  ls -la "$OUT"/*$tag*; tar czf "$OUT/ncu$tag.tgz" -C "$OUT" "sass$tag.csv" "raw$tag.csv" && rm -f "$OUT/sass$tag.csv" "$OUT/raw$tag.csv" "$OUT/bwd$tag.ncu-rep"
  tar xzf "$OUT/ncu$tag.tgz" -C /tmp "raw$tag.csv"; python3 - "/tmp/raw$tag.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
i = next(k for k, r in enumerate(rows) if "ID" in r[:3] or "Kernel Name" in r)
head, vals = rows[i], rows[i + 2] if len(rows) > i + 2 else rows[-1]
for h, v in zip(head, vals):
  if "stall" in h and "pct" not in h or "duration" in h or "pipe_tensor" in h or "inst_executed" in h:
    print(f"{h:90s} {v}")
PY
}
step() {
  case "$1" in
    safety)      python3 -u -m pytest -q -p no:cacheprovider tests/test_gpu_safety.py tests/test_safety_params.py ;;
    gputests)    python3 -u -m pytest -q -p no:cacheprovider -m gpu tests ;;
    # The whole GPU suite in six parallel shards (its time is mostly compilation): about 250 s.
    gpu_all)     python3 -u benchmarks/gpu_shards.py --shards 6 --timeout 430 ;;
    gpu_all8)    python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 430 ;;   # (800 tests, 16 cores)
    gpu_all12)   python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 400 ;;  # (880 tests: compilation on 12 of 16 cores)
    # GPU vs interpret mode over about 1400 small kernels of register layouts (design note 61).
    layouts)     python3 -u benchmarks/probe_layouts.py --jobs 15 ;;
    layouts_quick) python3 -u benchmarks/probe_layouts.py --jobs 15 --quick ;;
    layouts_mf)  python3 -u benchmarks/probe_layouts.py --jobs 4 --timeout 60 --filter masked_flatten ;;
    division)    python3 -u benchmarks/probe_division.py ;;
    hang)        timeout 70 python3 -u benchmarks/probe_hang.py; timeout 40 python3 -u benchmarks/probe_hang.py --dtype int32 ;;
    # which variants of the hanging case hang (dtype, masked rows, programs), PTX and SASS of each in one archive
    hang_sweep)  MOSAIC_GPU_DUMP_TO=$OUT/hangdump python3 -u benchmarks/probe_hang.py --sweep --timeout 25;
                 tar czf "$OUT/hangdump.tgz" -C "$OUT" hangdump && rm -rf "$OUT/hangdump" ;;
    gpu_30a)     python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe30a.py ;;
    # the GPU suite's last 263 tests (from test_probe30c on): the part a hung shard of gpu_all left unrun
    gpu_rest24)  python3 -u benchmarks/gpu_shards.py --shards 6 --timeout 280 tests/test_probe30c.py tests/test_probe31e.py tests/test_probe32a.py tests/test_probe32b.py tests/test_probe32d.py tests/test_probe32e.py tests/test_probe33a.py tests/test_probe33b.py tests/test_probe33c.py tests/test_probe33d.py tests/test_probe33e.py tests/test_probe_e.py tests/test_probe_g.py tests/test_probe_messages.py tests/test_ragged.py tests/test_ragged_dot.py tests/test_reduce_diagnostics.py tests/test_reductions.py tests/test_register_index.py tests/test_rowwise.py tests/test_scan.py tests/test_scatter.py tests/test_sort.py tests/test_split_rows.py tests/test_stats.py tests/test_sync_carried.py tests/test_sync_dots.py tests/test_sync_gmem.py tests/test_sync_proxy.py tests/test_sync_stages.py tests/test_tensor_parallel.py tests/test_tf32.py tests/test_transpose.py tests/test_unit_axes.py tests/test_user_mistakes.py tests/test_vmap.py tests/test_warp_specialize.py ;;
    # which part of ssd_intra (test_probe33c) was wrong at block=256 on the H200: variants against interpret mode
    ssd256)      python3 -u benchmarks/probe_ssd256.py ;;
    # two-stage persistent forwards (stages released early) and the next tile's Q under the epilogue (issue #9)
    attn_pf)     python3 -u benchmarks/attn_prefetch.py --head-dim 128 --seq 4096 --seq 1024 && python3 -u benchmarks/attn_prefetch.py --head-dim 64 --seq 1024 --seq 4096 ;;
    # the balanced persistent grid against one program an SM (attn_prefetch.py's variants), full attention
    # ml.exp2's emulate on the GPU, then the forward's share of exponentials on the FMA units (twenty-seventh session)
    fastmath)    python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_fast_math.py ;;
    attn_emu)    python3 -u benchmarks/attn_emulate.py --head-dim 64 --causal full --seq 4096 --seq 1024 && python3 -u benchmarks/attn_emulate.py --head-dim 64 --causal causal --seq 4096 && python3 -u benchmarks/attn_emulate.py --head-dim 128 --causal full --seq 4096 ;;
    attn_emu2)   export EMULATE_SHARES="0 0.0625 0.125 0.1875"; python3 -u benchmarks/attn_emulate.py --head-dim 64 --causal causal --seq 1024 --seq 4096 --seq 16384 && python3 -u benchmarks/attn_emulate.py --head-dim 128 --causal causal --seq 1024 --seq 4096 ;;
    attn_cfg)    python3 -u benchmarks/attn_configs.py bq=128 "bq=128,stages=2" "bq=128,stages=4" stages=2 --head-dim 64 --causal full --seq 1024 --seq 4096 && python3 -u benchmarks/attn_configs.py stages=2 stages=4 persistent=False --head-dim 64 --head-dim 128 --causal causal --seq 1024 ;;
    # the next tile's Q under this tile's epilogue (Config.prefetch_q, thirty-first session); 128: two stages fit
    attn_pq)     python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_attention.py -k persistent && python3 -u benchmarks/attn_configs.py prefetch_q=True --head-dim 64 --causal full --causal causal --seq 1024 --seq 4096 && python3 -u benchmarks/attn_configs.py stages=2 "prefetch_q=True,stages=2" --head-dim 128 --causal full --causal causal --seq 1024 --seq 4096 ;;
    # the fused backward on one warpgroup of 64 keys a CTA (thirty-first session), and its GPU tests
    attn_bwd1wg) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_attention.py -k one_warpgroup && python3 -u benchmarks/attn_bwd_order.py --one-wg ;;
    attn_cfg2)   python3 -u benchmarks/attn_configs.py "bq=128,bkv=256" "bq=128,bkv=256,stages=2" "bkv=256,stages=2" --head-dim 64 --causal full --seq 1024 --seq 4096 && python3 -u benchmarks/attn_configs.py "bkv=64" "bkv=64,stages=4" stages=2 --head-dim 128 --causal full --seq 1024 ;;
    # the thirtieth session's probes (40m-p) and attention's head_dim 80-112 with dQ's key block 128
    # the thirty-first session's merged probes 41q-t and the files their fixes touched
    # the thirty-second session: the backward's blocks in chunks across heads (bwd_lpt), the padded head_dim 48-112
    attn_bwd_lpt) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_attention.py -k "chunks or partial_last" && python3 -u benchmarks/attn_bwd_order.py --lpt ;;
    # the thirty-third session: probe 43c (interpret mode against the GPU) and the test files whose inputs moved to numpy
    gpu_s34risky) python3 -u benchmarks/gpu_shards.py --shards 10 --timeout 200 tests/test_unaligned_windows.py tests/test_probe44d.py tests/test_probe44b.py::test_masked_tail_window_past_the_end_gpu tests/test_probe44e.py::test_conditional_read_past_the_end_gpu ;;   # (each may fault without its fix: few tests a shard)
    # Session 36's second visit: which of probe 46a's odd fills and copies faults (each statement a kernel in its
    # own process) beside the GPU tests the first visit's faulted shards left unrun and the failures since fixed
    # (benchmarks/gpu_s36_rest.txt), then probe 46a's two GPU tests alone, with their whole error
    s36_rest)    python3 -u benchmarks/probe_odd_pieces.py >"$OUT/odd_pieces.log" 2>&1 &
                 mapfile -t ids < benchmarks/gpu_s36_rest.txt
                 python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 105 "${ids[@]}"
                 wait; echo "== odd pieces"; cat "$OUT/odd_pieces.log" ;;
    s36_46a)     for t in test_gpu_odd_fills test_gpu_odd_copies; do
                   CUDA_LAUNCH_BLOCKING=1 timeout 60 python3 -u -m pytest -x -q -p no:cacheprovider -m gpu tests/test_probe46a.py::$t >"$OUT/$t.log" 2>&1 &
                 done; wait
                 for t in test_gpu_odd_fills test_gpu_odd_copies; do echo "== $t"; grep -E "^E |Error|error|passed|failed" "$OUT/$t.log" | head -12; done ;;
    # Session 37: probe 46a's odd fills and copies after the ldmatrix/stmatrix alignment fix (each statement its own
    # process, then the two GPU tests), the new alignment tests, and probe 46f's chunked vmaps with their whole assertion
    s37_odd)     python3 -u benchmarks/probe_odd_pieces.py
                 python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe46a.py tests/test_txmatrix_rows.py 2>&1 | tail -3
                 python3 -u -m pytest -q -p no:cacheprovider -m gpu "tests/test_probe46f.py::test_gpu_vmaps_past_the_grid_axis_limit_match_numpy" 2>&1 | grep -E "^E |^>|passed|failed" | head -40 ;;
    s37_vmap)    timeout 150 python3 -u benchmarks/probe_vmap_alias.py ;;   # which vmap of an aliased kernel goes wrong
    # Session 37's merged probes 47a-h: their GPU tests and those of the files their fixes touched, beside the vmap probe
    s37_a)       timeout 150 python3 -u benchmarks/probe_vmap_alias.py >"$OUT/vmap_alias.log" 2>&1 &
                 python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 300 $(ls tests/test_probe47*.py) tests/test_mma.py tests/test_matmul_fp8.py tests/test_narrow_swizzle.py tests/test_tf32.py tests/test_probe39b.py tests/test_probe35c.py tests/test_probe35d.py tests/test_attention.py tests/test_scatter.py tests/test_gather.py tests/test_probe46k.py tests/test_txmatrix_rows.py
                 wait; echo "== vmap alias"; cat "$OUT/vmap_alias.log" ;;
    # Session 38's merged probes 48a-h (locks and tickets, traced calls built when lowered, padded GQA dots, jnp
    # products staged by the compiler, odd tiles of few heads) beside 47a-h, which never ran, and the vmap probe
    s38_a)       timeout 150 python3 -u benchmarks/probe_vmap_alias.py >"$OUT/vmap_alias.log" 2>&1 &
                 python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 330 $(ls tests/test_probe48*.py tests/test_probe47*.py) tests/test_vmap.py tests/test_autodiff.py tests/test_probe40o.py tests/test_probe46f.py tests/test_mma.py tests/test_tf32.py tests/test_scatter.py tests/test_gather.py tests/test_paged_attention.py
                 wait; echo "== vmap alias"; cat "$OUT/vmap_alias.log" ;;
    # Session 39: the merged probes 49* (random bits against interpret mode, held pointer blocks, ...) beside s38_a's files
    s39_a)       timeout 150 python3 -u benchmarks/probe_vmap_alias.py >"$OUT/vmap_alias.log" 2>&1 &
                 python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 330 $(ls tests/test_probe51*.py tests/test_probe50*.py tests/test_probe49*.py tests/test_probe48*.py tests/test_probe47*.py) tests/test_vmap.py tests/test_autodiff.py tests/test_probe40o.py tests/test_probe46f.py tests/test_mma.py tests/test_tf32.py tests/test_scatter.py tests/test_gather.py tests/test_paged_attention.py tests/test_ragged.py tests/test_probe36e.py
                 wait; echo "== vmap alias"; cat "$OUT/vmap_alias.log" ;;
    # Session 40: the GPU tests the first visit failed (tests fixed), probes 51a-i, and the files of the register-B
    # staging merged by probe 51h and of the float32 dots of probes 51c/51e/51f
    s40_a)       python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 280 $(ls tests/test_probe51*.py) tests/test_probe47g.py tests/test_probe49c.py tests/test_probe47b.py tests/test_probe49g.py tests/test_probe47c.py tests/test_probe48b.py tests/test_probe49b.py tests/test_probe47e.py tests/test_probe49a.py tests/test_probe50a.py tests/test_probe23b.py tests/test_probe39b.py tests/test_tf32.py tests/test_mma.py tests/test_sync_dots.py tests/test_probe37d.py tests/test_probe35c.py tests/test_probe45f.py tests/test_probe31a.py tests/test_probe35d.py tests/test_probe36c.py tests/test_probe49e.py ;;
    # Session 40's last merges (probes 51j-51n: MLA hints followed, swapaxes, int32 products, constant tables, int64
    # sorts) and the files they or the remat fix touched; then run gpu_all15 on the final code
    s41_vm)      timeout 200 python3 -u benchmarks/probe_vmap_map.py ;;   # why lax.map(batch_size=) of an aliased vmap is wrong
    s41_jax)     timeout 200 python3 -u benchmarks/probe_jax_calls.py ;;   # kernels inside scan/cond/slices... against interpret mode
    s40_b)       python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 280 $(ls tests/test_probe51*.py) tests/test_remat_loops.py tests/test_probe48d.py tests/test_probe38h.py tests/test_probe45f.py tests/test_sort.py tests/test_probe46e.py tests/test_attention.py ;;
    s42_a)       python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe52d.py tests/test_partial_bodies.py tests/test_sliced_operands.py ;;
    s42_attn)    python3 -u benchmarks/attention.py --quick --default --no-pallas ;;   # both passes, both head_dims and masks, seq 4096
    s42_b)       python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 300 $(ls tests/test_probe53*.py tests/test_probe54*.py tests/test_probe55*.py) tests/test_probe46e.py tests/test_probe48c.py tests/test_probe49c.py tests/test_probe50c.py tests/test_probe10.py tests/test_probe51k.py tests/test_probe52c.py ;;
    # how XLA divides 16-bit floats by a number (session 43: float16 in float32 on the GPU), then probe 53's GPU tests
    s43_div)     python3 -u benchmarks/probe_div_const.py && python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe53h.py tests/test_probe53c.py tests/test_probe53d.py ;;
    # the GPU tests of session 43's probes (56a-h) and of the tests they changed
    s43)         python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 300 $(ls tests/test_probe56*.py) tests/test_probe25b.py tests/test_probe33b.py tests/test_probe34g.py tests/test_probe39c.py tests/test_probe40n.py tests/test_probe47d.py tests/test_probe29h.py tests/test_probe46b.py tests/test_probe53a.py tests/test_probe10.py tests/test_probe23.py tests/test_probe24.py tests/test_probe32d.py tests/test_probe37c.py tests/test_probe39a.py tests/test_probe39f.py tests/test_probe51k.py tests/test_probe52i.py tests/test_static_safety.py ;;
    # the lowering changes first (float16 x / c, 8/16-bit atomics' cas loops, TMA boxes of wide rows): a short visit
    s43_core)    python3 -u benchmarks/probe_div_const.py; python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe53h.py tests/test_probe53c.py tests/test_probe56b.py tests/test_probe56c.py tests/test_probe53d.py ;;
    # Session 44: s43_core and s43 in one sharded run, with the GPU tests of the probes 57* merged so far
    s44a)        python3 -u benchmarks/probe_div_const.py >"$OUT/div_const.log" 2>&1 &
                 python3 -u benchmarks/gpu_shards.py --shards 14 --timeout 430 tests/test_probe53h.py tests/test_probe53c.py tests/test_probe53d.py $(ls tests/test_probe56*.py tests/test_probe57*.py) tests/test_probe25b.py tests/test_probe33b.py tests/test_probe34g.py tests/test_probe39c.py tests/test_probe40n.py tests/test_probe47d.py tests/test_probe29h.py tests/test_probe46b.py tests/test_probe53a.py tests/test_probe10.py tests/test_probe23.py tests/test_probe24.py tests/test_probe32d.py tests/test_probe37c.py tests/test_probe39a.py tests/test_probe39f.py tests/test_probe51k.py tests/test_probe52i.py tests/test_static_safety.py tests/test_probe32a.py tests/test_probe52c.py tests/test_gather.py
                 wait; echo "== div const"; tail -15 "$OUT/div_const.log" ;;
    # Session 45: what session 44's visit left: the two probe-57a tests that did not finish in 430 s (each alone,
    # 200 s: a compile of a huge unrolled kernel, or a hang?), the GPU failures with their whole error, the unrun rest
    s44_left)    for t in "tests/test_probe57a.py::test_segment_reductions_past_64_segments_on_the_gpu" "tests/test_probe57a.py::test_int32_products_on_the_gpu"; do
                   (timeout 200 python3 -u -m pytest -q -p no:cacheprovider -m gpu "$t" --durations=5 >"$OUT/slow_$(echo "$t" | md5sum | cut -c1-6).log" 2>&1; echo "rc=$? $t" >>"$OUT/slow_$(echo "$t" | md5sum | cut -c1-6).log") &
                 done
                 mapfile -t ids < benchmarks/gpu_s44_rest.txt
                 python3 -u -m pytest -q -p no:cacheprovider -m gpu "tests/test_probe56g.py::test_none_in_plain_reads_on_gpu" "tests/test_probe57b2.py::test_theme_kernel_on_the_gpu[argmax_nan]" tests/test_probe53c.py tests/test_probe53h.py 2>&1 | grep -E "^E |^>|passed|failed" | head -60
                 python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 250 "${ids[@]}"
                 wait; for f in "$OUT"/slow_*.log; do tail -3 "$f"; done ;;
    # Session 45: probe 58a's run-time loops (int32 products, many segments) and 57a's two tests they unblock
    s45a)        python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe58a.py tests/test_probe57a.py tests/test_probe56g.py tests/test_probe57b2.py --durations=8 2>&1 | grep -vE "^(SKIPPED|PASSED)" | tail -40 ;;
    # Session 45's later merges: probe 58d's Triton twins, the GPU tests of the files probe 58c's edge pad and division
    # annotation touch, then probe 58b's memory fuzzer against the GPU (its failures printed here)
    s45b)        python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 240 tests/test_probe58d.py tests/test_probe56f.py tests/test_probe56f2.py tests/test_probe17.py tests/test_probe49e.py tests/test_probe51d.py tests/test_probe57d.py tests/test_probe32b.py tests/test_probe49f.py tests/test_probe57a.py $(ls tests/test_probe58b.py 2>/dev/null)
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | head -60
                 if [ -f benchmarks/probe_mem_fuzz.py ]; then timeout 300 python3 -u benchmarks/probe_mem_fuzz.py ${MEM_FUZZ_ARGS:---jobs 12 --seeds 600} 2>&1 | tail -60; fi ;;
    s45c)        python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_tma_tail.py 2>&1 | tail -3 ;;   # (windows partly past a 1-D end)
    # probe 58b's memory fuzzer alone (a faulting seed's worker replaced): its non-ok seeds, then the summary
    memfuzz)     timeout 420 python3 -u benchmarks/probe_mem_fuzz.py ${MEM_FUZZ_ARGS:---jobs 14 --seeds 0:1000} >"$OUT/memfuzz.log" 2>&1
                 grep -E "^SEED" "$OUT/memfuzz.log" | cut -c1-600 | head -60; grep -A20 " seeds (" "$OUT/memfuzz.log" | cat ;;
    # Session 46: where the fused backward's cycles go (issue #9): Nsight Compute's stall reasons, whole-kernel and per
    # SASS instruction (csv; with the raw metrics in one archive a head_dim: a visit brings back 8 files at most), at
    # head_dim 128 and 64 without the mask; ptxas's registers and spills
    s46_ncu)     for hd in 128 64; do ncu_bwd $hd; done ;;
    # session 52 (#9): the fused backward against deferred_kernel at head_dim 128, where the deferred order loses
    s52_ncu)     ncu_bwd 128 off fused128; ncu_bwd 128 on deferred128 ;;
    s46_bwd)     python3 -u benchmarks/attention.py --quick --default --no-pallas --pass bwd ;;
    # Session 46: the GPU tests of probes 59a and 59b and of the back-edge fixed point (design note 196), then the
    # memory fuzzer (pipelines, warp specialisation, attention loops: what the sync pass orders) on the final code
    s46_a)       python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 170 tests/test_probe59a.py tests/test_probe59b.py tests/test_sync_back_edge.py tests/test_probe58b.py tests/test_probe38h2.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | head -40 ;;
    # Session 47: the fused backward's ds from the 16-bit p (attn_bwd_order.py --p16), ptxas's registers and spills
    s47_p16)     MOSAIC_GPU_DUMP_PTXAS=1 PRODUCER_REGS=24 python3 -u benchmarks/attn_bwd_order.py --p16 2>&1 | grep -vE "bytes gmem|Compile time|Function properties|^$" ;;
    # Session 47: the GPU tests of probes 60a-c (and of the files their fixes touched), then attention's at head_dim 128
    # (the fused backward's new default, ds from the 16-bit p); then the tensor-core fuzzer; then the backward's table
    s47_b)       python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 230 tests/test_dot_fuzz.py tests/test_probe60b.py tests/test_probe60c.py tests/test_probe59a.py tests/test_probe23.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | head -30
                 python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 200 -- -k 128 tests/test_attention.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | head -30 ;;
    s47_dotfuzz) timeout 170 python3 -u benchmarks/probe_dot_fuzz.py ${DOT_FUZZ_ARGS:---jobs 14 --seeds 0:2000} >"$OUT/dotfuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/dotfuzz.log" | cut -c1-400 | tail -40 ;;
    s47_bwd128)  python3 -u benchmarks/attention.py --default --no-pallas --pass bwd --head-dim 128 --dtype float16 ;;
    # probe 59c: its GPU tests, then its control-flow fuzzer against the GPU (jit and interpret mode vs the reference)
    s46_cf)      python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe59c.py 2>&1 | tail -3
                 timeout 120 python3 -u benchmarks/probe_cf_fuzz.py ${CF_FUZZ_ARGS:---jobs 14 --seeds 0:1000} >"$OUT/cffuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/cffuzz.log" | cut -c1-400 | tail -40 ;;
    # Session 48: seed 1140's fix (a register A retired before the next trip rewrites it, design note 202): the new
    # tests and the seed's variants, then the GPU tests of the files session 47's last refactor touched, then the
    # tensor-core fuzzer's 2000 seeds again
    s48_a)       python3 -c "import jax, jaxlib; print(jax.__version__, jaxlib.__version__)"
                 python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_sync_register_a.py tests/test_sync_dots.py 2>&1 | tail -4
                 python3 -u benchmarks/probe_s47_seed1140.py 2>&1 | tail -12
                 python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 200 tests/test_dot_fuzz.py tests/test_probe60b.py tests/test_probe60d.py tests/test_probe39b.py tests/test_probe60c.py tests/test_warp_specialize.py tests/test_paged_attention.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | head -30
                 timeout 170 python3 -u benchmarks/probe_dot_fuzz.py ${DOT_FUZZ_ARGS:---jobs 14 --seeds 0:2000} >"$OUT/dotfuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/dotfuzz.log" | cut -c1-400 | tail -20 ;;
    # Session 48, last visit: probes 61a (tensor-core operands in flight) and 61b (refusals left) on the GPU: their
    # tests and the files their fixes touched, then the two fuzzers (61a's new one; the tensor-core one on new seeds)
    s48_b)       python3 -u benchmarks/gpu_shards.py --shards 14 --timeout 120 tests/test_probe61a.py tests/test_probe61b.py tests/test_sync_register_a.py tests/test_sync_dots.py tests/test_pingpong.py tests/test_dot_fuzz.py tests/test_f16_accumulator.py tests/test_matmul_fp8.py tests/test_persistent.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | head -30
                 timeout ${FUZZ_SECS:-100} python3 -u benchmarks/probe_async_fuzz.py --jobs 14 --seeds ${ASYNC_SEEDS:-0:1500} >"$OUT/asyncfuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/asyncfuzz.log" | cut -c1-300 | tail -12 ;;
    # the forty-ninth session: s48_b's tests plus probes 61c/61d's GPU tests, then both async fuzzers (61a, 61c)
    s49_a)       python3 -u benchmarks/gpu_shards.py --shards 14 --timeout 150 tests/test_probe61a.py tests/test_probe61b.py tests/test_probe61c.py tests/test_probe61d.py tests/test_sync_register_a.py tests/test_sync_dots.py tests/test_pingpong.py tests/test_dot_fuzz.py tests/test_f16_accumulator.py tests/test_matmul_fp8.py tests/test_persistent.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | head -30
                 timeout ${FUZZ_SECS:-110} python3 -u benchmarks/probe_async_fuzz.py --jobs 14 --seeds ${ASYNC_SEEDS:-0:1500} >"$OUT/asyncfuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/asyncfuzz.log" | cut -c1-300 | tail -12
                 timeout ${FUZZ_SECS:-110} python3 -u benchmarks/probe_async_fuzz.py --jobs 14 --loop 61c --seeds ${ASYNC_SEEDS:-0:1500} >"$OUT/asyncfuzz61c.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/asyncfuzz61c.log" | cut -c1-300 | tail -12 ;;
    # async fuzzer 61c's int8 seeds wrong on the GPU: variants against interpret mode, PTX and SASS of two, then the
    # compiled call under jax.disable_jit (probe 61d's seed 1033)
    s49_b)       mkdir -p "$OUT/dump"; MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_SASS=1 MOSAIC_GPU_DUMP_TO=$OUT/dump SEEDS=1046,693 VARIANTS="as is" python3 -u benchmarks/probe_s49_int8.py >"$OUT/dumprun.log" 2>&1
                 tar czf "$OUT/int8dump.tgz" -C "$OUT" dump dumprun.log && rm -rf "$OUT/dump"
                 python3 -u benchmarks/probe_s49_int8.py
                 python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe61d.py 2>&1 | tail -5 ;;
    # next visit (session 50): the int8 chaining's GPU tests and probe 61d's disable_jit test, the seeds MG501 refuses
    # run with the refusal off (which are wrong on the GPU), then async fuzzer 61c again
    s50_a)       python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 200 tests/test_int_dot_chain.py tests/test_probe61d.py tests/test_probe62b.py; grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | head -20
                 python3 -u benchmarks/probe_s49_int8.py --refused 2>&1 | grep -vE "Warning|^ |^hint" | tail -45
                 python3 -u benchmarks/probe_s49_int8.py --unchained 2>&1 | grep -vE "Warning|^ |^hint" | tail -12
                 timeout ${FUZZ_SECS:-110} python3 -u benchmarks/probe_async_fuzz.py --jobs 14 --loop 61c --seeds ${ASYNC_SEEDS:-0:3000} >"$OUT/asyncfuzz61c.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/asyncfuzz61c.log" | cut -c1-300 | tail -12 ;;
    # session 50: dQ's product deferred to the next step of the fused backward (benchmarks/attn_bwd_deferred.py), each
    # kernel alone against the default fused kernel, with ptxas's registers and spills
    s50_b)       MOSAIC_GPU_DUMP_PTXAS=1 python3 -u benchmarks/attn_bwd_deferred.py >"$OUT/deferred_full.log" 2>&1; echo "rc=$?"
                 grep -E "spill|Used [0-9]+ registers" "$OUT/deferred_full.log" | sort | uniq -c | head -30
                 grep -vE "^ptxas|spill|Used|Compiling|^$|Warning" "$OUT/deferred_full.log" | tail -30 ;;
    # session 50's one visit: the GPU twins of probes 62a-c and of the int8 chaining, the five int8 seeds with the
    # chaining and MG501 off (the lowering's register copies alone), then (s50_b) the deferred dQ, then the fuzzers
    s50_t)       python3 -u benchmarks/gpu_shards.py --shards 14 --timeout 170 tests/test_int_dot_chain.py tests/test_probe61d.py tests/test_probe62a.py tests/test_probe62b.py tests/test_attention_variants_masks.py tests/test_attention_variants_ragged.py tests/test_attention_variants_bwd.py tests/test_fp8_blockscale.py tests/test_moe_gemm.py tests/test_moe_routing.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | cut -c1-300 | head -30
                 timeout 60 python3 -u benchmarks/probe_s49_int8.py --unchained 2>&1 | grep -vE "Warning|^ |^hint" | tail -12 ;;
    s50_f)       timeout 70 python3 -u benchmarks/probe_wg_fuzz.py --jobs 14 --seeds 0:1500 >"$OUT/wgfuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/wgfuzz.log" | cut -c1-300 | tail -12
                 timeout 60 python3 -u benchmarks/probe_async_fuzz.py --jobs 14 --loop 61c --seeds 0:2000 >"$OUT/asyncfuzz61c.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/asyncfuzz61c.log" | cut -c1-300 | tail -12 ;;
    # next visit (session 51): the backward's table with the deferred default at head_dim 64 (and whether the fused kernel
    # at 64 regressed since session 46: its row there), then the multi-warpgroup fuzzer to its end; then gpu_all15
    s51_a)       python3 -u benchmarks/attention.py --quick --default --no-pallas --pass bwd
                 timeout 200 python3 -u benchmarks/probe_wg_fuzz.py --jobs 14 --seeds 0:2000 >"$OUT/wgfuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/wgfuzz.log" | grep -v Warning | cut -c1-300 | tail -12 ;;
    # session 51: the multi-warpgroup fuzzer's two int32 seeds wrong on the GPU (365, 1142) in variants, their MLIR
    # (jax 0.11.2) in one archive; then probe 61d's seed [2], which failed in a loaded gpu_all15 shard; then the
    # reduction sweep (benchmarks/probe_s51_reduce.py)
    s51_b)       timeout 150 python3 -u benchmarks/probe_s51_wg.py 2>&1 | grep -v Warning
                 tar czf "$OUT/s51_dump.tgz" -C "$OUT" s51_dump && rm -rf "$OUT/s51_dump"
                 timeout 100 python3 -u -m pytest -q -p no:cacheprovider -m gpu "tests/test_probe61d.py::test_gpu_fuzz_seeds_match_their_jnp_programs" 2>&1 | tail -15
                 # the neighbourhood in order: 1728 small reductions (int32 / float32, shapes, blocks, loads, a scan first)
                 timeout 200 python3 -u benchmarks/probe_s51_reduce.py --jobs 14 --seeds 0:1728 >"$OUT/reduce.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/reduce.log" | grep -v Warning | cut -c1-260 | tail -40 ;;
    # session 52: the int32 min / max of a negated tile (47 of probe_s51_reduce's 1728 wrong): variants, PTX and SASS
    s52_neg)     mkdir -p "$OUT/negdump"; MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_SASS=1 MOSAIC_GPU_DUMP_TO=$OUT/negdump \
                   timeout 200 python3 -u benchmarks/probe_s52_neg.py 2>&1 | grep -v Warning
                 ls "$OUT/negdump" | head -5; tar czf "$OUT/negdump.tgz" -C "$OUT" negdump && rm -rf "$OUT/negdump" ;;
    # the fix (lowering/shape.py SIGN_FLIP): the variants with it and without, the sweep again, the two seeds, reductions
    s52_v)       timeout 150 python3 -u benchmarks/probe_s52_neg.py 2>&1 | grep -v Warning
                 timeout 120 python3 -u benchmarks/probe_s51_reduce.py --jobs 14 --seeds 0:1728 >"$OUT/reduce2.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/reduce2.log" | grep -v Warning | cut -c1-260 | tail -8
                 timeout 150 python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_int_minmax_sign_flip.py tests/test_wg_fuzz_seeds_s51.py tests/test_reductions.py tests/test_stats.py tests/test_reduce_diagnostics.py 2>&1 | tail -6 ;;
    s52_f2)      timeout 100 python3 -u benchmarks/probe_ragged_fuzz.py --jobs 14 --seeds 0:1200 >"$OUT/raggedfuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/raggedfuzz.log" | grep -v Warning | cut -c1-300 | tail -10
                 timeout 100 python3 -u benchmarks/probe_grid_fuzz.py --jobs 14 --seeds 0:1200 >"$OUT/gridfuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/gridfuzz.log" | grep -v Warning | cut -c1-300 | tail -10 ;;
    # next visit (session 53): the multi-warpgroup fuzzer again with the sign flip (its 2 wrong seeds were that class)
    s53_wg)      timeout 200 python3 -u benchmarks/probe_wg_fuzz.py --jobs 14 --seeds 0:2000 >"$OUT/wgfuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/wgfuzz.log" | grep -v Warning | cut -c1-300 | tail -12 ;;
    # probe 64a (session 53): the integer-pattern fuzzer (int8..uint32 chains into reductions, scans, stores; note 217)
    s53_int)     timeout 150 python3 -u benchmarks/probe_int_fuzz.py --jobs 14 --seeds 0:2000 >"$OUT/intfuzz.log" 2>&1; echo "rc=$?"
                 grep -E "^SEED" "$OUT/intfuzz.log" | grep -vE "^SEED [0-9]+ refused:" | cut -c1-300 | head -15
                 grep -vE "^SEED|Warning" "$OUT/intfuzz.log" | tail -11
                 timeout 120 python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe64a.py 2>&1 | tail -4 ;;
    # probe 57e's differential fuzzer (tests/diff_fuzz.py: register math of every dtype, reductions, casts, dots of
    # small tiles, masked stores) on the GPU for the first time (session 53)
    s53_diff)    timeout 170 python3 -u benchmarks/probe_diff_fuzz.py --jobs 14 --seeds 0:2500 >"$OUT/difffuzz.log" 2>&1; echo "rc=$?"
                 grep -E "^SEED" "$OUT/difffuzz.log" | grep -vE "^SEED [0-9]+ refused:" | cut -c1-300 | head -15
                 grep -vE "^SEED|Warning" "$OUT/difffuzz.log" | tail -6 ;;
    # session 53: whether the GPU fuses a product into the add it feeds (probe_diff_fuzz's three wrong-gpu seeds), and
    # the weak-type fix's GPU twins
    s53_fma)     MOSAIC_GPU_DUMP_PTX=1 timeout 100 python3 -u benchmarks/probe_s53_fma.py >"$OUT/fma.log" 2>&1; echo "rc=$?"
                 grep -E "^(ok|fused|other) " "$OUT/fma.log"; grep -cE "fma.rn" "$OUT/fma.log"; grep -E "fma.rn|mul.rn|sub.rn|add.rn" "$OUT/fma.log" | sort | uniq -c | sort -rn | head -8
                 timeout 100 python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_weak_bool_promotion.py tests/test_probe65a.py 2>&1 | tail -2 ;;
    # issue #9's table on this code (both passes, head_dim 64 and 128, both masks, seq 4096; plotted on the CPU by
    # benchmarks/plot_attention.py)
    s53_attn)    python3 -u benchmarks/attention.py --quick --default --no-pallas >"$OUT/attn_table.log" 2>&1; echo "rc=$?"
                 sed -n '/best configuration/,$p' "$OUT/attn_table.log" | cut -c1-120 ;;
    # probes 63a-b (session 51, not yet on the GPU): their GPU twins, then the ragged and grid fuzzers (GPU vs interpret)
    s52_t)       python3 -u benchmarks/gpu_shards.py --shards 6 --timeout 200 tests/test_probe63a.py tests/test_probe63b.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | cut -c1-300 | head -20 ;;
    s52_f)       timeout 150 python3 -u benchmarks/probe_ragged_fuzz.py --jobs 14 --seeds 0:2000 >"$OUT/raggedfuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/raggedfuzz.log" | grep -v Warning | cut -c1-300 | tail -12
                 timeout 150 python3 -u benchmarks/probe_grid_fuzz.py --jobs 14 --seeds 0:2000 >"$OUT/gridfuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/gridfuzz.log" | grep -v Warning | cut -c1-300 | tail -12 ;;
    # session 54: pipelined buffers of odd bytes (stages padded to 128 bytes) and one-copy store buffers on the GPU; the
    # fused backward's query block at head_dim 128 (80: FA3's; its logsumexps need the padding, dQ's buffer the one copy)
    s54_tiles)   timeout 150 python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_stage_padding.py 2>&1 | tail -3
                 MOSAIC_GPU_DUMP_PTXAS=1 timeout 400 python3 -u benchmarks/attn_bwd_order.py --tiles >"$OUT/tiles.log" 2>&1; echo "rc=$?"
                 grep -E "Compiling entry|spill stores|Used [0-9]+ registers" "$OUT/tiles.log" | grep -A2 "dkv_dq" | grep -E "spill|Used" | sort | uniq -c | head -12
                 grep -E "^\| *128" "$OUT/tiles.log" | tail -12 ;;
    # session 54: the PTX and SASS of the default backward kernels (head_dim 128 full and causal: fused; 64: deferred),
    # one archive, read on the CPU (is each wgmma awaited alone, as in the deferred kernel's profile at 128?)
    s54_sass)    for c in "128" "128 --causal" "64" "128 --dq-deferred on"; do n=$(echo "d$c" | tr -d ' -'); mkdir -p "$OUT/sass/$n"
                   MOSAIC_GPU_DUMP_TO="$OUT/sass/$n" MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_SASS=1 MOSAIC_GPU_DUMP_PTXAS=1 \
                     timeout 100 python3 benchmarks/profile_attention.py --bwd --head-dim $c --runs 1 >"$OUT/sass/$n.log" 2>&1
                   echo "$n rc=$? $(ls "$OUT/sass/$n" | wc -l) files"; grep -ih "serializ\|C75" "$OUT/sass/$n.log" | head -3
                 done; tar czf "$OUT/sass.tgz" -C "$OUT" sass && rm -rf "$OUT/sass"
                 python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_weak_bool_promotion.py 2>&1 | tail -2 ;;
    # next visit (session 54's leads, from benchmarks/ptxas_report.py): head_dim 64's deferred backward without
    # ptxas's serialisation (dP's product after dQ's store), and the producer at 32 registers (the three-warpgroup
    # forward at head_dim 64 is serialised at 40: its compute warpgroups get 152, at 32 they get 160)
    s55_dplate)  MOSAIC_GPU_DUMP_PTXAS=1 timeout 400 python3 -u benchmarks/attn_bwd_order.py --dp-late >"$OUT/dplate.log" 2>&1; echo "rc=$?"
                 grep -E "C75|spill stores" "$OUT/dplate.log" | cut -c1-160 | sort | uniq -c | head; grep -E "^\| *64" "$OUT/dplate.log" | tail -10 ;;
    s55_prod)    python3 -u benchmarks/producer_regs.py --regs 40 32 ;;
    # session 55: the GPU twins of session 54's last code (the backward's diagonal-loop mask, probe 66a's nested-loop
    # fix, padded stages), then the stage fuzzer against interpret mode
    s55_twins)   python3 -u benchmarks/gpu_shards.py --shards 6 --timeout 200 tests/test_probe66a.py tests/test_stage_padding.py tests/test_attention.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | cut -c1-300 | head -20 ;;
    s55_fuzz)    timeout 200 python3 -u benchmarks/probe_stage_fuzz.py --seeds 0:2000 --jobs 14 >"$OUT/stagefuzz.log" 2>&1; echo "rc=$?"
                 grep -vE "^(ok|refused)" "$OUT/stagefuzz.log" | grep -v Warning | cut -c1-300 | tail -12 ;;
    # session 55's leads for the next visit: the producer's registers with the register trade fixed (32 hung two
    # compute warpgroups before it: they asked for 240 of a 168-register launch); the GPU twins of session 55's code
    s56_prod)    python3 -u benchmarks/producer_regs.py --regs 40 32 24 ;;
    s56_twins)   python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 250 tests/test_scalar_shapes.py tests/test_attention_variants_ragged.py tests/test_probe67a.py tests/test_probe67b.py tests/test_probe68a.py tests/test_probe68b.py tests/test_probe32e.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | cut -c1-300 | head -20 ;;
    # the same in a short visit (most of the session's device time went to failed starts)
    s56_tw2)     python3 -u benchmarks/gpu_shards.py --shards 10 --timeout 170 tests/test_scalar_shapes.py tests/test_attention_variants_ragged.py tests/test_probe67a.py tests/test_probe67b.py tests/test_probe68a.py tests/test_probe68b.py tests/test_probe32e.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | cut -c1-300 | head -20 ;;
    s56_p2)      python3 -u benchmarks/producer_regs.py --regs 40 32 --timeout 85 ;;
    # the whole suite in two visits (about 2000 tests since session 51: 15 shards of all of them ran past 520 s)
    gpu_p1)      python3 -u benchmarks/gpu_shards.py --shards 15 --timeout 540 --part 1/2 ;;
    gpu_p2)      python3 -u benchmarks/gpu_shards.py --shards 15 --timeout 540 --part 2/2 ;;
    # session 57's last change (weak operands of jnp's products and formulas), after its GPU visit: its GPU twins
    s57_weak)    python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_weak_bool_promotion.py ;;
    # session 58: causal head_dim 64's deferred backward in one loop (bwd_split_mask=False), alone and with dp_late +
    # p16_ds (deviceless: 104 and 92 bytes spilled, the latter not serialised, against 156 serialised)
    s58_oneloop) MOSAIC_GPU_DUMP_PTXAS=1 timeout 300 python3 -u benchmarks/attn_bwd_order.py --one-loop >"$OUT/oneloop.log" 2>&1; echo "rc=$?"
                 grep -E "C75|spill stores" "$OUT/oneloop.log" | cut -c1-160 | sort | uniq -c | head; grep -E "^\| *64" "$OUT/oneloop.log" | tail -6 ;;
    s58_ol128)   MOSAIC_GPU_DUMP_PTXAS=1 timeout 300 python3 -u benchmarks/attn_bwd_order.py --one-loop-128 >"$OUT/oneloop128.log" 2>&1; echo "rc=$?"
                 grep -E "^\| *128" "$OUT/oneloop128.log" | tail -4 ;;
    # session 59: the causal backward's masks as a thread's scalar against immediates (lowering/index_compare.py),
    # with and without (INDEX_COMPARE=0), default and one loop, head_dim 64 and 128; and its GPU twins
    s59_ic)      MOSAIC_GPU_DUMP_PTXAS=1 timeout 280 python3 -u benchmarks/attn_bwd_order.py --index-compare >"$OUT/ic_on.log" 2>&1; echo "rc=$?"
                 INDEX_COMPARE=0 timeout 250 python3 -u benchmarks/attn_bwd_order.py --index-compare >"$OUT/ic_off.log" 2>&1; echo "rc=$?"
                 grep -E "^\| *(64|128)" "$OUT/ic_on.log" | tail -6; echo "-- off"; grep -E "^\| *(64|128)" "$OUT/ic_off.log" | tail -6 ;;
    s59_twins)   python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 200 tests/test_index_compare.py tests/test_attention.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | cut -c1-300 | head -20 ;;
    # session 59's merged probes 71a-b (graph and sparse kernels; bit-level, hashing and cryptographic kernels)
    s59_probes)  python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 200 tests/test_probe71a.py tests/test_probe71b.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | cut -c1-300 | head -20 ;;
    # session 60: the merged probes 72a-b's GPU twins (dynamic programming and recurrences; signal processing), the
    # session's libdevice functions, ml.gather / ml.broadcast, and probe 71a's connected components at 16 rounds
    s60_twins)   python3 -u benchmarks/gpu_shards.py --shards 10 --timeout 220 tests/test_probe72a.py tests/test_probe72b.py tests/test_libdevice_math.py tests/test_triton_names.py tests/test_probe71a.py tests/test_device_assert.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | cut -c1-300 | head -20 ;;
    # session 58's merged probes 70a-b (analytics kernels; exact float arithmetic: + - * never contracted, sqrt.rn) and
    # the attention files the new head_dim 64 backward and the explicit ml.fma change: their GPU tests
    s58_twins)   python3 -u benchmarks/gpu_shards.py --shards 14 --timeout 200 tests/test_probe70a.py tests/test_probe70b.py tests/test_attention.py tests/test_fast_math.py tests/test_numerics_edges.py
                 grep -h -E "^(FAILED|ERROR) |^E  " "$OUT"/shard_*.log | cut -c1-300 | head -20 ;;
    # a sixth of the whole GPU suite (gpu6_1 .. gpu6_6): about 100 s of tests on an H100 (session 57)
    gpu6_[1-6])  python3 -u benchmarks/gpu_shards.py --shards 15 --timeout 225 --part "${1#gpu6_}/6" ;;
    gpu_all15)   python3 -u benchmarks/gpu_shards.py --shards 15 --timeout 550 ;;   # (the whole suite, 15 of 16 cores)
    gpu_s34all)  python3 -u benchmarks/gpu_shards.py --shards 14 --timeout 500 ;;
    # Sessions 34-35 (no device lent then): the tests that may fault without their fixes, a few a shard, then
    # the GPU tests of every file the session-35 probes wrote or changed; then gpu_s34all (the whole suite).
    gpu_s35risky) python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 220 tests/test_unaligned_windows.py tests/test_probe44d.py tests/test_probe44b.py::test_masked_tail_window_past_the_end_gpu tests/test_probe44e.py::test_conditional_read_past_the_end_gpu tests/test_probe45c.py::test_gpu_a_boolean_and_then_a_number_reads_only_where_it_decides tests/test_probe45c.py::test_gpu_walrus_and_chains_read_past_the_end_only_where_python_would_not tests/test_probe45b.py::test_gpu_gemv_row_window_past_the_vectors_end_reads_zeros tests/test_probe45d.py::test_gpu_small_statistics_stored_under_tail_masks_match_interpret tests/test_probe45d.py::test_gpu_pool_window_starting_before_the_row_matches_interpret tests/test_probe45d.py::test_gpu_3d_pointer_grid_past_the_arrays_end_matches_interpret tests/test_probe45a.py::test_gpu_small_masked_load_past_the_arrays_end_and_masked_store_match_numpy tests/test_probe45e.py::test_partials_read_padded_past_the_arrays_end_on_the_gpu tests/test_probe45h.py::test_gpu_a_conditional_expression_of_a_number_and_a_boolean_reads_only_its_path tests/test_probe45g.py tests/test_probe45f.py ;;
    # the column scan's whole-vector steps (design note 86) against XLA's cumsum(axis=0), then the row scans
    scan_cols)   python3 -u benchmarks/scan.py --axis 0 && python3 -u benchmarks/scan.py ;;
    gpu_s35new)  python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 300 tests/test_scan.py tests/test_probe36f.py tests/test_probe45a.py tests/test_probe45b.py tests/test_probe45c.py tests/test_probe45d.py tests/test_probe45e.py tests/test_probe45h.py tests/test_probe45i.py tests/test_probe44a.py tests/test_probe44c.py tests/test_probe44f.py tests/test_probe26.py tests/test_probe29d.py tests/test_probe29f.py tests/test_probe32d.py tests/test_probe34f.py tests/test_probe40o.py tests/test_transpose.py ;;
    gpu_s33a)    python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 400 tests/test_probe43c.py tests/test_fast_math.py tests/test_numerics_edges.py tests/test_gather.py tests/test_scatter.py tests/test_narrow_swizzle.py tests/test_paged_attention.py tests/test_attention.py ;;
    # the thirty-third session's merged probes 43a-e: their GPU tests and those of the files their fixes touched, and
    # (beside them) the probes' CPU tests on this machine's jax (0.11.2: shard_map, positional constexprs)
    gpu_s33b)    python3 -u -m pytest -q -p no:cacheprovider -m "not gpu" $(ls tests/test_probe43*.py) >"$OUT/s33cpu.log" 2>&1 &
                 python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 330 $(ls tests/test_probe43*.py) tests/test_reductions.py tests/test_stats.py tests/test_unit_axes.py tests/test_probe41s.py tests/test_probe37c.py tests/test_probe34f.py tests/test_probe_g.py tests/test_probe24b.py tests/test_vmap.py tests/test_tensor_parallel.py tests/test_calling.py tests/test_probe9.py tests/test_narrow_rows.py;
                 wait; echo "== probes 43 (CPU tests, jax $(python3 -c 'import jax; print(jax.__version__)'))"; tail -5 "$OUT/s33cpu.log" ;;
    # the thirty-second session's merged probes 42u-x and the files their fixes touched; the chunked backward at 16384
    gpu_s32)     python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 300 tests/test_probe42u.py tests/test_probe42v.py tests/test_probe42v2.py tests/test_probe42w.py tests/test_probe42x.py tests/test_probe38g.py tests/test_matmul_fp8.py tests/test_scatter.py tests/test_scatter_set.py ;;
    attn_lpt16k) python3 -u benchmarks/attn_bwd_order.py --lpt --seq 16384 ;;
    gpu_s31)     python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 300 tests/test_probe41q.py tests/test_probe41r.py tests/test_probe41s.py tests/test_probe41t.py tests/test_gather.py tests/test_reductions.py tests/test_stats.py tests/test_calling.py ;;
    gpu_s30b)    python3 -u benchmarks/gpu_shards.py --shards 10 --timeout 240 $(ls tests/test_probe40*.py) tests/test_run_offsets.py tests/test_gather.py tests/test_reductions.py tests/test_stats.py;
                 python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_attention.py -k "test_gpu_forward_and_gradients_match_the_reference and (32 or 48 or 80 or 96 or 112)" ;;
    # the thirtieth session: attention at head_dim 32-112 (narrow swizzles), GPU tests then timed against cuDNN
    attn_narrow) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_attention.py -k "test_gpu_forward_and_gradients_match_the_reference and (32 or 48 or 80 or 96 or 112)";
                 python3 -u benchmarks/attention.py --default --no-pallas --dtype bfloat16 --seq 4096 --head-dim 32 --head-dim 96 ;;
    attn_narrow_bwd) python3 -u benchmarks/attention.py --narrow --each --no-pallas --dtype bfloat16 --seq 4096 --head-dim 96 --pass bwd ;;
    # the thirtieth session: the merged session-29 probes (39a-f) and the files their lowering touches
    gpu_s30)     python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 240 $(ls tests/test_probe39*.py) tests/test_run_offsets.py tests/test_narrow_swizzle.py tests/test_scatter_set.py tests/test_scatter.py tests/test_gather.py tests/test_stats.py tests/test_reductions.py tests/test_probe38i.py tests/test_probe37c.py tests/test_probe24.py tests/test_bool_io.py ;;
    # the twenty-ninth session: a plain row scatter's vector stores (GPU tests), then the un-permute benchmark
    gpu_s29a)    python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 150 tests/test_scatter_set.py tests/test_scatter.py tests/test_gather.py ;;
    scatter)     python3 -u benchmarks/gather.py --only scatter ;;
    # narrow swizzles (k of 16-96 16-bit elements, n of 16-48), Triton's run offsets, bool scatters
    gpu_s29b)    python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 200 tests/test_narrow_swizzle.py tests/test_tf32.py tests/test_matmul_fp8.py tests/test_run_offsets.py tests/test_scatter_set.py tests/test_mma.py ;;
    # the twenty-eighth session's own lowering paths: plain scatters, float16 accumulation, the dot register edges
    gpu_s28a)    python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 200 tests/test_scatter_set.py tests/test_f16_accumulator.py tests/test_mma_registers.py tests/test_scatter.py tests/test_gather.py tests/test_pingpong.py::test_gpu_pingpong_forward_matches_the_reference;
                 timeout 60 python3 -u examples/matmul_fp8.py ;;
    # the merged session-28 probes, with the scans (38j) and narrow rows (38i) their lowering changes touch
    gpu_s28)     python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 220 $(ls tests/test_probe38*.py) tests/test_scan.py tests/test_narrow_rows.py ;;
    gpu_s27)     python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_narrow_rows.py tests/test_matmul_fp8.py tests/test_fast_math.py tests/test_probe33c.py tests/test_probe29d.py tests/test_probe31e.py ;;
    # the merged session-27 probes, narrow rows and the files whose layouts they touch (twenty-seventh session)
    gpu_s27b)    python3 -u benchmarks/gpu_shards.py --shards 12 --timeout 260 tests/test_narrow_rows.py tests/test_probe37a.py tests/test_probe37b.py tests/test_probe37c.py tests/test_probe37d.py tests/test_probe37e.py tests/test_probe37f.py tests/test_attention.py tests/test_fast_math.py tests/test_matmul_fp8.py tests/test_rowwise.py tests/test_reductions.py tests/test_gather.py tests/test_scatter.py tests/test_layout_cases.py tests/test_stats.py ;;
    attn_grid)   python3 -u benchmarks/attn_prefetch.py --head-dim 128 --head-dim 64 --causal full --seq 4096 --seq 1024 ;;
    # the 82 GPU tests of the files gpu_all8's cut shard had not reached (twenty-sixth session)
    gpu_rest26)  python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 150 tests/test_sync_gmem.py tests/test_sync_proxy.py tests/test_transpose.py tests/test_user_mistakes.py tests/test_warp_specialize.py ;;
    gpu_s25)     python3 -u benchmarks/gpu_shards.py --shards 4 --timeout 240 tests/test_release_early.py tests/test_attention.py tests/test_probe32a.py tests/test_probe33c.py tests/test_warp_specialize.py tests/test_pingpong.py tests/test_persistent.py ;;
    # the TMA start clamp (probe 35e) on the suites whose kernels take run-time TMA windows
    gpu_s25b)    python3 -u benchmarks/gpu_shards.py --shards 8 --timeout 165 tests/test_probe35e.py tests/test_attention.py tests/test_matmul.py tests/test_warp_specialize.py tests/test_persistent.py tests/test_ragged.py tests/test_ragged_dot.py tests/test_paged_attention.py tests/test_gpu.py tests/test_pipeline_tiles.py tests/test_matmul_fp8.py ;;
    gpu_s24)     python3 -u benchmarks/gpu_shards.py --shards 4 --timeout 250 tests/test_attention.py tests/test_probe32a.py tests/test_scan.py tests/test_sort.py $(ls tests/test_probe33*.py 2>/dev/null) ;;
    gpu_s23)     python3 -u benchmarks/gpu_shards.py --shards 4 --timeout 200 tests/test_attention.py $(ls tests/test_probe32*.py 2>/dev/null) ;;
    gpu_s22)     python3 -u benchmarks/gpu_shards.py --shards 4 --timeout 170 tests/test_barriers.py $(ls tests/test_probe31*.py 2>/dev/null) ;;
    gpu_s21)     python3 -u benchmarks/gpu_shards.py --shards 4 --timeout 170 tests/test_probe30a.py tests/test_probe30c.py ;;
    # The whole GPU suite takes more than 300 s: two halves, each fits a step's default limit.
    gputests_a)  python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_[a-l]*.py ;;
    gputests_b)  python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_[m-z]*.py ;;
    # gputests_b's last 120 tests (from test_scatter on): when the half is cut by its limit.
    gputests_b2) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_scatter.py tests/test_s[o-z]*.py tests/test_[t-z]*.py ;;
    gpu_paged)   python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_paged_attention.py tests/test_ragged.py tests/test_gpu_safety.py tests/test_persistent.py ;;
    elementwise) python3 -u benchmarks/elementwise.py ;;
    elementwise_quick) python3 -u benchmarks/elementwise.py --quick ;;
    ragged)      python3 -u benchmarks/ragged_dot.py --quick ;;
    ragged_full) python3 -u benchmarks/ragged_dot.py ;;
    paged)       python3 -u benchmarks/paged_attention.py --quick ;;
    paged_full)  python3 -u benchmarks/paged_attention.py ;;
    paged_gqa)   python3 -u benchmarks/paged_attention.py --shape 1 --tensor-cores ;;
    wall)        python3 -u benchmarks/wall_overhead.py ;;
    gpu_session7) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_numerics_edges.py tests/test_pipeline_hazards.py tests/test_probe_messages.py tests/test_ragged.py tests/test_paged_attention.py tests/test_reductions.py tests/test_gpu.py tests/test_sources_and_caches.py ;;
    gpu_pending) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_sync_dots.py tests/test_probe_e.py tests/test_numerics_edges.py tests/test_mma.py tests/test_probe_messages.py ;;
    transpose)   python3 -u benchmarks/transpose.py && python3 -u examples/transpose.py ;;
    gpu_session8) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_transpose.py tests/test_mma.py ;;
    gather)      python3 -u benchmarks/gather.py ;;
    gpu_gather)  python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_gather.py tests/test_transpose.py ;;
    scan)        python3 -u benchmarks/scan.py ;;
    gpu_scan)    python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_scan.py ;;
    gpu_scatter) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_scatter.py tests/test_gather.py tests/test_numerics_edges.py -k "not fp8" ;;
    gpu_paged_quick) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_paged_attention.py tests/test_ragged.py ;;
    matmul)      python3 -u benchmarks/matmul.py ;;
    matmul_quick) python3 -u benchmarks/matmul.py --quick ;;
    matmul_lean) python3 -u benchmarks/matmul.py --lean ;;   # the 10 shapes, the configurations that won before
    matmul_bk)   python3 -u benchmarks/matmul.py --quick --dtype float16 --bk128 ;;
    matmul_power) python3 -u benchmarks/matmul_power.py ;;
    multicast)   timeout 150 python3 -u -m pytest -q -p no:cacheprovider -m gpu -k multicast tests/test_warp_specialize.py ;;
    matmul_fp8)  python3 -u benchmarks/matmul_fp8.py ;;
    matmul_fp8q) python3 -u benchmarks/matmul_fp8.py --quick ;;
    gpu_new)     python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_mma.py tests/test_warp_specialize.py -k "narrow or producer or multicast or transposed or register" ;;
    attn_bwd)    python3 -u benchmarks/attention.py --quick --pass bwd ;;
    attn_bwd128) python3 -u benchmarks/attention.py --quick --pass bwd --head-dim 128 ;;
    attn_fwd)    python3 -u benchmarks/attention.py --quick --pass fwd ;;
    attn_fwd128) python3 -u benchmarks/attention.py --quick --pass fwd --head-dim 128 ;;
    gpu_cluster) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_paged_attention.py tests/test_mma.py -k "cluster or rows_of_result or tensor_cores" ;;
    gpu_review)  python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py tests/test_gpu_safety.py tests/test_layout_cases.py tests/test_user_mistakes.py tests/test_mma.py tests/test_rowwise.py tests/test_paged_attention.py tests/test_attention.py tests/test_reductions.py ;;
    gpu_mma)     python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_mma.py ;;
    gpu_final)   python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_mma.py tests/test_user_mistakes.py tests/test_disk_cache.py tests/test_vmap.py tests/test_reductions.py tests/test_calling.py ;;
    tp)          python3 -u examples/tensor_parallel.py && python3 -u -m pytest -q -p no:cacheprovider tests/test_tensor_parallel.py ;;
    first_call)  python3 -u benchmarks/first_call.py ;;
    softmax_long) python3 -u benchmarks/softmax_long_rows.py ;;
    layernorm_long) python3 -u benchmarks/layernorm_long_rows.py ;;
    # wider key blocks (192; the last block of a sequence partial and masked) against the default forward
    attn_kv)     python3 -u benchmarks/attention.py --pass fwd --kv --each --no-pallas --causal full --dtype float16 --seq 4096 --seq 16384 ;;
    # a persistent forward (one CTA an SM walking the tiles) against the default (issue #9)
    attn_def)    python3 -u benchmarks/attention.py --pass fwd --default --no-pallas --dtype float16 --seq 1024 --seq 4096 --seq 16384 ;;
    attn_pers)   python3 -u benchmarks/attn_persistent.py ;;
    attn_pers128) python3 -u benchmarks/attn_persistent.py --head-dim 128 --causal full ;;
    attn_pp)     python3 -u benchmarks/attention.py --quick --pass fwd --few --each --no-pallas ;;
    gpu_pingpong) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_pingpong.py ;;
    gpu_session9) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_sync_carried.py tests/test_tf32.py tests/test_rowwise.py tests/test_mma.py ;;
    gpu_pending9) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_sort.py tests/test_sync_proxy.py tests/test_probe10.py tests/test_register_index.py tests/test_warp_specialize.py -k "not multicast" ;;
    gpu_session9b) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe9.py tests/test_reductions.py tests/test_attention.py tests/test_warp_specialize.py ;;
    softmax_all) python3 -u benchmarks/rowwise.py --op softmax --op "softmax smem" ;;
    ncu_rows)    for cfg in "paged --splits 4 --stages 2" "paged --splits 4 --stages 3 --q-regs" "softmax --chunks 8"; do
                   echo "=== $cfg"
                   ncu --clock-control none --kernel-name regex:"paged|softmax" --launch-skip 2 --launch-count 1 \
                     --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
                     python3 benchmarks/profile_rows.py $cfg 2>&1 | grep -E "error|Throughput|Duration|Stall|stall|Occupancy|Registers|Shared Mem|Block Limit|Issued|Eligible|Active Warps|Warp Cycles"
                 done ;;
    ncu_rows_l2) for cfg in softmax softmax_default rmsnorm layernorm; do   # is long-row layer norm L2-bound?
                   echo "=== $cfg"
                   ncu --clock-control none --kernel-name regex:"softmax|layernorm" --launch-skip 2 --launch-count 1 \
                     --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
                     python3 benchmarks/profile_rows.py $cfg 2>&1 | grep -E "error|==PROF==|gpu__|dram__|lts__|l1tex__|sm__"
                 done ;;
    ncu_attn)    for cfg in "" "--pingpong" "--causal"; do
                   echo "=== attention forward $cfg"
                   ncu --clock-control none --kernel-name regex:forward --launch-skip 2 --launch-count 1 \
                     --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
                     --section SchedulerStats --section Occupancy \
                     python3 benchmarks/profile_attention.py $cfg 2>&1 | grep -E "error|Throughput|Duration|Stall|stall|Occupancy|Registers|Shared Mem|Block Limit|Issued|Eligible|Active Warps|Warp Cycles|Pipe|pipe|Executed Ipc|SM Busy"
                 done ;;
    ncu_attn_bwd) echo "=== attention backward"
                 ncu --clock-control none --kernel-name regex:"dkv|dq" --launch-skip 1 --launch-count 1 \
                   --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
                   --section SchedulerStats --section Occupancy --section LaunchStats \
                   python3 benchmarks/profile_attention.py --bwd 2>&1 | grep -E "error|Throughput|Duration|Stall|stall|Occupancy|Registers|Shared Mem|Block Limit|Issued|Eligible|Active Warps|Warp Cycles|Pipe|pipe|Executed Ipc|SM Busy|Grid Size|Block Size|==PROF==" ;;
    kernels_rows) for cfg in "paged --splits 4 --stages 2" "paged --splits 4 --stages 2 --q-regs" "softmax --chunks 8"; do
                   echo "=== $cfg"; python3 benchmarks/profile_rows.py $cfg --kernels; done ;;
    rowwise_ln)  python3 -u benchmarks/rowwise.py --op "layernorm fwd" --op "layernorm bwd" --op rmsnorm ;;
    rowwise)     python3 -u benchmarks/rowwise.py --plot "$OUT/rowwise.png" ;;
    gpu_rows)    python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_rowwise.py tests/test_paged_attention.py ;;
    # Every example, four at a time (each its own log; no preallocation, they share the GPU): about 40 s.
    examples)    mkdir -p "$OUT/ex"; ls examples/*.py | XLA_PYTHON_CLIENT_PREALLOCATE=false xargs -P 4 -I{} sh -c 'timeout 150 python3 -u {} >"$OUT/ex/$(basename {}).log" 2>&1; echo "rc=$?" >>"$OUT/ex/$(basename {}).log"'
                 for f in examples/*.py; do echo "== $f"; tail -6 "$OUT/ex/$(basename "$f").log"; done ;;
    gpu_pending10) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_split_rows.py tests/test_mma.py tests/test_alias_sync.py tests/test_sync_gmem.py tests/test_probe14.py -k "shar or full_reductions or split or alias or in_place or gmem or cluster" ;;
    gpu_split)   python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_split_rows.py tests/test_rowwise.py tests/test_sync_carried.py ;;
    rowwise_softmax) python3 -u benchmarks/rowwise.py --op softmax ;;
    mixed_rows)  python3 -u benchmarks/mixed_rows.py ;;
    ln_pairs)    python3 -u benchmarks/mixed_rows.py --pairs ;;
    ln_mc)       python3 -u benchmarks/ln_multicast.py ;;
    ln_res)      python3 -u benchmarks/ln_resident.py ;;
    gpu_pending14) python3 -u -m pytest -q -p no:cacheprovider tests/test_probe23.py tests/test_probe23b.py tests/test_pipeline_tiles.py
                 python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_scatter.py tests/test_gather.py tests/test_probe16.py tests/test_probe17.py tests/test_numerics_edges.py tests/test_layout_cases.py ;;
    attn_exp)    python3 -u benchmarks/attn_exp.py ;;
    epi_bufs)    python3 -u benchmarks/epilogue_bufs.py ;;
    attn_wg3)    python3 -u benchmarks/attention.py --quick --pass fwd --wg3 --each --no-pallas ;;
    attn_lpt)    python3 -u benchmarks/attention.py --quick --pass fwd --lpt --each --no-pallas ;;
    attn_lpt64c) python3 -u benchmarks/attention.py --quick --pass fwd --lpt --each --no-pallas --head-dim 64 --causal causal ;;
    gpu_last14)  python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe23.py tests/test_probe23b.py tests/test_probe16.py tests/test_probe17.py tests/test_numerics_edges.py ;;
    gpu_final14) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_attention.py tests/test_probe23.py tests/test_probe23b.py tests/test_pipeline_tiles.py ;;
    attn_wg3b)   python3 -u benchmarks/attention.py --quick --pass fwd --head-dim 64 --wg3b --each --no-pallas ;;
    rows_wg)     python3 -u benchmarks/rows_warpgroups.py ;;
    gpu_pending11) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_unit_axes.py tests/test_probe15.py tests/test_sync_gmem.py tests/test_split_rows.py tests/test_numerics_edges.py tests/test_ragged.py -k "unit or probe15 or tma_store or gmem or shared_scratch or loop or ragged or gpu_matches" ;;
    gpu_pending11b) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_sync_stages.py tests/test_ragged_dot.py tests/test_probe15.py ;;
    gpu_pending12)  python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe16.py tests/test_probe17.py ;;
    gpu_pending15) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe23b.py -k "128_tokens" ;;
    attn_ptxas)  n=0; for o in "" --overlap "--overlap --pingpong" --bwd; do n=$((n+1)); echo "== $o"; MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=/tmp/dump$n python3 -u benchmarks/profile_attention.py --head-dim 128 --runs 1 $o 2>&1 | grep -iE "error|registers|spill|stack" | head -20; ls /tmp/dump$n 2>/dev/null | head -3; grep -rihE "registers|spill" /tmp/dump$n 2>/dev/null | head -8; done ;;
    attn_bwd_ws) python3 -u benchmarks/attention.py --quick --pass bwd --bwd-ws --each --no-pallas --causal full ;;
    gpu_pending15b) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe24.py tests/test_probe24b.py tests/test_attention.py ;;
    attn_overlap) MOSAIC_GPU_DUMP_PTXAS=1 python3 -u benchmarks/attn_overlap.py ;;
    attn_bwd_order) MOSAIC_GPU_DUMP_PTXAS=1 python3 -u benchmarks/attn_bwd_order.py 2>&1 | grep -vE "bytes gmem|Compile time|Function properties" ;;
    attn_bwd_stages) MOSAIC_GPU_DUMP_PTXAS=1 python3 -u benchmarks/attn_bwd_order.py --stages 2>&1 | grep -vE "bytes gmem|Compile time|Function properties" ;;
    attn_dq_first) python3 -u benchmarks/attention.py --quick --pass bwd --dq-first --each --no-pallas ;;
    smem_limit)  python3 -u benchmarks/probe_smem_limit.py ;;
    gpu_pending17) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe25e.py tests/test_probe26*.py
                   python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_attention.py -k "gpu_forward_and_gradients" ;;
    gpu_pending18) python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_probe27_gpu.py tests/test_rowwise.py tests/test_scan.py ;;
    gpu_attn)    python3 -u -m pytest -q -p no:cacheprovider -m gpu tests/test_attention.py ;;
    prod_regs)   python3 -u benchmarks/producer_regs.py ;;
    barrier_forms) python3 -u benchmarks/barrier_forms.py ;;
    barrier_bwd) python3 -u benchmarks/barrier_forms.py --bwd-only ;;
    examples_mm) for f in examples/matmul.py examples/paged_attention.py; do echo "== $f"; timeout 200 python3 -u "$f" 2>&1 | tail -8; done ;;
    *)           echo "unknown step $1"; return 2 ;;
  esac
}
# Every process under PID, itself included, collected before any is signalled: a step's grandchildren (a benchmark's
# per-setting subprocess) outlived `pkill -P` and held the GPU through the next steps (session 55: half of the visit's
# figures measured beside a leftover run, and the next run out of memory).
descendants() { local c; for c in $(pgrep -P "$1"); do descendants "$c"; done; echo "$1"; }
for s in "$@"; do
  name=${s%%:*}; secs=${s#*:}; [ "$secs" = "$s" ] && secs=300
  t0=$(date +%s)
  # and whatever still holds the GPU from before (an orphan of a killed step, a hung kernel) goes first: a
  # container's nvidia-smi lists no processes, so orphaned pythons (parent 1) holding its memory are killed
  used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -d ' ')
  if [ "${used:-0}" -gt 1000 ] 2>/dev/null; then
    left=$(ps -eo pid=,ppid=,comm= | awk '$2 == 1 && $3 ~ /^python/ {print $1}')
    echo "== $used MiB of GPU memory held before $name; killing orphaned pythons: ${left:-none}"
    [ -n "$left" ] && { kill -KILL $left 2>/dev/null; sleep 3; }
  fi
  ( step "$name" ) >"$OUT/$name.log" 2>&1 &
  pid=$!
  ( sleep "$secs"; pids=$(descendants $pid); kill -TERM $pids; sleep 2; kill -KILL $pids ) 2>/dev/null &
  killer=$!
  wait $pid; rc=$?
  kill $killer 2>/dev/null
  echo "== $name rc=$rc $(( $(date +%s) - t0 ))s"; tail -n 25 "$OUT/$name.log"
done
