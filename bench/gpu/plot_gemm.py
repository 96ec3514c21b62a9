#!/usr/bin/env python3
"""jitk's GEMM TFLOP/s next to cuBLAS's from the same run, and block-sparse speed-ups over dense cuBLAS.

usage: plot_gemm.py GEMM_BENCH_JSONL OUT_PNG [DEVICE_NAME]
(the jsonl of `jitk_gpu_bench --json --only gemm,block_sparse`)"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
    rows = [r for r in rows if r["unit"] == "TFLOP/s" and r["baseline_name"].startswith("cuBLAS") and "tf32" not in r["bench"]]
    labels = [r["bench"].removeprefix("gemm_").removesuffix("_TFLOPs").replace("_", " ") for r in rows]
    sparse = [r for r in (json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")) if r["bench"].endswith("_speedup")]
    fig, axes = plt.subplots(2 if sparse else 1, 1, figsize=(11, 9.6 if sparse else 4.8), squeeze=False)
    ax = axes[0][0]
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["value"] for r in rows], width=0.4, label="jitk")
    ax.bar([x + 0.2 for x in xs], [r["baseline"] for r in rows], width=0.4, label="cuBLAS (same run)")
    for x, r in zip(xs, rows):
        ax.text(x - 0.2, r["value"], f"{r['ratio']:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s (median)")
    device = sys.argv[3] if len(sys.argv) > 3 else "GPU"
    ax.set_title(f"jitk gemm vs cuBLAS on {device} (numbers: jitk / cuBLAS)")
    ax.legend()
    if sparse:
        bx = axes[1][0]
        xs = range(len(sparse))
        bx.bar([x - 0.2 for x in xs], [r["value"] for r in sparse], width=0.4, label="jitk block-sparse / dense cuBLAS time")
        bx.bar([x + 0.2 for x in xs], [r["baseline"] for r in sparse], width=0.4, label="1 / density (ideal)", color="lightgray")
        for x, r in zip(xs, sparse):
            bx.text(x - 0.2, r["value"], f"{r['value']:.1f}x", ha="center", va="bottom", fontsize=7)
        bx.set_xticks(list(xs))
        bx.set_xticklabels([r["bench"].removeprefix("block_sparse_").removesuffix("_speedup").replace("_", " ") for r in sparse],
                           rotation=35, ha="right", fontsize=7)
        bx.set_ylabel("speed-up over dense (x)")
        bx.set_title("block-sparse matmul, 4096^3 bf16: speed-up over dense cuBLAS on the same shape")
        bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
