#!/usr/bin/env python3
"""PyTorch's ops on the data the jitk GPU bench uses (bf16, 16384 x 8192), timed the same way
(CUDA events, median), with a device-to-device copy of the same bytes in the same run.
One JSON object per line: bench, value (GB/s), baseline (copy GB/s), ratio. Run on the device:
    python3 bench/gpu/torch_baseline.py          (everything)
    python3 bench/gpu/torch_baseline.py decode   (paged decode attention alone)
    python3 bench/gpu/torch_baseline.py --attention        (SDPA backends on the prefill shapes)
    python3 bench/gpu/torch_baseline.py --layer [DUMP]     (the Llama-3-8B layer; DUMP: jitk's check)
"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F

ROWS, HIDDEN = 16384, 8192
REPS = 20


def device_ms(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    dev = torch.device("cuda")
    x = torch.ones(ROWS * HIDDEN * 2, dtype=torch.bfloat16, device=dev)
    y = torch.empty_like(x)
    w = torch.ones(HIDDEN, dtype=torch.bfloat16, device=dev)
    b = torch.zeros(HIDDEN, dtype=torch.bfloat16, device=dev)
    elems = ROWS * HIDDEN
    x2d = x[:elems].view(ROWS, HIDDEN)
    gated = x[:elems].view(ROWS // 2, 2 * HIDDEN)
    copy_ms = device_ms(lambda: y[:elems].copy_(x[:elems]))
    copy = 2.0 * elems * 2 / copy_ms / 1e6

    def report(name, bytes_moved, fn):
        ms = device_ms(fn)
        gbs = bytes_moved / ms / 1e6
        print(json.dumps({"bench": "torch_" + name, "value": round(gbs, 1), "unit": "GB/s", "baseline": round(copy, 1),
                          "baseline_name": "D2D copy, same bytes (torch)", "ratio": round(gbs / copy, 3),
                          "torch": torch.__version__}), flush=True)

    row_bytes = 2.0 * elems * 2
    report("softmax_bf16_8192", row_bytes, lambda: torch.softmax(x2d, dim=-1))
    report("log_softmax_bf16_8192", row_bytes, lambda: torch.log_softmax(x2d, dim=-1))
    if hasattr(F, "rms_norm"):
        report("rms_norm_bf16_8192", row_bytes, lambda: F.rms_norm(x2d, (HIDDEN,), w, 1e-6))
    report("layer_norm_bf16_8192", row_bytes, lambda: F.layer_norm(x2d, (HIDDEN,), w, b, 1e-5))
    # gated activations: the eager chain a model runs (silu(x1) * x2), bytes of the fused op
    gate, up = gated[:, :HIDDEN], gated[:, HIDDEN:]
    report("silu_and_mul_bf16_8192", 1.5 * elems * 2, lambda: F.silu(gate) * up)
    report("gelu_and_mul_bf16_8192", 1.5 * elems * 2, lambda: F.gelu(gate) * up)
    report("gelu_tanh_and_mul_bf16_8192", 1.5 * elems * 2, lambda: F.gelu(gate, approximate="tanh") * up)
    # residual add then rms_norm, as two eager ops; bytes of the fused op (x, residual in; sum, y out)
    half = elems // 2
    xa = x[:half].view(ROWS // 2, HIDDEN)
    res = x[elems:elems + half].view(ROWS // 2, HIDDEN)
    if hasattr(F, "rms_norm"):
        def add_norm():
            s = xa + res
            return F.rms_norm(s, (HIDDEN,), w, 1e-6)
        report("fused_add_rms_norm_bf16_8192", 4.0 * half * 2, add_norm)
    # the chain residual add -> rms_norm -> scale, eager (the bytes of the fused op)
    if hasattr(F, "rms_norm"):
        def add_norm_scale():
            s = xa + res
            return F.rms_norm(s, (HIDDEN,), w, 1e-6) * 0.5
        report("chain_add_rms_norm_scale_bf16_8192", 4.0 * half * 2, add_norm_scale)
    # bias -> silu_and_mul -> scale -> + residual, eager
    bias = torch.ones(2 * HIDDEN, dtype=torch.bfloat16, device=dev)
    res_half = x[elems:elems + elems // 2].view(ROWS // 2, HIDDEN)
    def bias_silu_scale_add():
        h = gated + bias
        return (F.silu(h[:, :HIDDEN]) * h[:, HIDDEN:]) * 0.5 + res_half
    report("chain_bias_silu_and_mul_scale_add_bf16_8192", 2.0 * elems * 2, bias_silu_scale_add)
    report("chain_layer_norm_gelu_mul_vec_bf16_8192", row_bytes, lambda: F.gelu(F.layer_norm(x2d, (HIDDEN,), w, b, 1e-5)) * w)
    # the same ops across row lengths (same elements in all), for the plot against jitk's sweep
    for h in (1024, 2048, 4096, 8192, 16384):
        rows = elems // h
        xh = x[:elems].view(rows, h)
        wh = torch.ones(h, dtype=torch.bfloat16, device=dev)
        bh = torch.zeros(h, dtype=torch.bfloat16, device=dev)
        report(f"sweep_softmax_bf16_{h}", row_bytes, lambda: torch.softmax(xh, dim=-1))
        report(f"sweep_layer_norm_bf16_{h}", row_bytes, lambda: F.layer_norm(xh, (h,), wh, bh, 1e-5))
        if hasattr(F, "rms_norm"):
            report(f"sweep_rms_norm_bf16_{h}", row_bytes, lambda: F.rms_norm(xh, (h,), wh, 1e-6))
            xa_h = x[:half].view(rows // 2, h)
            res_h = x[elems:elems + half].view(rows // 2, h)
            report(f"sweep_chain_add_rms_norm_scale_bf16_{h}", 4.0 * half * 2,
                   lambda: F.rms_norm(xa_h + res_h, (h,), wh, 1e-6) * 0.5)
    # AdamW, fused (one kernel for the step), f32 params, grads and moments: 7 x 4 bytes an element
    n = elems // 2
    param = torch.ones(n, dtype=torch.float32, device=dev, requires_grad=True)
    param.grad = torch.ones(n, dtype=torch.float32, device=dev)
    opt = torch.optim.AdamW([param], lr=1e-3, fused=True)
    opt.step()  # creates the moments
    report("adamw_fused_f32_grads", n * 7.0 * 4, opt.step)
    # torch.compile's fused version, where Triton is there (compile time is not measured)
    try:
        compiled = torch.compile(lambda a, r: F.rms_norm(a + r, (HIDDEN,), w, 1e-6))
        compiled(xa, res)
        # (it keeps the sum to itself: x and residual in, y out, three arrays where the others move four)
        report("compiled_add_rms_norm_no_sum_out_bf16_8192", 3.0 * half * 2, lambda: compiled(xa, res))
        softmax_c = torch.compile(lambda a: torch.softmax(a, dim=-1))
        softmax_c(x2d)
        report("compiled_softmax_bf16_8192", row_bytes, lambda: softmax_c(x2d))
    except Exception as e:  # noqa: BLE001 - a missing compiler is a note, not a failure
        print(json.dumps({"note": "torch.compile unavailable: " + str(e)[:200]}), flush=True)


def attention():
    """torch SDPA under each backend on the shapes jitk_gpu_bench's prefill section runs (16k tokens a
    batch, heads = 2048 / head_dim; Llama-3-8B's 32 / 8 heads with enable_gqa), bf16 and the f16 rows, TFLOP/s."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dev = torch.device("cuda")
    tokens = 16384
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    cases = [(d, s, 2048 // d, 2048 // d, c) for d in (64, 128, 256) for s in (2048, 8192) for c in (False, True)]
    cases += [(128, 16384, 16, 16, False), (128, 16384, 16, 16, True), (128, 4096, 32, 8, True)]
    cases = [(torch.bfloat16, "bf16") + c for c in cases]
    # f16 on the shapes jitk's f16 rows run (head 128 at 2k-16k tokens and the GQA shape; heads 64 and 256 at 8k)
    cases += [(torch.float16, "f16", 128, s, 16, 16, c) for s in (2048, 8192, 16384) for c in (False, True)]
    cases += [(torch.float16, "f16", 128, 4096, 32, 8, True)]
    cases += [(torch.float16, "f16", d, 8192, 2048 // d, 2048 // d, c) for d in (64, 256) for c in (False, True)]
    for dtype, type_name, d, s, heads, kv_heads, causal in cases:
        batch = tokens // s
        q = torch.empty(batch, heads, s, d, dtype=dtype, device=dev).uniform_(-1.5, 1.5)
        k = torch.empty(batch, kv_heads, s, d, dtype=dtype, device=dev).uniform_(-1.5, 1.5)
        v = torch.empty_like(k).uniform_(-1.5, 1.5)
        flops = 4.0 * batch * heads * s * s * d / (2 if causal else 1)
        name = f"prefill_{type_name}_d{d}_s{s}_h{heads}_kv{kv_heads}_{'causal' if causal else 'full'}"
        for label, backend in backends.items():
            try:
                with sdpa_kernel(backend):
                    fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=heads != kv_heads)
                    ms = device_ms(fn)
                print(json.dumps({"bench": "torch_" + label + "_" + name, "value": round(flops / ms / 1e9, 1), "unit": "TFLOP/s",
                                  "torch": torch.__version__}), flush=True)
            except Exception as e:  # noqa: BLE001 - a backend that does not take the shape is a note
                print(json.dumps({"bench": "torch_" + label + "_" + name, "note": str(e)[:160]}), flush=True)
        del q, k, v


def decode():
    """Paged decode as a model without a paged kernel runs it: K and V gathered from the cache
    through the block table, repeated for each kv head's group, then SDPA. The shape of the jitk
    bench's decode section: batch 64 x context 4096, 32 q heads / 8 kv heads of 128, bf16, pages
    of 16 shuffled over the pool, one new token. GB/s of the cache's K and V bytes, vs a copy."""
    dev = torch.device("cuda")
    batch, context, heads, kv_heads, head_dim, page = 64, 4096, 32, 8, 128, 16
    pages = batch * context // page
    k_cache = torch.randn(pages, page, kv_heads, head_dim, dtype=torch.bfloat16, device=dev)
    v_cache = torch.randn_like(k_cache)
    table = torch.randperm(pages, device=dev, dtype=torch.int64).view(batch, context // page)
    q = torch.randn(batch, heads, 1, head_dim, dtype=torch.bfloat16, device=dev)
    group = heads // kv_heads

    def run():
        k = k_cache[table].view(batch, context, kv_heads, head_dim).transpose(1, 2).repeat_interleave(group, dim=1)
        v = v_cache[table].view(batch, context, kv_heads, head_dim).transpose(1, 2).repeat_interleave(group, dim=1)
        return F.scaled_dot_product_attention(q, k, v)

    kv_bytes = 2.0 * k_cache.numel() * 2
    dst = torch.empty_like(k_cache)
    copy_ms = device_ms(lambda: dst.copy_(k_cache))
    copy = 2.0 * k_cache.numel() * 2 / copy_ms / 1e6
    ms = device_ms(run)
    gbs = kv_bytes / ms / 1e6
    print(json.dumps({"bench": "torch_decode_gather_repeat_sdpa_bf16_b64_ctx4096", "value": round(gbs, 1), "unit": "GB/s",
                      "ms": round(ms, 3), "baseline": round(copy, 1), "baseline_name": "D2D copy (read + write) (torch)",
                      "ratio": round(gbs / copy, 3), "torch": torch.__version__}), flush=True)
    # SDPA alone on K and V already contiguous a sequence (no paging, no gather): what a model with
    # a dense cache pays, GQA inside SDPA where this torch has it
    try:
        k = k_cache[table].view(batch, context, kv_heads, head_dim).transpose(1, 2).contiguous()
        v = v_cache[table].view(batch, context, kv_heads, head_dim).transpose(1, 2).contiguous()
        ms = device_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
        gbs = kv_bytes / ms / 1e6
        print(json.dumps({"bench": "torch_decode_dense_sdpa_gqa_bf16_b64_ctx4096", "value": round(gbs, 1), "unit": "GB/s",
                          "ms": round(ms, 3), "baseline": round(copy, 1), "baseline_name": "D2D copy (read + write) (torch)",
                          "ratio": round(gbs / copy, 3), "torch": torch.__version__}), flush=True)
    except Exception as e:  # noqa: BLE001 - an SDPA without enable_gqa is a note, not a failure
        print(json.dumps({"note": "dense SDPA with enable_gqa unavailable: " + str(e)[:200]}), flush=True)


def layer(dump=None):
    """Llama-3-8B's decoder layer (hidden 4096, 32 / 8 heads of 128, MLP 14336, bf16) in PyTorch, the
    same layer jitk_layer_bench runs: eager and torch.compile, prefill 1 x 2048 and 8 x 2048, and a
    decode step of batch 64 over a static KV cache of context 4096 (compiled plain and with CUDA
    graphs, mode reduce-overhead). Each first call is timed (torch.compile's cold start). With
    `dump` (a directory jitk_layer_bench --dump wrote): the 1 x 2048 prefill on jitk's weights and
    input in float32, against jitk's output (relative errors)."""
    import time
    dev = torch.device("cuda")
    hidden, heads, kv_heads, d, mlp, theta, eps = 4096, 32, 8, 128, 14336, 500000.0, 1e-5
    qw, kvw = heads * d, kv_heads * d

    def weights(dtype=torch.bfloat16):
        g = torch.Generator(device=dev).manual_seed(0)
        u = lambda n, lo, hi: torch.empty(n, device=dev, dtype=torch.float32).uniform_(lo, hi, generator=g).to(dtype)
        s_in, s_q, s_mlp = hidden ** -0.5, qw ** -0.5, mlp ** -0.5
        return dict(norm1=u(hidden, 0.5, 1.5), wqkv=u(hidden * (qw + 2 * kvw), -s_in, s_in).view(hidden, qw + 2 * kvw),
                    wo=u(qw * hidden, -s_q, s_q).view(qw, hidden), norm2=u(hidden, 0.5, 1.5),
                    wgu=u(hidden * 2 * mlp, -s_in, s_in).view(hidden, 2 * mlp), wd=u(mlp * hidden, -s_mlp, s_mlp).view(mlp, hidden))

    def rope_table(n, dtype):
        inv = 1.0 / theta ** (torch.arange(0, d, 2, device=dev, dtype=torch.float64) / d)
        ang = torch.arange(n, device=dev, dtype=torch.float64)[:, None] * inv[None, :]
        return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)

    def rope(t, cos, sin):  # NeoX: halves rotate; t [..., tokens, heads, d], cos/sin [tokens, d/2]
        a, b = t[..., : d // 2], t[..., d // 2:]
        c, s_ = cos[:, None, :], sin[:, None, :]
        return torch.cat((a * c - b * s_, b * c + a * s_), dim=-1)

    def rms(x, w):
        return F.rms_norm(x, (hidden,), w, eps)

    def mlp_block(y, w):
        gu = rms(y, w["norm2"]) @ w["wgu"]
        return y + (F.silu(gu[..., :mlp]) * gu[..., mlp:]) @ w["wd"]

    def prefill(x, w, cos, sin, batch, seqlen):  # x [batch * seqlen, hidden]
        qkv = rms(x, w["norm1"]) @ w["wqkv"]
        q = rope(qkv[:, :qw].view(batch, seqlen, heads, d), cos, sin)
        k = rope(qkv[:, qw:qw + kvw].view(batch, seqlen, kv_heads, d), cos, sin)
        v = qkv[:, qw + kvw:].view(batch, seqlen, kv_heads, d)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True)
        y = x + o.transpose(1, 2).reshape(batch * seqlen, qw) @ w["wo"]
        return mlp_block(y, w)

    def decode(x, w, cos, sin, k_cache, v_cache, pos):  # x [batch, hidden], caches [batch, kv_heads, ctx + 1, d]
        batch = x.shape[0]
        qkv = rms(x, w["norm1"]) @ w["wqkv"]
        q = rope(qkv[:, :qw].view(batch, 1, heads, d), cos[pos:pos + 1], sin[pos:pos + 1])
        k = rope(qkv[:, qw:qw + kvw].view(batch, 1, kv_heads, d), cos[pos:pos + 1], sin[pos:pos + 1])
        v = qkv[:, qw + kvw:].view(batch, 1, kv_heads, d)
        k_cache[:, :, pos] = k[:, 0]
        v_cache[:, :, pos] = v[:, 0]
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k_cache, v_cache, enable_gqa=True)
        y = x + o.reshape(batch, qw) @ w["wo"]
        return mlp_block(y, w)

    def emit(bench, ms, **extra):
        print(json.dumps({"bench": bench, "value": round(ms, 4), "unit": "ms", "torch": torch.__version__, **extra}), flush=True)

    w = weights()
    cos, sin = rope_table(4097, torch.bfloat16)
    for batch in (1, 8):
        seqlen = 2048
        x = torch.empty(batch * seqlen, hidden, device=dev, dtype=torch.bfloat16).uniform_(-2, 2)
        fn = lambda: prefill(x, w, cos[:seqlen], sin[:seqlen], batch, seqlen)
        emit(f"torch_eager_layer_prefill_{batch}x{seqlen}_ms", device_ms(fn))
        torch._dynamo.reset()
        compiled = torch.compile(prefill)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        compiled(x, w, cos[:seqlen], sin[:seqlen], batch, seqlen)
        torch.cuda.synchronize()
        emit(f"torch_compile_layer_prefill_{batch}x{seqlen}_first_call_ms", 1e3 * (time.perf_counter() - t0))
        emit(f"torch_compile_layer_prefill_{batch}x{seqlen}_ms", device_ms(lambda: compiled(x, w, cos[:seqlen], sin[:seqlen], batch, seqlen)))
        del x
    # decode: batch 64, context 4096, static cache (dense: a model without a paged kernel)
    batch, ctx = 64, 4096
    k_cache = torch.empty(batch, kv_heads, ctx + 1, d, device=dev, dtype=torch.bfloat16).uniform_(-1, 1)
    v_cache = torch.empty_like(k_cache).uniform_(-1, 1)
    x = torch.empty(batch, hidden, device=dev, dtype=torch.bfloat16).uniform_(-2, 2)
    emit("torch_eager_layer_decode_b64_ctx4096_ms", device_ms(lambda: decode(x, w, cos, sin, k_cache, v_cache, ctx)))
    for mode in ("default", "reduce-overhead"):
        torch._dynamo.reset()
        compiled = torch.compile(decode, mode=mode)
        t0 = time.perf_counter()
        compiled(x, w, cos, sin, k_cache, v_cache, ctx)
        torch.cuda.synchronize()
        emit(f"torch_compile_{mode}_layer_decode_b64_ctx4096_first_call_ms", 1e3 * (time.perf_counter() - t0))
        emit(f"torch_compile_{mode}_layer_decode_b64_ctx4096_ms", device_ms(lambda: compiled(x, w, cos, sin, k_cache, v_cache, ctx)))
    del k_cache, v_cache
    if dump:
        import numpy as np
        load = lambda name, shape: torch.from_numpy(np.fromfile(f"{dump}/{name}.bf16", dtype=np.uint16).astype(np.int16)).view(
            torch.bfloat16).to(dev).float().view(*shape)
        wj = dict(norm1=load("norm1", (hidden,)), wqkv=load("wqkv", (hidden, qw + 2 * kvw)), wo=load("wo", (qw, hidden)),
                  norm2=load("norm2", (hidden,)), wgu=load("wgu", (hidden, 2 * mlp)), wd=load("wd", (mlp, hidden)))
        x = load("x", (2048, hidden))
        got = load("y", (2048, hidden))
        c32, s32 = rope_table(2048, torch.float32)
        want = prefill(x, wj, c32, s32, 1, 2048)
        err = (got - want).abs()
        print(json.dumps({"bench": "layer_prefill_1x2048_jitk_vs_torch_fp32", "rel_l2": float(err.norm() / want.norm()),
                          "max_abs_err_over_max_abs": float(err.max() / want.abs().max()),
                          "max_rel_err_where_abs_over_0.1": float((err / want.abs().clamp_min(0.1)).max())}), flush=True)


if __name__ == "__main__":
    if "--attention" in sys.argv:
        attention()
    elif "--layer" in sys.argv:
        i = sys.argv.index("--layer")
        layer(sys.argv[i + 1] if i + 1 < len(sys.argv) else None)
    elif sys.argv[1:] == ["decode"]:
        decode()
    else:
        main()
        decode()
