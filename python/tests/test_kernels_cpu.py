"""Shipped kernels on NumPy arrays through the CPU backend, against NumPy float64 references, odd sizes."""
import math

import numpy as np
import pytest

import jitk

rng = np.random.default_rng(7)
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def rand(*shape, dtype=np.float32, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def rel_err(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


def name(dtype):
    return {np.float32: "f32", np.float64: "f64"}[dtype]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 1000, 4097])
def test_saxpy(dtype, n):
    k = jitk.get("saxpy", dtype=name(dtype), target="cpu")
    x, y = rand(n, dtype=dtype), rand(n, dtype=dtype)
    want = 1.5 * x.astype(np.float64) + y
    k(x, y, 1.5)
    assert rel_err(y, want) <= TOL[dtype]


def test_saxpy_takes_any_shape_of_n_elements():
    k = jitk.get("saxpy", dtype="f32", target="cpu")
    x, y = rand(3, 5, 7), rand(105)
    want = -0.5 * x.reshape(-1).astype(np.float64) + y
    k(x, y, -0.5)
    assert rel_err(y, want) <= TOL[np.float32]


def rms_norm_ref(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows,hidden", [(1, 1), (7, 7), (33, 1000), (5, 4097)])
def test_rms_norm(dtype, rows, hidden):
    k = jitk.get("rms_norm", dtype=name(dtype), hidden=hidden, target="cpu")
    x, w = rand(rows, hidden, dtype=dtype), rand(hidden, dtype=dtype)
    y = np.full((rows, hidden), np.nan, dtype=dtype)
    k(x, w, y, eps=1e-5)
    assert rel_err(y, rms_norm_ref(x, w, 1e-5)) <= TOL[dtype] * 4


def test_rms_norm_takes_numpy_dtypes_and_keywords():
    k = jitk.get("rms_norm", dtype=np.float32, hidden=64, target="cpu")
    assert k is jitk.get("rms_norm", dtype="f32", hidden=64, target="cpu")  # remembered
    x, w = rand(3, 64), rand(64)
    y = np.empty_like(x)
    k(y=y, weight=w, x=x)
    assert rel_err(y, rms_norm_ref(x, w, 1e-6)) <= 1e-5
    assert k.name == "rms_norm" and k.backend == "cpu" and len(k.cache_key) > 0
    assert "hidden=64" in k.params and "rms_norm" in repr(k)


def test_fused_add_rms_norm():
    rows, hidden = 9, 333
    k = jitk.get("fused_add_rms_norm", dtype="f64", hidden=hidden, target="cpu")
    x, res, w = rand(rows, hidden, dtype=np.float64), rand(rows, hidden, dtype=np.float64), rand(hidden, dtype=np.float64)
    want_res = res + x
    want = rms_norm_ref(want_res, w, 1e-6)
    y = np.empty_like(x)
    k(x, res, w, y)
    assert rel_err(res, want_res) <= 1e-14
    assert rel_err(y, want) <= 1e-12


def silu(v):
    return v / (1 + np.exp(-v))


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(v, approximate):
    if approximate == "tanh":
        return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    return 0.5 * v * (1 + _erf(v / math.sqrt(2)).astype(np.float64))


@pytest.mark.parametrize("rows,hidden", [(1, 1), (7, 13), (33, 1000)])
def test_silu_and_mul(rows, hidden):
    k = jitk.get("silu_and_mul", dtype="f32", hidden=hidden, target="cpu")
    x = rand(rows, 2 * hidden)
    out = np.empty((rows, hidden), np.float32)
    k(x, out)
    x64 = x.astype(np.float64)
    assert rel_err(out, silu(x64[:, :hidden]) * x64[:, hidden:]) <= 1e-5


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_mul(approximate):
    rows, hidden = 7, 101
    k = jitk.get("gelu_and_mul", dtype="f64", hidden=hidden, approximate=approximate, target="cpu")
    x = rand(rows, 2 * hidden, dtype=np.float64)
    out = np.empty((rows, hidden))
    k(x, out)
    assert rel_err(out, gelu(x[:, :hidden], approximate) * x[:, hidden:]) <= 1e-12


@pytest.mark.parametrize("kernel", ["softmax", "log_softmax"])
def test_softmax(kernel):
    rows, hidden = 11, 777
    k = jitk.get(kernel, dtype="f32", hidden=hidden, target="cpu")
    x = rand(rows, hidden, lo=-10, hi=10)
    y = np.empty_like(x)
    k(x, y)
    x64 = x.astype(np.float64)
    shifted = x64 - x64.max(axis=1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    want = np.exp(shifted - lse) if kernel == "softmax" else shifted - lse
    assert rel_err(y, want) <= 1e-5


def test_layer_norm():
    rows, hidden = 13, 515
    k = jitk.get("layer_norm", dtype="f32", hidden=hidden, target="cpu")
    x, w, b = rand(rows, hidden), rand(hidden), rand(hidden)
    y = np.empty_like(x)
    k(x, w, b, y, eps=1e-5)
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mu) ** 2).mean(axis=1, keepdims=True)
    assert rel_err(y, (x64 - mu) / np.sqrt(var + 1e-5) * w + b) <= 1e-5


def test_rms_norm_with_an_epilogue_chain():
    rows, hidden = 5, 96
    k = jitk.get("rms_norm", dtype="f32", hidden=hidden, epilogue="mul_scalar>add_vec>relu", target="cpu")
    x, w, bias = rand(rows, hidden), rand(hidden), rand(hidden)
    y = np.empty_like(x)
    k(x, w, y, epilogue=[2.0, bias])
    want = np.maximum(rms_norm_ref(x, w, 1e-6) * 2.0 + bias, 0)
    assert rel_err(y, want) <= 1e-5


@pytest.mark.parametrize("a_layout,b_layout", [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col")])
def test_gemm_layouts(a_layout, b_layout):
    m, n, kk = 37, 29, 53
    k = jitk.get("gemm", dtype="f64", a_layout=a_layout, b_layout=b_layout, target="cpu")
    a = rand(m, kk, dtype=np.float64)
    b = rand(kk, n, dtype=np.float64)
    if a_layout == "col":
        a = np.asfortranarray(a)
    if b_layout == "col":
        b = np.asfortranarray(b)
    c = rand(m, n, dtype=np.float64)
    want = 0.5 * (a @ b) + 2.0 * c
    k(a, b, c, alpha=0.5, beta=2.0)
    assert rel_err(c, want) <= 1e-12


def test_gemm_tuned_picks_a_candidate_and_remembers_it():
    k = jitk.get_tuned("gemm", (48, 40, 64), dtype="f32", a_layout="row", b_layout="row", target="cpu")
    a, b = rand(48, 64), rand(64, 40)
    c = np.empty((48, 40), np.float32)
    k(a, b, c)
    assert rel_err(c, a.astype(np.float64) @ b) <= 1e-5
    assert jitk.get_tuned("gemm", (48, 40, 64), dtype="f32", a_layout="row", b_layout="row", target="cpu") is k
    assert "tile_m=" in k.params


GATE_ACT = {
    "silu": lambda g: g / (1.0 + np.exp(-g)),
    "gelu": lambda g: 0.5 * g * (1.0 + np.vectorize(math.erf)(g / math.sqrt(2.0))),
    "gelu_tanh": lambda g: 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3))),
}


def interleave_gate_up(wg, wu):
    """[K, H] gate and up weights -> B [K, 2 H] in groups of 16 columns, 8 gate then 8 up (docs/gemm.md)."""
    kk = wg.shape[0]
    return np.stack((wg.reshape(kk, -1, 8), wu.reshape(kk, -1, 8)), 2).reshape(kk, -1)


@pytest.mark.parametrize("gate", ["silu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("b_layout", ["row", "col"])
def test_gated_gemm_writes_act_of_gate_times_up_into_n_over_2_columns(gate, dtype, b_layout):
    m, kk, h = 37, 53, 40  # B: 80 columns, 5 groups of 8 gate + 8 up; C: 40 columns
    k = jitk.get("gemm", dtype=name(dtype), a_layout="row", b_layout=b_layout, gate=gate, target="cpu")
    assert k.signature == ("gemm(a[m, k], b[k, n], c[m, n/2], alpha=1, beta=0, epilogue=(), heads=0, kv_heads=0, "
        "positions[m]=None, theta=10000, slots[m]=None, num_pages=0, "
        "k_cache[num_pages, page_size, kv_heads, head_dim]=None, v_cache[num_pages, page_size, kv_heads, head_dim]=None)")
    a, wg, wu = rand(m, kk, dtype=dtype), rand(kk, h, dtype=dtype, lo=-0.5, hi=0.5), rand(kk, h, dtype=dtype, lo=-0.5, hi=0.5)
    b = interleave_gate_up(wg, wu)
    if b_layout == "col":
        b = np.asfortranarray(b)
    c = rand(m, h, dtype=dtype)
    a64, c64 = a.astype(np.float64), c.astype(np.float64)
    want = GATE_ACT[gate](0.5 * (a64 @ wg)) * (0.5 * (a64 @ wu)) + 2.0 * c64
    k(a, b, c, alpha=0.5, beta=2.0)
    assert rel_err(c, want) <= TOL[dtype]
    # its epilogue chain's vectors are C's rows (n / 2 values)
    kb = jitk.get("gemm", dtype=name(dtype), a_layout="row", b_layout=b_layout, gate=gate, epilogue="add_vec", target="cpu")
    bias = rand(h, dtype=dtype)
    c = np.full((m, h), np.nan, dtype)
    kb(a, b, c, epilogue=[bias])
    assert rel_err(c, GATE_ACT[gate](a64 @ wg) * (a64 @ wu) + bias) <= TOL[dtype]


def test_gated_gemm_refuses_a_c_of_n_columns_and_an_n_not_in_groups_of_16():
    k = jitk.get("gemm", dtype="f64", a_layout="row", b_layout="row", gate="silu", target="cpu")
    a, b = rand(4, 8, dtype=np.float64), rand(8, 32, dtype=np.float64)
    with pytest.raises(ValueError, match=r"argument 'c' has shape \(4, 32\); dimension 1 \(n/2\) must be 16 \(n = 32\)"):
        k(a, b, np.zeros((4, 32)))
    # n comes from B (before C): C of the wrong width is named, with the n it was checked against
    with pytest.raises(ValueError, match=r"argument 'c' has shape \(4, 16\); dimension 1 \(n/2\) must be 15 \(n = 30\)"):
        k(c=np.zeros((4, 16)), a=a, b=rand(8, 30, dtype=np.float64))
    with pytest.raises(jitk.Error, match="groups of 16"):
        k(a, rand(8, 24, dtype=np.float64), np.zeros((4, 12)))
    # gate = none keeps C at n columns
    k0 = jitk.get("gemm", dtype="f64", a_layout="row", b_layout="row", gate="none", target="cpu")
    assert k0.signature == ("gemm(a[m, k], b[k, n], c[m, n], alpha=1, beta=0, epilogue=(), heads=0, kv_heads=0, "
        "positions[m]=None, theta=10000, slots[m]=None, num_pages=0, "
        "k_cache[num_pages, page_size, kv_heads, head_dim]=None, v_cache[num_pages, page_size, kv_heads, head_dim]=None)")
    c = np.zeros((4, 32))
    k0(a, b, c)
    assert rel_err(c, a @ b) <= 1e-12


def test_adamw():
    n = 1001
    k = jitk.get("adamw", dtype="f32", target="cpu")
    p, g = rand(n), rand(n)
    m, v = rand(n, lo=-0.1, hi=0.1), rand(n, lo=0, hi=0.1)
    p64, m64, v64 = p.astype(np.float64), m.astype(np.float64), v.astype(np.float64)
    lr, step, b1, b2, eps, wd = 1e-2, 3, 0.9, 0.999, 1e-8, 0.01
    p64 *= 1 - lr * wd
    m64 = b1 * m64 + (1 - b1) * g
    v64 = b2 * v64 + (1 - b2) * g.astype(np.float64) ** 2
    p64 -= lr / (1 - b1 ** step) * m64 / (np.sqrt(v64 / (1 - b2 ** step)) + eps)
    k(p, g, m, v, lr, step)
    assert rel_err(p, p64) <= 1e-6 and rel_err(m, m64) <= 1e-6 and rel_err(v, v64) <= 1e-6


def attention_ref(q, k, v, cu_q, cu_k, scale, causal):
    out = np.zeros(q.shape)
    heads, kv_heads = q.shape[1], k.shape[1]
    group = heads // kv_heads
    for b in range(len(cu_q) - 1):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        lq, lk = cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]
        for h in range(heads):
            s = scale * q[qs, h].astype(np.float64) @ k[ks, h // group].astype(np.float64).T
            if causal:
                i = np.arange(lq)[:, None]
                j = np.arange(lk)[None, :]
                s = np.where(j <= i + lk - lq, s, -np.inf)
            mx = s.max(axis=1, keepdims=True)
            p = np.where(np.isfinite(mx), np.exp(s - np.where(np.isfinite(mx), mx, 0)), 0)
            den = p.sum(axis=1, keepdims=True)
            out[qs, h] = np.where(den > 0, p @ v[ks, h // group] / np.where(den > 0, den, 1), 0)
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_attention_prefill_varlen_gqa(causal):
    d, kv_heads, group = 16, 2, 2
    lens_q, lens_k = [3, 1, 7], [5, 1, 9]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q = rand(cu_q[-1], kv_heads * group, d)
    kk, v = rand(cu_k[-1], kv_heads, d), rand(cu_k[-1], kv_heads, d)
    o = np.full_like(q, np.nan)
    lse = np.full((kv_heads * group, cu_q[-1]), np.nan, np.float32)
    k = jitk.get("attention_prefill", dtype="f32", head_dim=d, causal=causal, group=group, target="cpu")
    k(q, kk, v, o, cu_q, cu_k, 7, 0.25, lse=lse)
    assert rel_err(o, attention_ref(q, kk, v, cu_q, cu_k, 0.25, causal)) <= 1e-5
    assert np.isfinite(lse).all()


def test_attention_decode_paged():
    d, kv_heads, group, page, pages, batch = 8, 2, 2, 4, 6, 2
    k_cache, v_cache = rand(pages, page, kv_heads, d), rand(pages, page, kv_heads, d)
    block_table = np.array([[3, 0, 5], [1, 2, 4]], np.int32)
    context = np.array([10, 5], np.int32)
    q = rand(batch, kv_heads * group, d)
    o = np.full_like(q, np.nan)
    k = jitk.get("attention_decode", dtype="f32", head_dim=d, page_size=page, group=group, target="cpu")
    k(q, k_cache, v_cache, block_table, context, o, scale=0.3)
    for s in range(batch):
        keys = np.concatenate([k_cache[p] for p in block_table[s]])[: context[s]]
        vals = np.concatenate([v_cache[p] for p in block_table[s]])[: context[s]]
        cu = np.array([0, 1], np.int32)
        cu_k = np.array([0, context[s]], np.int32)
        want = attention_ref(q[s:s + 1], keys, vals, cu, cu_k, 0.3, True)
        assert rel_err(o[s:s + 1], want) <= 1e-5


def test_rotary_neox_theta():
    tokens, heads, kv_heads, d, rot = 5, 3, 1, 8, 6
    q, kk = rand(tokens, heads, d), rand(tokens, kv_heads, d)
    pos = np.array([0, 3, 1, 9, 2], np.int64)
    want_q, want_k = q.astype(np.float64).copy(), kk.astype(np.float64).copy()
    inv = 1.0 / 10000.0 ** (np.arange(0, rot, 2) / rot)
    for arr in (want_q, want_k):
        ang = pos[:, None] * inv[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = arr[..., : rot // 2].copy(), arr[..., rot // 2: rot].copy()
        arr[..., : rot // 2] = a * c - b * s
        arr[..., rot // 2: rot] = b * c + a * s
    k = jitk.get("rotary_embedding", dtype="f32", head_dim=d, rotary_dim=rot, target="cpu")
    k(pos, q, kk)
    assert rel_err(q, want_q) <= 1e-5 and rel_err(kk, want_k) <= 1e-5


def test_kv_cache_append():
    tokens, kv_heads, d, page, pages = 5, 2, 4, 3, 4
    kk, v = rand(tokens, kv_heads, d), rand(tokens, kv_heads, d)
    slots = np.array([0, 4, 11, -1, 7], np.int64)
    k_cache, v_cache = np.zeros((pages, page, kv_heads, d), np.float32), np.zeros((pages, page, kv_heads, d), np.float32)
    k = jitk.get("kv_cache_append", dtype="f32", head_dim=d, page_size=page, target="cpu")
    k(kk, v, slots, k_cache, v_cache)
    flat_k, flat_v = k_cache.reshape(pages * page, kv_heads, d), v_cache.reshape(pages * page, kv_heads, d)
    for t, s in enumerate(slots):
        if s >= 0:
            assert (flat_k[s] == kk[t]).all() and (flat_v[s] == v[t]).all()
    assert (flat_k[[1, 2, 3, 5, 6, 8, 9, 10]] == 0).all()


def test_zero_rows_run_nothing():
    k = jitk.get("rms_norm", dtype="f32", hidden=8, target="cpu")
    x = np.empty((0, 8), np.float32)
    k(x, rand(8), np.empty((0, 8), np.float32))


def test_every_shipped_kernel_is_reachable_or_said_not_to_be():
    listed = {k["name"] for k in jitk.kernels()}
    not_bound = {name for name, _ in jitk._jitk._not_bound()}
    assert {"saxpy", "rms_norm", "silu_and_mul", "gemm", "attention_prefill", "attention_decode"} <= listed
    assert not (listed & not_bound)
    assert listed | not_bound == set(jitk._jitk._catalog())  # a new shipped kernel needs a signature line
    for k in jitk.kernels():
        assert jitk.signature(k["name"]).startswith(k["name"] + "(")
        assert k["params"], k["name"]


ADD_BIAS_CPU = r"""#include "jitk_cpu.h"
constexpr i64 H = JITK_HIDDEN;
JITK_CPU_KERNEL {
  const T* x = JITK_ARG(0, const T*);
  const T* bias = JITK_ARG(1, const T*);
  T* out = JITK_ARG(2, T*);
  const T scale = JITK_ARG(3, T);
  for (i64 r = jitk_begin; r < jitk_end; ++r)
    for (i64 i = 0; i < H; ++i) out[r * H + i] = (x[r * H + i] + bias[i]) * scale;
}
"""


def test_a_kernel_registered_from_python_runs_checked_and_cached():
    jitk.register_kernel("py_add_bias", summary="out = (x + bias) * scale, per row",
                         params={"dtype": ["f32", "f64"], "hidden": (1, 1 << 20)},
                         signature="rows; x:in[rows,hidden]; bias:in[hidden]; out:out[rows,hidden]; scale:float=1",
                         work="rows", cpu=ADD_BIAS_CPU)
    assert jitk.signature("py_add_bias") == "py_add_bias(x[rows, hidden], bias[hidden], out[rows, hidden], scale=1)"
    for dtype in (np.float32, np.float64):
        k = jitk.get("py_add_bias", dtype=name(dtype), hidden=37, target="cpu")
        x, b = rand(5, 37, dtype=dtype), rand(37, dtype=dtype)
        out = np.full((5, 37), np.nan, dtype)
        k(x, b, out, scale=0.5)
        assert rel_err(out, (x.astype(np.float64) + b) * 0.5) <= TOL[dtype]
    with pytest.raises(ValueError, match=r"argument 'bias' has shape \(36,\)"):
        k(x, b[:36], out)
    assert any(a["kernel"] == "py_add_bias" for a in jitk.cache.ls())
    with pytest.raises(jitk.ParamsError, match="the name is taken"):
        jitk.register_kernel("py_add_bias", params={"dtype": ["f32"]}, signature="n; x:out[*n]", work="n", cpu="")
    with pytest.raises(jitk.ParamsError, match="the name is taken"):
        jitk.register_kernel("rms_norm", params={"dtype": ["f32"]}, signature="n; x:out[*n]", work="n", cpu="")


HALF_CPU = r"""#include "jitk_cpu.h"
JITK_CPU_KERNEL {
  const T* x = JITK_ARG(0, const T*);
  T* y = JITK_ARG(1, T*);
  for (i64 i = jitk_begin; i < jitk_end; ++i)
    if (JITK_HALF == 0) y[i] = x[i];
    else if (i % 2 == 0) y[i / 2] = x[i];
}
"""


def test_a_signature_dimension_may_divide_and_depend_on_a_param():
    jitk.register_kernel("py_half", params={"dtype": ["f64"], "half": (0, 1)},
                         signature="n; x:in[n]; y:out[n/2 if half==1 else n]", work="n", cpu=HALF_CPU)
    assert jitk.signature("py_half") == "py_half(x[n], y[n/2 if half==1 else n])"
    x = rand(10, dtype=np.float64)
    k1 = jitk.get("py_half", dtype="f64", half=1, target="cpu")
    assert k1.signature == "py_half(x[n], y[n/2])"
    y = np.zeros(5)
    k1(x, y)
    assert np.array_equal(y, x[::2])
    with pytest.raises(ValueError, match=r"argument 'y' has shape \(10,\); dimension 0 \(n/2\) must be 5 \(n = 10\)"):
        k1(x, np.zeros(10))
    with pytest.raises(ValueError, match=r"dimension 0 \(n/2\) must be whole, but 11 / 2 is not"):
        k1(rand(11, dtype=np.float64), np.zeros(5))
    k0 = jitk.get("py_half", dtype="f64", half=0, target="cpu")
    assert k0.signature == "py_half(x[n], y[n])"
    y = np.zeros(10)
    k0(x, y)
    assert np.array_equal(y, x)
    with pytest.raises(ValueError, match=r"dimension 0 \(n\) must be 10"):
        k0(x, np.zeros(5))
    # a product past 64 bits (a param too large for any array) is refused, not wrapped
    jitk.register_kernel("py_big", params={"dtype": ["f64"], "hidden": (1, 1 << 62)}, signature="n; x:in[hidden*hidden]",
                         work="n", cpu='#include "jitk_cpu.h"\nJITK_CPU_KERNEL {}\n')
    with pytest.raises(ValueError, match=r"dimension 0 \(hidden\*hidden\) must be a size that fits 64 bits"):
        jitk.get("py_big", dtype="f64", hidden=1 << 40, target="cpu")(np.zeros(4))


@pytest.mark.parametrize("kwargs,match", [
    ({"signature": "n; x:out[n/2 if dtype!=f32]", "work": "n"}, "needs 'else"),
    ({"signature": "n; x:out[n else n]", "work": "n"}, "'else' without 'if'"),
    ({"signature": "n; x:out[n/0]", "work": "n"}, "a number >= 1"),
    ({"signature": "n; x:out[n/2/2]", "work": "n"}, "one '/' at most"),
    ({"signature": "n; x:out[n/99999999999999999999]", "work": "n"}, "15 digits at most"),
    ({"signature": "n; x:out[99999999999999999999*n]", "work": "n"}, "15 digits at most"),
    ({"signature": "n; x:out[n+99999999999999999999]", "work": "n"}, "15 digits at most"),
    ({"signature": "n; x:out[n/2 if dtype<f32 else n]", "work": "n"}, "the condition is"),
    ({"signature": "n; x:out[n/2 if dtype!=f32 else n if dtype!=f64 else 1]", "work": "n"}, "one condition"),
    ({"signature": "n; x:out[*n if dtype!=f32 else n]", "work": "n"}, "no condition"),
    ({"signature": "n; x:out[n/2 if gate!=none else n]", "work": "n"}, "depends on 'gate', which is not one of its params"),
    ({"signature": "n; x:out[*n]", "work": "rows"}, "work = 'rows'"),
    ({"signature": "n; x:frob[*n]", "work": "n"}, "unknown form"),
    ({"signature": "n; x:out[*n]; y:out[*n]/i32", "work": "n"}, "kernel's dtype"),
    ({"signature": "n; x:out[*n]", "work": "n", "params": {"dtype": 3}}, "param 'dtype'"),
    ({"signature": "n; x:out[*n]", "work": "n", "min_grain": 0}, "min_grain"),
])
def test_an_unsound_registration_registers_nothing(kwargs, match):
    args = {"params": {"dtype": ["f32"]}, "cpu": "", **kwargs}
    with pytest.raises(jitk.ParamsError, match=match):
        jitk.register_kernel("py_unsound", **args)
    with pytest.raises(jitk.ParamsError, match="unknown kernel 'py_unsound'"):
        jitk.get("py_unsound", dtype="f32", target="cpu")


def test_a_registered_kernel_that_does_not_compile_says_why():
    jitk.register_kernel("py_broken", params={"dtype": ["f32"]}, signature="n; x:out[*n]", work="n",
                         cpu='#include "jitk_cpu.h"\nJITK_CPU_KERNEL { this is not C++; }\n')
    with pytest.raises(jitk.Error) as e:
        jitk.get("py_broken", dtype="f32", target="cpu")
    assert e.value.kind == "compile failed" and e.value.kernel == "py_broken"
    assert "error" in e.value.log and e.value.options


def test_the_first_example_of_docs_python_md_runs():
    import pathlib
    import re
    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"
    example = re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)[0]
    scope = {}
    exec(compile(example, str(doc), "exec"), scope)  # noqa: S102  (our own documentation)
    assert np.abs(scope["y"] - scope["ref"]).max() < 1e-5
