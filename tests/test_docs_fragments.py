"""The fragments of docs/language.md (a loop body, a few lines), found by their first line, placed in a minimal
kernel (FRAGMENTS) and checked: a builtin or keyword that does not exist, or a shape that cannot work, fails. A
fragment whose first line changed fails too: update its marker here. (Split from test_docs_snippets.py, which checks
the docs' whole kernels and holds the helpers used here.)"""
from __future__ import annotations

import textwrap

import jax.numpy as jnp
import pytest

from test_docs_snippets import PRELUDE, L, S, doc_blocks, f16, f32, i32, import_source

# Fragments of docs/language.md, each in a minimal kernel. `{frag}` is the block, indented by
# four spaces; `edit` replaces a placeholder line of the fragment.
FRAGMENTS = {
    "table = ml.smem((per_split,), jnp.int32)": ("""
@mg.mgpu_kernel(out_shape=lambda k_pages, block_tables: jax.ShapeDtypeStruct((block_tables.shape[0], 64, 64), jnp.float32),
                grid=lambda k_pages, block_tables: (block_tables.shape[0],))
def frag(k_pages, block_tables, out):
    b, per_split, first, count, kv_head = ml.program_id(0), 16, 0, 8, 0
    k_s = ml.smem((64, 64), k_pages.dtype)
    acc = ml.zeros((64, 64), jnp.float32)
{frag}
        acc = acc + k_s[...].astype(jnp.float32)
    out.at[b][...] = acc
""", [S((2, 32, 64, 64), f16), S((4, 16), i32)], None),
    "# x viewed as (n, d // 256, 256)": ("""
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0],), jnp.float32), grid=lambda x: (x.shape[0],))
def frag(x, out):
    i, rows, chunks = ml.program_id(0), x.shape[1], 4
    per = rows // chunks
{frag}
    out[i] = ml.max(m)
""", [S((4, 32, 256), f32)], None),
    "for c in ml.static_range(chunks):": ("""
@ml.inline
def f(v):
    return v * 2.0

@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def frag(x, out):
    pid, programs, n, chunks = ml.program_id(0), ml.num_programs(0), x.shape[0], 4
    per = x.shape[1] // chunks
    x_s = ml.smem((x.shape[1], 256), x.dtype)
{frag}
""", [S((16, 32, 256), f32)], ("...", "nxt = ml.where(row + programs < n, row + programs, row)")),
    "for k in ml.range(a.shape[1] // bk, stages=4):\n    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)     #": ("""
@mg.mgpu_kernel(out_shape=lambda a, bt, row_scale, col_scale: jax.ShapeDtypeStruct((a.shape[0], bt.shape[0]), jnp.float32),
                grid=lambda a, bt, row_scale, col_scale: (a.shape[0] // 128, bt.shape[0] // 128))
def frag(a, bt, row_scale, col_scale, c):
    i, j, bm, bn, bk = ml.program_id(0), ml.program_id(1), 128, 128, 128
    a_s, b_s = ml.smem((bm, bk)), ml.smem((bn, bk))
    acc = ml.zeros((bm, bn), jnp.float32)
{frag}
    c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = y
""", [S((256, 512), jnp.float8_e4m3fn), S((256, 512), jnp.float8_e4m3fn), S((256,), f32), S((256,), f32)], None),
    "b = ml.load(b_ptr.at[offs_k[:, None] + k * BLOCK_K, offs_bn[None, :]]": ("""
@mg.mgpu_kernel(out_shape=lambda a_ptr, b_ptr: jax.ShapeDtypeStruct((64, 64), jnp.float32))
def frag(a_ptr, b_ptr, out):
    K, BLOCK_K, k = a_ptr.shape[1], 64, 0
    offs_am, offs_bn, offs_k = ml.arange(0, 64), ml.arange(0, 64), ml.arange(0, BLOCK_K)
    acc = ml.zeros((64, 64), jnp.float32)
    a = ml.load(a_ptr.at[offs_am[:, None], offs_k[None, :] + k * BLOCK_K])
{frag}
    out[...] = acc
""", [S((64, 64), jnp.float8_e4m3fn), S((64, 64), jnp.float8_e4m3fn)], None),
    "s = ml.dot(q_s, k_s.T)": ("""
@mg.mgpu_kernel(out_shape=lambda q, k, v: jax.ShapeDtypeStruct((64, 64), jnp.float32))
def frag(q, k, v, out):
    q_s, k_s, v_s = ml.smem((64, 64)), ml.smem((64, 64)), ml.smem((64, 64))
    ml.copy(q, q_s)
    ml.copy(k, k_s)
    ml.copy(v, v_s)
    acc = ml.zeros((64, 64), jnp.float32)
{frag}
    out[...] = acc
""", [S((64, 64), f16)] * 3, None),
    "for k in ml.range(a.shape[1] // bk, stages=4):\n    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)\n": ("""
@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32),
                grid=lambda a, b: (a.shape[0] // 128, b.shape[1] // 128))
def frag(a, b, c):
    i, j, bm, bn, bk = ml.program_id(0), ml.program_id(1), 128, 128, 64
    a_s, b_s = ml.smem((bm, bk)), ml.smem((bk, bn))
    acc = ml.zeros((bm, bn), jnp.float32)
{frag}
    c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = acc
""", [S((256, 512), f16), S((512, 256), f16)], None),
    "for j in ml.range(n, stages=3):": ("""
@mg.mgpu_kernel(out_shape=lambda q, k, v: jax.ShapeDtypeStruct(q.shape, jnp.float32),
                grid=lambda q, k, v: (q.shape[0], q.shape[2]))
def frag(q, k, v, out):
    b, h = ml.program_id(0), ml.program_id(1)
    hk, bkv, c = h, 64, 0.125 * 1.4426950408889634
    n = k.shape[1] // bkv
    q_s, k_s, v_s = ml.smem((64, q.shape[3])), ml.smem((bkv, q.shape[3])), ml.smem((bkv, q.shape[3]))
    ml.copy(q.at[b, ml.ds(0, 64), h, :], q_s)
    m = ml.full((64,), -1e30, jnp.float32)
    l = ml.zeros((64,), jnp.float32)
    acc = ml.zeros((64, q.shape[3]), jnp.float32)
{frag}
    out.at[b, :, h, :][...] = acc / l[:, None]
""", [S((2, 64, 2, 64), f16), S((2, 256, 2, 64), f16), S((2, 256, 2, 64), f16)], None),
    "steps = 0": ("""
@mg.mgpu_kernel(out_shape=lambda x, lim: (x, jax.ShapeDtypeStruct((), jnp.int32)))
def frag(x, lim, out, nsteps):
    v = x[...]
    limit = lim[...]
{frag}
    out[...] = v
    nsteps[...] = steps
""", [S((256,), f32), S((), f32)], None),
    "ev, od = x.at[::2], x.at[1::2]": ("""
@mg.mgpu_kernel(out_shape=lambda x, v, w: (jax.ShapeDtypeStruct((32, 64), jnp.float32), x, jax.ShapeDtypeStruct((16, 40), jnp.float32)))
def frag(x, v_in, w_in, out, o, grid):
    v, w = v_in[...], w_in[...]
{frag}
""", [S((64, 64), f32), S((32, 64), f32), S((8,), f32)], None),
    "o[0:33] = 0": ("""
@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def frag(x, o, p):
    r = ml.program_id(0) + 3
    buf = ml.smem((16, 24), jnp.float32)
    buf[...] = x[0:16, :]
    p[...] = x[...]
    o[...] = x[...]
{frag}
""", [S((64, 24), f32)], None),
    "a = ml.load(a_ptr.at[offs_z[:, None, None]": ("""
@mg.mgpu_kernel(out_shape=lambda a_ptr, b_ptr: jax.ShapeDtypeStruct((2, 64, 32), jnp.float32))
def frag(a_ptr, b_ptr, out):
    offs_z, offs_m, offs_k, offs_n = ml.arange(0, 2), ml.arange(0, 64), ml.arange(0, 64), ml.arange(0, 32)
    acc = ml.zeros((2, 64, 32), jnp.float32)
{frag}
    out[...] = acc
""", [S((2, 64, 64), f16), S((2, 64, 32), f16)], None),
    "def body(k, acc):": ("""
@mg.mgpu_kernel(out_shape=lambda x, w, sx, sw: jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32),
                grid=lambda x, w, sx, sw: (x.shape[0] // 64, w.shape[1] // 64))
def frag(x_ref, w_ref, sx_ref, sw_ref, o_ref):
    i, j = ml.program_id(0), ml.program_id(1)
    sx, sw = sx_ref[ml.ds(i * 64, 64)], sw_ref[ml.ds(j * 64, 64)]
{frag}
""", [S((128, 256), jnp.int8), S((256, 128), jnp.int8), S((128,), f32), S((128,), f32)], None),
    "def step(h, t):": ("""
from jax import lax
@mg.mgpu_kernel(out_shape=lambda x, dt, a, b, c: x, grid=lambda x, dt, a, b, c: (x.shape[1] // 64,))
def frag(x, dt, a, b, c, y_ref):
    cols = ml.ds(ml.program_id(0) * 64, 64)
    a_v = a[:, cols]
{frag}
""", [S((100, 128), f32), S((100, 128), f32), S((16, 128), f32), S((100, 16), f32), S((100, 16), f32)], None),
    "a = A[...]": ("""
from jax import lax
@mg.mgpu_kernel(out_shape=lambda x, dt, A, B, C: x)
def frag(x, dt, A, B, C, y_ref):
{frag}
""", [S((72, 64), f32), S((72, 64), f32), S((64, 16), f32), S((72, 16), f32), S((72, 16), f32)], None),
    "order = ((ml.arange(0, 2) * 4)[None, :]": ("""
@mg.mgpu_kernel(out_shape=lambda b_ref, zeros_ptr: jax.ShapeDtypeStruct((64, 64), jnp.int32))
def frag(b_ref, zeros_ptr, out):
    BK, BN, group_size, n_groups, k = 64, 64, 64, zeros_ptr.shape[0], 1
    cols8 = ml.arange(0, BN // 8)
    b = b_ref[...]
{frag}
    out[...] = w
""", [S((64, 64), i32), S((4, 8), i32)], None),
    "@ml.inline\ndef mainloop(": ("""{frag}
@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32),
                grid=lambda a, b: (a.shape[0] // 128, b.shape[1] // 128))
def frag(a, b, c):
    i, j = ml.program_id(0), ml.program_id(1)
    c.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)][...] = mainloop(a, b, i, j, 128, 128, 64, 3)
""", [S((256, 512), f16), S((512, 256), f16)], None),
    "out[...] = jnp.copysign(1.0, v)": ("""
@mg.mgpu_kernel(out_shape=lambda x: x)
def frag(x, out):
    v = x[...]
{frag}
""", [S((256,), f32)], None),
    "out[...] = v / 3.0": ("""
@mg.mgpu_kernel(out_shape=lambda x: x)
def frag(x, out):
    v = x[...]
{frag}
""", [S((256,), f32)], None),
    "gy, gx = jnp.gradient(phi_ref[...], dy, dx)": ("""
@mg.mgpu_kernel(out_shape=lambda phi_ref: phi_ref)
def frag(phi_ref, out):
    dy, dx = 0.5, 0.25
{frag}
    out[...] = gx + gy
""", [S((16, 128), f32)], None),
    "g = jax.tree.map(lambda r: r[...], grads)": ("""
@mg.mgpu_kernel(out_shape=lambda params, grads, state: params)
def frag(params, grads, state, new_params):
    b1, lr = 0.9, 1e-3
{frag}
""", [{"b": S((128,), f32), "w": S((8, 128), f32)}] * 2 + [{"mu": {"b": S((128,), f32), "w": S((8, 128), f32)}}],
        None),
    "s = ml.smem((1024,))": ("""
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 1024,))
def frag(x, out):
    i = ml.program_id(0)
{frag}
""", [S((4096,), f32)], None),
}


@pytest.mark.parametrize("marker", list(FRAGMENTS), ids=lambda m: m.split("\n")[0][:40])
def test_language_fragment_checks_in_a_kernel(marker, tmp_path):
  found = [b for b in doc_blocks() if b.doc == L and b.text.startswith(marker)]
  assert len(found) == 1, f"{len(found)} blocks of {L} start with {marker!r} (update FRAGMENTS)"
  template, specs, edit = FRAGMENTS[marker]
  frag = found[0].text.rstrip("\n")
  if edit is not None:
    old, new = edit
    lines = frag.split("\n")
    hits = [n for n, line in enumerate(lines) if line.split("#")[0].strip() == old]
    assert len(hits) == 1, f"the fragment at {found[0].where} has no line {old!r}"
    lines[hits[0]] = lines[hits[0]][:len(lines[hits[0]]) - len(lines[hits[0]].lstrip())] + new
    frag = "\n".join(lines)
  if template.startswith("{frag}"):
    source = PRELUDE + template.replace("{frag}", frag)
  else:
    source = PRELUDE + template.replace("{frag}", textwrap.indent(frag, "    "))
  mod = import_source(source, tmp_path / f"l{found[0].line}", "language_fragment")
  mod.frag.check(*specs)
