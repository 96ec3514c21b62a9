#!/usr/bin/env python3
"""Bar chart of jitk's GEMM TFLOP/s next to cuBLAS's from the same run.

usage: plot_gemm.py GEMM_BENCH_JSONL OUT_PNG [DEVICE_NAME]
(the jsonl of `jitk_gpu_bench --json --only gemm`; rows whose baseline is cuBLAS)"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
    rows = [r for r in rows if r["unit"] == "TFLOP/s" and r["baseline_name"].startswith("cuBLAS") and "tf32" not in r["bench"]]
    labels = [r["bench"].removeprefix("gemm_").removesuffix("_TFLOPs").replace("_", " ") for r in rows]
    fig, ax = plt.subplots(figsize=(11, 4.8))
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
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
