"""jitk kernels as PyTorch custom ops (torch.library), traceable by torch.compile, and helpers that swap
a module's forward for a jitk kernel (RMSNorm, SiLU-and-mul MLPs, attention), the way HuggingFace's
`kernels` package swaps layers.

    import torch, jitk.torch
    y = torch.ops.jitk.rms_norm(x, weight, 1e-6)       # or jitk.torch.rms_norm(x, weight, 1e-6)
    jitk.torch.kernelize(model)                         # RMSNorm / MLP modules now run jitk kernels

Each op has a fake (meta) implementation, so torch.compile traces through it without a graph break.
Importing this module needs torch (2.4 or later, for torch.library.custom_op).
"""
from __future__ import annotations

import math
import types
from typing import Optional

import torch

import jitk

__all__ = ["rms_norm", "fused_add_rms_norm", "silu_and_mul", "gelu_and_mul", "layer_norm", "softmax", "log_softmax",
           "rotary_embedding", "kv_cache_append", "attention_prefill", "attention_decode", "gemm", "interleave_gate_up", "attention",
           "hf_attention_forward", "register_hf_attention", "use_kernel", "kernelize"]

_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32", torch.float64: "f64"}


def _dtype(t: torch.Tensor) -> str:
    try:
        return _DTYPES[t.dtype]
    except KeyError:
        raise TypeError(f"jitk kernels take float16, bfloat16, float32 or float64 tensors, got {t.dtype}") from None


def _kernel(name: str, like: torch.Tensor, **params) -> jitk.Kernel:
    if like.is_cuda:
        return jitk.get(name, target="cuda", device=like.get_device(), **params)
    if like.is_cpu:
        return jitk.get(name, target="cpu", **params)
    raise ValueError(f"jitk: tensors on {like.device} are not supported (cpu or cuda)")


def _rows(x: torch.Tensor, hidden: int) -> torch.Tensor:
    return x.contiguous().view(-1, hidden)


# ---- row kernels ----------------------------------------------------------------------------------
@torch.library.custom_op("jitk::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    _kernel("rms_norm", x, dtype=_dtype(x), hidden=hidden)(_rows(x, hidden), weight.contiguous(), y.view(-1, hidden), eps=eps)
    return y


@rms_norm.register_fake
def _(x, weight, eps):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("jitk::fused_add_rms_norm", mutates_args=("residual",))
def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """residual += x; returns rms_norm(residual) * weight (residual must be contiguous: it is written)."""
    hidden = x.shape[-1]
    if not residual.is_contiguous():
        raise ValueError("fused_add_rms_norm: residual is written in place and must be contiguous")
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    _kernel("fused_add_rms_norm", x, dtype=_dtype(x), hidden=hidden)(
        _rows(x, hidden), residual.view(-1, hidden), weight.contiguous(), y.view(-1, hidden), eps=eps)
    return y


@fused_add_rms_norm.register_fake
def _(x, residual, weight, eps):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _gated(name: str, x: torch.Tensor, **params) -> torch.Tensor:
    if x.shape[-1] % 2:
        raise ValueError(f"{name}: the last dimension ({x.shape[-1]}) must be even: [gate, up] halves")
    hidden = x.shape[-1] // 2
    out = x.new_empty(*x.shape[:-1], hidden)
    _kernel(name, x, dtype=_dtype(x), hidden=hidden, **params)(_rows(x, 2 * hidden), out.view(-1, hidden))
    return out


def _half_last_fake(x, *_args, **_kwargs):  # the op's other arguments do not shape its result
    return x.new_empty(*x.shape[:-1], x.shape[-1] // 2)


def _like_fake(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _unary_op(name: str, run, fake, doc: str | None = None):
    """Registers jitk::<name>(x) -> Tensor, computed by run(name, x), with fake(x) as its meta implementation."""
    def op(x: torch.Tensor) -> torch.Tensor:
        return run(name, x)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    registered = torch.library.custom_op(f"jitk::{name}", mutates_args=())(op)
    registered.register_fake(fake)
    return registered


silu_and_mul = _unary_op("silu_and_mul", _gated, _half_last_fake, "silu(x[..., :h]) * x[..., h:] with h = x.shape[-1] // 2.")


@torch.library.custom_op("jitk::gelu_and_mul", mutates_args=())
def gelu_and_mul(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    return _gated("gelu_and_mul", x, approximate=approximate)


gelu_and_mul.register_fake(_half_last_fake)


@torch.library.custom_op("jitk::layer_norm", mutates_args=())
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    _kernel("layer_norm", x, dtype=_dtype(x), hidden=hidden)(
        _rows(x, hidden), weight.contiguous(), bias.contiguous(), y.view(-1, hidden), eps=eps)
    return y


@layer_norm.register_fake
def _(x, weight, bias, eps):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _softmax_like(name: str, x: torch.Tensor) -> torch.Tensor:
    hidden = x.shape[-1]
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    _kernel(name, x, dtype=_dtype(x), hidden=hidden)(_rows(x, hidden), y.view(-1, hidden))
    return y


softmax = _unary_op("softmax", _softmax_like, _like_fake, "softmax over the last dimension.")
log_softmax = _unary_op("log_softmax", _softmax_like, _like_fake)


# ---- attention and its caches ---------------------------------------------------------------------
@torch.library.custom_op("jitk::rotary_embedding", mutates_args=("q", "k"))
def rotary_embedding(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, rotary_dim: int, theta: float = 10000.0,
                     style: str = "neox") -> None:
    """Rotary embedding in place on q [tokens, heads, head_dim] and k [tokens, kv_heads, head_dim]."""
    head_dim = q.shape[-1]
    _kernel("rotary_embedding", q, dtype=_dtype(q), head_dim=head_dim, rotary_dim=rotary_dim, style=style)(
        positions, q, k, theta=theta)


@rotary_embedding.register_fake
def _(positions, q, k, rotary_dim, theta=10000.0, style="neox"):
    return None


@torch.library.custom_op("jitk::kv_cache_append", mutates_args=("k_cache", "v_cache"))
def kv_cache_append(k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> None:
    """Copies k, v [tokens, kv_heads, head_dim] into the paged caches [pages, page_size, kv_heads, head_dim] at slots."""
    _kernel("kv_cache_append", k, dtype=_dtype(k), head_dim=k.shape[-1], page_size=k_cache.shape[1])(
        k.contiguous(), v.contiguous(), slots, k_cache, v_cache)


@kv_cache_append.register_fake
def _(k, v, slots, k_cache, v_cache):
    return None


@torch.library.custom_op("jitk::attention_prefill", mutates_args=())
def attention_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                      cu_seqlens_k: torch.Tensor, max_seqlen_q: int, scale: float, causal: bool = False,
                      window: int = 0) -> torch.Tensor:
    """Flash attention over packed variable-length sequences (flash-attn's varlen layout):
    q [total_q, heads, d], k/v [total_k, kv_heads, d], cu_seqlens int32 [batch + 1]; returns o like q."""
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads % kv_heads:
        raise ValueError(f"attention_prefill: {heads} query heads are not a multiple of {kv_heads} kv heads")
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    _kernel("attention_prefill", q, dtype=_dtype(q), head_dim=q.shape[-1], causal=bool(causal), window=window,
            group=heads // kv_heads)(q.contiguous(), k.contiguous(), v.contiguous(), o, cu_seqlens_q, cu_seqlens_k,
                                      max_seqlen_q=max_seqlen_q, scale=scale)
    return o


@attention_prefill.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, scale, causal=False, window=0):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


@torch.library.custom_op("jitk::attention_decode", mutates_args=())
def attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                     context_lens: torch.Tensor, scale: float, q_len: int = 1) -> torch.Tensor:
    """Paged decode: q [batch * q_len, heads, d] over caches [pages, page_size, kv_heads, d]; returns o like q."""
    heads, kv_heads = q.shape[1], k_cache.shape[2]
    if heads % kv_heads:
        raise ValueError(f"attention_decode: {heads} query heads are not a multiple of {kv_heads} kv heads")
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    _kernel("attention_decode", q, dtype=_dtype(q), head_dim=q.shape[-1], page_size=k_cache.shape[1],
            group=heads // kv_heads, q_len=q_len)(q.contiguous(), k_cache, v_cache, block_table, context_lens, o, scale=scale)
    return o


@attention_decode.register_fake
def _(q, k_cache, v_cache, block_table, context_lens, scale, q_len=1):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


def interleave_gate_up(w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    """[k, h] gate and up weights -> the gated gemm's B, [k, 2 h] in groups of 16 columns, 8 gate then 8 up
    (docs/gemm.md); h a multiple of 8."""
    if w_gate.shape != w_up.shape or w_gate.dim() != 2 or w_gate.shape[1] % 8:
        raise ValueError(f"interleave_gate_up: gate and up weights of one shape [k, h], h a multiple of 8; got "
                         f"{tuple(w_gate.shape)} and {tuple(w_up.shape)}")
    k = w_gate.shape[0]
    return torch.stack((w_gate.reshape(k, -1, 8), w_up.reshape(k, -1, 8)), 2).reshape(k, -1)


def _gemm_columns(b: torch.Tensor, gate: str) -> int:
    return b.shape[1] // 2 if gate != "none" else b.shape[1]


@torch.library.custom_op("jitk::gemm", mutates_args=())
def gemm(a: torch.Tensor, b: torch.Tensor, gate: str = "none", residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """a @ b for 2-D a (m x k) and b (k x n), either contiguous or transposed views.
    gate = "silu" / "gelu" / "gelu_tanh": b holds gate and up weights interleaved (interleave_gate_up) and the
    result is act(a @ b_gate) * (a @ b_up), m x n/2, in the gemm's epilogue. residual (m x the result's
    columns): added in the epilogue (the chain step "add"), as Llama's output and down projections."""
    def layout(t):
        if t.is_contiguous():
            return t, "row"
        if t.t().is_contiguous():
            return t, "col"
        return t.contiguous(), "row"
    a, a_layout = layout(a)
    b, b_layout = layout(b)
    c = a.new_empty(a.shape[0], _gemm_columns(b, gate))
    params = {"dtype": _dtype(a), "a_layout": a_layout, "b_layout": b_layout}
    if gate != "none":
        params["gate"] = gate
    if residual is None:
        _kernel("gemm", a, **params)(a, b, c)
        return c
    if tuple(residual.shape) != tuple(c.shape) or residual.dtype != c.dtype or residual.device != c.device:
        raise ValueError(f"jitk::gemm: residual must be {tuple(c.shape)} {c.dtype} on {c.device} (the result's), got "
                         f"{tuple(residual.shape)} {residual.dtype} on {residual.device}")
    _kernel("gemm", a, epilogue="add", **params)(a, b, c, epilogue=[residual.contiguous()])
    return c


@gemm.register_fake
def _(a, b, gate="none", residual=None):
    return a.new_empty(a.shape[0], _gemm_columns(b, gate))


# ---- attention in torch's layout --------------------------------------------------------------------
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, scale: float | None = None,
              window: int = 0) -> torch.Tensor:
    """Like torch's scaled_dot_product_attention for q [batch, heads, s_q, d], k/v [batch, kv_heads, s_k, d]
    (no mask beyond causal / a left window): the batch is packed into jitk's varlen layout."""
    batch, heads, s_q, d = q.shape
    s_k = k.shape[2]
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    qp = q.transpose(1, 2).reshape(batch * s_q, heads, d)
    kp = k.transpose(1, 2).reshape(batch * s_k, k.shape[1], d)
    vp = v.transpose(1, 2).reshape(batch * s_k, v.shape[1], d)
    cu_q = torch.arange(0, (batch + 1) * s_q, s_q, dtype=torch.int32, device=q.device)
    cu_k = torch.arange(0, (batch + 1) * s_k, s_k, dtype=torch.int32, device=q.device)
    o = torch.ops.jitk.attention_prefill(qp, kp, vp, cu_q, cu_k, s_q, scale, causal, window)
    return o.view(batch, s_q, heads, d).transpose(1, 2)


def hf_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """An attention function in HuggingFace transformers' interface (AttentionInterface): query, key, value
    [batch, heads, seq, d]; returns (output [batch, seq, heads, d], None). Causal masking as the model's
    `is_causal`; an explicit padding mask is refused (pack sequences with attention_prefill instead)."""
    if dropout:
        raise ValueError("jitk attention has no dropout")
    if attention_mask is not None and not getattr(module, "is_causal", True):
        raise ValueError("jitk attention takes causal or no masks, not an explicit attention_mask")
    causal = bool(getattr(module, "is_causal", True)) and query.shape[2] > 1
    window = kwargs.get("sliding_window") or 0
    out = attention(query, key, value, causal=causal, scale=scaling, window=window)
    return out.transpose(1, 2).contiguous(), None


def register_hf_attention(name: str = "jitk") -> None:
    """Registers hf_attention_forward with transformers (AttentionInterface): then
    `model = AutoModel.from_pretrained(..., attn_implementation="jitk")`."""
    from transformers import AttentionInterface  # noqa: PLC0415  (transformers is optional)
    AttentionInterface.register(name, hf_attention_forward)


# ---- swapping layers --------------------------------------------------------------------------------
def _rms_norm_forward(self, x):
    eps = getattr(self, "variance_epsilon", None) or getattr(self, "eps", None) or 1e-6
    return torch.ops.jitk.rms_norm(x, self.weight, float(eps))


def _silu_mlp_forward(self, x):
    gate_up = torch.cat([self.gate_proj(x), self.up_proj(x)], dim=-1)
    return self.down_proj(torch.ops.jitk.silu_and_mul(gate_up))


def _silu_and_mul_forward(self, x):
    return torch.ops.jitk.silu_and_mul(x)


_FORWARDS = {"rms_norm": _rms_norm_forward, "silu_mlp": _silu_mlp_forward, "silu_and_mul": _silu_and_mul_forward}


def _kind_of(module: torch.nn.Module) -> str | None:
    name = type(module).__name__.lower()
    if "rmsnorm" in name and hasattr(module, "weight"):
        return "rms_norm"
    if name.endswith("siluandmul"):
        return "silu_and_mul"
    if all(hasattr(module, p) for p in ("gate_proj", "up_proj", "down_proj")):
        act = getattr(module, "act_fn", None)
        if act is None or type(act).__name__ in ("SiLU", "SiLUActivation"):
            return "silu_mlp"
    return None


def use_kernel(module: torch.nn.Module, kind: str | None = None) -> torch.nn.Module:
    """Replaces `module`'s forward with a jitk kernel: "rms_norm" (a module with .weight and .eps or
    .variance_epsilon), "silu_mlp" (gate_proj, up_proj, down_proj with SiLU, as Llama's MLP),
    "silu_and_mul" (a module whose forward is silu(x[..., :h]) * x[..., h:]); None: guessed from the
    module's class. Returns the module; its original forward stays at module._jitk_original_forward."""
    kind = kind or _kind_of(module)
    if kind not in _FORWARDS:
        raise ValueError(f"use_kernel: no jitk forward for {type(module).__name__} (kind {kind!r}); "
                         f"kinds: {', '.join(_FORWARDS)}")
    if not hasattr(module, "_jitk_original_forward"):
        module._jitk_original_forward = module.forward
    module.forward = types.MethodType(_FORWARDS[kind], module)
    return module


def kernelize(model: torch.nn.Module) -> list[str]:
    """Swaps every submodule jitk has a kernel for (use_kernel's kinds, guessed from each class); returns
    the names of the modules swapped."""
    swapped = []
    for name, module in model.named_modules():
        kind = _kind_of(module)
        if kind:
            use_kernel(module, kind)
            swapped.append(name)
    return swapped
