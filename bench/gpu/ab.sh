#!/usr/bin/env bash
# A/B of kernel texts on the device machine, in one call from the repo root:
#   carry [".gpu-deps"], command: bash bench/gpu/ab.sh SECTIONS [DIR ...]
# Builds build-gpu's GEMM test and bench (Release), runs the gpu GEMM tests on the built-in texts,
# then jitk_gpu_bench --only SECTIONS (e.g. gemm,block_sparse) on the built-in texts and again with
# JITK_KERNEL_DIR=DIR for each DIR (a folder holding changed copies of some kernel_sources files;
# the others stay built-in), each in a fresh cache. Logs go to $OUT (or ./gpu-out): tests.log, abN.jsonl
# and abN.err (N = 1 for the built-in texts, 2.. for the DIRs) and ab.txt, a table of every bench's
# value, baseline and ratio per text. AB_ARGS adds bench arguments (e.g. AB_ARGS="--filter f32"; split
# at spaces); AB_TESTS=0 skips the tests (and their build) when only the DIRs' texts changed: the bench
# still checks every result against float64 sums and cuBLAS before timing it. AB_TEST_BIN picks the
# GPU test binary (default test_gpu_gemm; e.g. test_gpu_kernels), AB_TEST_ARGS its Catch2 test spec
# (e.g. "[attention_decode]"); the tests then run on the built-in texts and, at the same time, on each
# DIR's (tests.log, testsN.log), before any bench. Exits non-zero when the tests or a bench run failed (a failed check, a
# timeout). Example, decode texts:
#   AB_TEST_BIN=test_gpu_kernels AB_TEST_ARGS="[attention_decode]" bash bench/gpu/ab.sh decode ab/x ab/y
# AB_TORCH=1 runs torch SDPA's cuDNN and flash backends on the prefill shapes first and shows them,
# with jitk's ratio to cuDNN, beside each prefill row.
# A DIR may hold ab.env: VAR=value lines (no spaces; # comments) set for that DIR's tests and bench
# alone, for candidates that are a host switch rather than a text (e.g. JITK_FA_TMA=1: attention
# prefill's copy-engine text ranked first).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
sections=${1:?sections, e.g. gemm,block_sparse}
shift
source .gpu-deps/unpack.sh > /dev/null
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
log=/tmp/jitk-gpu-build.log
tests=${AB_TESTS:-1}
test_bin=${AB_TEST_BIN:-test_gpu_gemm}
read -ra bench_args <<< "${AB_ARGS:-}"
# AB_TEST_ARGS (or AB_TEST_FILTER): the test binary's Catch2 spec
read -ra test_args <<< "${AB_TEST_ARGS:-${AB_TEST_FILTER:-}}"
targets="jitk_gpu_bench"
[ "$tests" != 0 ] && targets="$test_bin $targets"
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DJITK_BUILD_TESTS=ON -DJITK_BUILD_BENCH=ON &&
  cmake --build build-gpu --target $targets; } > "$log" 2>&1 ||
  { cp "$log" "$out/build.log"; grep -E "error|Error" -A3 "$log" | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv
status=0
# DIR's ab.env as env(1) arguments (none for the built-in texts or a DIR without one)
dir_env() { [ -n "$1" ] && [ -f "$1/ab.env" ] && grep -Ev '^[[:space:]]*(#|$)' "$1/ab.env"; true; }
if [ "$tests" != 0 ]; then
  # the built-in texts' run, then (AB_TEST_BIN set) each DIR's, all at once (each its own cache; the
  # timings come after)
  dirs=("")
  [ -n "${AB_TEST_BIN:-}" ] || [ "$tests" = dirs ] && dirs+=("$@")
  pids=()
  for n in "${!dirs[@]}"; do
    log_n=$out/tests$([ "$n" = 0 ] || echo "$((n + 1))").log
    env $(dir_env "${dirs[$n]}") JITK_KERNEL_DIR=${dirs[$n]} JITK_CACHE_DIR=$(mktemp -d) timeout 300 "build-gpu/tests/$test_bin" ${test_args[@]+"${test_args[@]}"} > "$log_n" 2>&1 &
    pids+=($!)
  done
  for n in "${!dirs[@]}"; do
    wait "${pids[$n]}"
    rc=$?
    echo "$test_bin (${dirs[$n]:-built-in texts}) exit: $rc"; tail -2 "$out/tests$([ "$n" = 0 ] || echo "$((n + 1))").log"
    [ "$rc" = 0 ] || status=1
  done
fi
# AB_TORCH=1: torch SDPA's cuDNN and flash backends on the prefill shapes first (torch.jsonl), shown
# beside each prefill row of the table with jitk's ratio to cuDNN
if [ "${AB_TORCH:-0}" != 0 ]; then
  timeout 240 python3 bench/gpu/torch_baseline.py --attention > "$out/torch.jsonl" 2> "$out/torch.err"
  echo "torch attention exit: $?"
fi
cat > /tmp/jitk-ab-table.py <<'PY'
import json, os, re, sys
torch = {}
if len(sys.argv) > 2 and os.path.exists(sys.argv[2]):
    for line in open(sys.argv[2]):
        if line.startswith("{"):
            r = json.loads(line)
            if "value" in r:
                torch[r["bench"]] = r["value"]
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        extra = ""
        m = re.match(r"(prefill_(?:bf16|f16)_d\d+_s\d+_h\d+_kv\d+_(?:causal|full))_(?:cuda|cuda-sm90a|cuda-sm90a-tma)$", r["bench"])
        if m and "torch_cudnn_" + m.group(1) in torch:
            cudnn, flash = torch["torch_cudnn_" + m.group(1)], torch.get("torch_flash_" + m.group(1), 0)
            extra = f"  cudnn {cudnn:7.1f} flash {flash:7.1f}  jitk/cudnn {r['value'] / cudnn:5.3f}"
        print(f"{r['bench']:<58} {r['value']:>10.3f} {r['baseline']:>10.3f} {r['ratio']:>7.3f}{extra}")
PY
n=0
for dir in "" "$@"; do
  n=$((n + 1))
  echo "=== ${dir:-built-in}"
  cache=$(mktemp -d)
  [ -n "$(dir_env "$dir")" ] && echo "env: $(dir_env "$dir" | tr '\n' ' ')"
  env $(dir_env "$dir") JITK_KERNEL_DIR=$dir JITK_CACHE_DIR=$cache timeout 240 build-gpu/bench/gpu/jitk_gpu_bench --json --only "$sections" \
    ${bench_args[@]+"${bench_args[@]}"} > "$out/ab$n.jsonl" 2> "$out/ab$n.err"
  rc=$?
  rm -rf "$cache"
  echo "bench exit: $rc"; [ "$rc" = 0 ] || status=1
  grep -E "FAILED|tuning:" "$out/ab$n.err"
  python3 /tmp/jitk-ab-table.py "$out/ab$n.jsonl" "$out/torch.jsonl"
done > >(tee "$out/ab.txt") 2>&1
exit $status
