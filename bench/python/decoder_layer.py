#!/usr/bin/env python3
"""A Llama-style decoder layer on jitk kernels (torch.ops.jitk.*) against the same layer in torch eager,
and torch.compile (of the torch layer, and of the jitk layer: the ops trace as custom ops), in one
process, on the same tensors: checks they agree, then times each (CUDA events, interleaved, medians).

    PYTHONPATH=build-gpu/python python bench/python/decoder_layer.py            # Llama-3-8B shapes, bf16
    PYTHONPATH=build/python python bench/python/decoder_layer.py --device cpu --tokens 64 --hidden 256 \\
        --heads 4 --kv-heads 2 --head-dim 64 --inter 512 --dtype float32

The C++ version is examples/decoder_layer.cpp (docs/decoder-layer.md).
"""
import argparse
import json
import math
import statistics
import time

import torch

import jitk.torch  # registers torch.ops.jitk

ops = torch.ops.jitk


def rope_ref(x, positions, theta):
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = positions[:, None].float() * inv[None, :]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    a, b = x[..., : d // 2].float(), x[..., d // 2:].float()
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1).to(x.dtype)


def layer_torch(x, w, a):
    t = x.shape[0]
    h = torch.nn.functional.rms_norm(x, (a.hidden,), w["in_norm"], 1e-6)
    q, k, v = (h @ w["qkv"]).split([a.heads * a.head_dim, a.kv_heads * a.head_dim, a.kv_heads * a.head_dim], -1)
    q = rope_ref(q.reshape(t, a.heads, a.head_dim), w["positions"], 500000.0)
    k = rope_ref(k.reshape(t, a.kv_heads, a.head_dim), w["positions"], 500000.0)
    v = v.reshape(t, a.kv_heads, a.head_dim)
    o = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], is_causal=True, enable_gqa=True)
    x = x + o[0].transpose(0, 1).reshape(t, -1) @ w["o"]
    h = torch.nn.functional.rms_norm(x, (a.hidden,), w["post_norm"], 1e-6)
    g, u = (h @ w["gate_up"]).chunk(2, -1)
    return x + (torch.nn.functional.silu(g) * u) @ w["down"]


def layer_jitk(x, w, a):
    t = x.shape[0]
    h = ops.rms_norm(x, w["in_norm"], 1e-6)
    qkv = ops.gemm(h, w["qkv"])
    q, k, v = qkv.split([a.heads * a.head_dim, a.kv_heads * a.head_dim, a.kv_heads * a.head_dim], -1)
    q = q.reshape(t, a.heads, a.head_dim).contiguous()
    k = k.reshape(t, a.kv_heads, a.head_dim).contiguous()
    v = v.reshape(t, a.kv_heads, a.head_dim).contiguous()
    ops.rotary_embedding(w["positions"], q, k, a.head_dim, 500000.0, "neox")
    o = ops.attention_prefill(q, k, v, w["cu"], w["cu"], t, 1.0 / math.sqrt(a.head_dim), True, 0)
    if w.get("gate_up_interleaved") is None:  # --unfused: the gemms plain, silu_and_mul and the adds apart
        attn = ops.gemm(o.view(t, -1), w["o"])
        residual = x.clone()
        h = ops.fused_add_rms_norm(attn, residual, w["post_norm"], 1e-6)  # residual = x + attn
        return residual + ops.gemm(ops.silu_and_mul(ops.gemm(h, w["gate_up"])), w["down"])
    # as examples/decoder_layer.cpp: the residual adds in the o and down gemms' epilogues, SiLU-and-mul in
    # the gate/up gemm's (its weight interleaved: 8 gate columns, then 8 up)
    x = ops.gemm(o.view(t, -1), w["o"], "none", x)
    h = ops.rms_norm(x, w["post_norm"], 1e-6)
    return ops.gemm(ops.gemm(h, w["gate_up_interleaved"], "silu"), w["down"], "none", x)


def timed(fn, device, iterations):
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            fn()
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) / iterations
    t0 = time.perf_counter()
    for _ in range(iterations):
        fn()
    return (time.perf_counter() - t0) * 1e3 / iterations


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--inter", type=int, default=14336)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--unfused", action="store_true",
                    help="jitk's MLP as gate/up gemm + silu_and_mul and the residual adds apart (not in the gemms' epilogues)")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out (eager only)")
    ap.add_argument("--json", help="write medians and samples here")
    a = ap.parse_args()
    dt, dev = getattr(torch, a.dtype), a.device
    g = torch.Generator(device="cpu").manual_seed(0)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dev, dt)

    w = {"in_norm": rand(a.hidden), "post_norm": rand(a.hidden),
         "qkv": rand(a.hidden, (a.heads + 2 * a.kv_heads) * a.head_dim, scale=a.hidden ** -0.5),
         "o": rand(a.heads * a.head_dim, a.hidden, scale=(a.heads * a.head_dim) ** -0.5),
         "gate_up": rand(a.hidden, 2 * a.inter, scale=a.hidden ** -0.5),
         "down": rand(a.inter, a.hidden, scale=a.inter ** -0.5),
         "positions": torch.arange(a.tokens, device=dev),
         "cu": torch.tensor([0, a.tokens], dtype=torch.int32, device=dev)}
    gate, up = w["gate_up"].chunk(2, -1)
    w["gate_up_interleaved"] = None if a.unfused else jitk.torch.interleave_gate_up(gate, up).contiguous()
    x = rand(a.tokens, a.hidden)
    variants = {"torch eager": lambda: layer_torch(x, w, a), "jitk": lambda: layer_jitk(x, w, a)}
    first_call = {}
    if not a.no_compile:
        # torch.compile of the torch layer (Inductor: Triton + cuBLAS), and of the jitk layer (the jitk ops
        # traced as custom ops with fullgraph=True: no graph break; Inductor fuses the glue around them).
        for name, fn in (("torch.compile", layer_torch), ("jitk + torch.compile", layer_jitk)):
            compiled = torch.compile(fn, fullgraph=True)
            t0 = time.perf_counter()
            with torch.no_grad():
                compiled(x, w, a)
            if dev == "cuda":
                torch.cuda.synchronize()
            first_call[name] = time.perf_counter() - t0
            variants[name] = (lambda c: lambda: c(x, w, a))(compiled)
    with torch.no_grad():
        want = layer_torch(x, w, a).float()
        errors = {name: ((fn().float() - want).norm() / want.norm()).item() for name, fn in variants.items()}
        samples = {name: [] for name in variants}
        for _ in range(a.repeats):  # interleaved, so clock drift hits every variant alike
            for name, fn in variants.items():
                samples[name].append(timed(fn, dev, a.iterations))
    med = {name: statistics.median(v) for name, v in samples.items()}
    print(f"decoder layer {a.tokens} tokens, hidden {a.hidden}, {a.heads}/{a.kv_heads} heads of {a.head_dim}, "
          f"MLP {a.inter}, {a.dtype} on {dev}; median of {a.repeats} x {a.iterations} calls, one process")
    base = med.get("torch.compile", med["torch eager"])
    for name in variants:
        extra = f", first call {first_call[name]:.1f} s" if name in first_call else ""
        print(f"  {name:22s} {med[name]:8.3f} ms  ({base / med[name]:.2f}x of "
              f"{'torch.compile' if 'torch.compile' in med else 'torch eager'}){extra}; "
              f"relative difference to torch eager {errors[name]:.2e}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "median_ms": med, "samples_ms": samples, "first_call_s": first_call,
                       "relative_difference": errors}, f, indent=1)

if __name__ == "__main__":
    main()
