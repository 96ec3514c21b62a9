#!/usr/bin/env python3
"""Plots GB/s against row length for jitk's row kernels, PyTorch's ops and a D2D copy, from the
GPU bench's and the PyTorch baseline's JSON lines (bench/gpu/run.sh writes both):
    python3 bench/gpu/plot.py gpu_bench.jsonl torch.jsonl out.png
"""
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [  # (title, jitk bench prefix, torch bench prefix)
    ("rms_norm", "rms_norm", "torch_sweep_rms_norm"),
    ("softmax", "softmax", "torch_sweep_softmax"),
    ("layer_norm", "layer_norm", "torch_sweep_layer_norm"),
    ("residual add > rms_norm > scale (one kernel)", "chain_add_rms_norm_scale", "torch_sweep_chain_add_rms_norm_scale"),
]


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.startswith("{") and '"bench"' in line]


def main():
    jitk, torch_rows, out = lines(sys.argv[1]), lines(sys.argv[2]), sys.argv[3]
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 4.2), sharey=True)
    for ax, (title, prefix, torch_prefix) in zip(axes, PANELS):
        series, copy = {}, {}
        for r in jitk:
            m = re.fullmatch(re.escape(prefix) + r"_bf16_(\d+)_(.+)_GBps", r["bench"])
            if m:
                h, impl = int(m.group(1)), m.group(2)
                series.setdefault("jitk " + impl, {})[h] = r["value"]
                copy[h] = r["baseline"]
        for r in torch_rows:
            m = re.fullmatch(re.escape(torch_prefix) + r"_bf16_(\d+)", r["bench"])
            if m:
                series.setdefault("PyTorch eager", {})[int(m.group(1))] = r["value"]
        for name, points in sorted(series.items()):
            xs = sorted(points)
            ax.plot(xs, [points[x] for x in xs], marker="o", label=name)
        if copy:
            xs = sorted(copy)
            ax.plot(xs, [copy[x] for x in xs], linestyle="--", color="black", label="D2D copy")
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("row length (hidden), bf16, 128M elements")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("GB/s (minimal bytes)")
    fig.suptitle("jitk vs PyTorch vs copy on " + (sys.argv[4] if len(sys.argv) > 4 else "the GPU"))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
