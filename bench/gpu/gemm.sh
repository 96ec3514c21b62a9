#!/usr/bin/env bash
# The GEMM check on the device machine, run in one call from the repo root:
#   carry [".gpu-deps"], command: bash bench/gpu/gemm.sh
# Builds build-gpu (Release), runs the gpu-labelled gemm tests, the GEMM benches against cuBLAS
# (jitk_gpu_bench --only gemm,block_sparse) and the register/stack use of the kernels they compiled. Logs go to
# $OUT (or ./gpu-out), at most 8 files: info.txt, tests.log, gemm_bench.jsonl, gemm_bench.err,
# regs.txt, gemm.png (and build.log when the build fails). Exits non-zero when a test or a GEMM check failed.
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
source .gpu-deps/unpack.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
log=/tmp/jitk-gpu-build.log
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu; } > "$log" 2>&1 ||
  { cp "$log" "$out/build.log"; grep -E "error|Error" -A3 "$log" | head -60; exit 1; }
grep -q "JITK_BENCH_CUBLAS" build-gpu/build.ninja || echo "note: built without cuBLAS: the GEMM benches have no baseline"
export JITK_CACHE_DIR=$(mktemp -d /tmp/jitk-gemm-XXXXXX)
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; ./build-gpu/jitk info; } 2>&1 | tee "$out/info.txt"

(cd build-gpu && ctest -L gpu -R "gemm|block_sparse" --output-on-failure --timeout 120) > "$out/tests.log" 2>&1
tests_rc=$?
echo "gemm gpu tests exit: $tests_rc"; tail -5 "$out/tests.log"

timeout 300 ./build-gpu/bench/gpu/jitk_gpu_bench --json --only gemm,block_sparse > "$out/gemm_bench.jsonl" 2> "$out/gemm_bench.err"
bench_rc=$?
echo "gemm bench exit: $bench_rc"
grep -E "FAILED|failed|note" "$out/gemm_bench.err"

# the kernels the benches compiled into this cache (the tuning child's cache is gone by now)
bash bench/gpu/regs.sh "$JITK_CACHE_DIR" ./build-gpu/jitk > "$out/regs.txt" 2>&1
echo "--- registers, stack, shared memory of the gemm kernels"
grep -E "^(gemm|block_sparse)" "$out/regs.txt"

echo "--- the checks (rel. L2 error against float64 sums and against the baseline)"
grep -E "^(gemm (check|tuning)|block_sparse check)" "$out/gemm_bench.err"
echo "--- jitk vs its baseline (ratio = jitk / baseline)"
python3 - "$out/gemm_bench.jsonl" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
print(f"{'bench':<58} {'value':>10} {'unit':<8} {'baseline':>10} {'ratio':>7}  baseline is")
for r in rows:
    print(f"{r['bench']:<58} {r['value']:>10.2f} {r['unit']:<8} {r['baseline']:>10.2f} {r['ratio']:>7.3f}  {r['baseline_name']}")
EOF
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
python3 bench/gpu/plot_gemm.py "$out/gemm_bench.jsonl" "$out/gemm.png" "$gpu_name" 2>> "$out/gemm_bench.err" || echo "plot failed"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
