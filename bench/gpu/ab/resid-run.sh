#!/usr/bin/env bash
# resid's A/B (session 7): the gemm bench's o + residual / down beta = 1 cases and the gemm tests on
# the built-in texts and each candidate (ab.sh), then the layer's prefill (1 x 2048 and 8 x 2048,
# --prefill: no tuning, decode or cold start) on each text in a fresh cache, built-in first and last.
#   bash bench/gpu/ab/resid-run.sh DIR...   (from the repo root; logs under $OUT; carry .gpu-deps)
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
AB_TESTS=dirs AB_TEST_ARGS='[sm90_epilogue],[chains],[gate]' AB_ARGS='--filter _residual|_beta1' \
  bash bench/gpu/ab.sh gemm "$@"
echo "ab.sh exit: $?"
source .gpu-deps/unpack.sh > /dev/null
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
cmake --build build-gpu --target jitk_layer_bench test_gpu_kernels > /tmp/jitk-layer-build.log 2>&1 || { tail -30 /tmp/jitk-layer-build.log; exit 1; }
# the chain codegen (epilogue_load ahead of the steps) on every chained kernel, built-in texts
JITK_CACHE_DIR=$(mktemp -d) timeout 200 ./build-gpu/tests/test_gpu_kernels "[chains]" > "$out/chains.log" 2>&1
echo "test_gpu_kernels [chains] exit: $?"; tail -3 "$out/chains.log"
texts=("" "$@" "")
for n in "${!texts[@]}"; do
  d=${texts[$n]}
  JITK_KERNEL_DIR=$d JITK_CACHE_DIR=$(mktemp -d) timeout 120 ./build-gpu/bench/gpu/jitk_layer_bench --json --prefill > "$out/layer$n.jsonl" 2> "$out/layer$n.err"
  echo "layer ${d:-built-in} ($n) exit: $?"
done
python3 - "$out" "${texts[@]}" <<'PY'
import json, sys
out, texts = sys.argv[1], sys.argv[2:]
keys = ["layer_prefill_1x2048_ms", "layer_prefill_8x2048_ms"]
kernels = ["gemm qkv", "gemm o + residual", "gemm gate/up + silu", "gemm down + residual"]
rows = {}
for n, t in enumerate(texts):
    col = f"{t or 'built-in'} ({n})"
    for line in open(f"{out}/layer{n}.jsonl"):
        if not line.startswith("{"): continue
        r = json.loads(line)
        b = r.get("bench", "")
        if b in keys: rows.setdefault(b, {})[col] = r["value"]
        for size in ("1x2048", "8x2048"):
            if b.startswith(f"layer_prefill_{size}_kernel_") and r.get("kernel") in kernels:
                rows.setdefault(f"{size} {r['kernel']}", {})[col] = r["ms"]
cols = [f"{t or 'built-in'} ({n})" for n, t in enumerate(texts)]
print("| ms | " + " | ".join(cols) + " |")
print("|---|" + "---:|" * len(cols))
for k, v in rows.items():
    print(f"| {k} | " + " | ".join(f"{v[c]:.4f}" if c in v else "-" for c in cols) + " |")
PY
