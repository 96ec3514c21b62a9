#!/usr/bin/env bash
# Issue 25's cold start on the device, in one call from the repo root (carry .gpu-deps; logs under
# $OUT): builds build-gpu's jitk_layer_bench and decoder_layer (Release), then
#   1. each variant's compile alone (decoder_layer --compile cuda:ARCH, empty jitk cache and
#      CUDA_CACHE_PATH, nothing loaded) on the built-in texts and each DIR's; then all 8 at once
#      (--jobs 8) with NVRTC's PCH on every compile (JITK_NVRTC_PCH=1), on none (0) and on lone
#      compiles only (auto, the default);
#   2. the cold row (jitk_layer_bench --cold N: N children, each on an empty jitk cache and an empty
#      CUDA_CACHE_PATH, every variant got from its own thread, then the first forward), each child's
#      figures, output checksum and its variants' get start / end (the critical path), NVRTC's time
#      for each (JITK_LOG_LEVEL=info): built-in texts, the same with JITK_NVRTC_PCH=1, and each DIR's texts
#      (JITK_KERNEL_DIR; a DIR's ab.env as in ab.sh); the same checksum on every row = the same output bits;
#   3. with DIRs: the layer's prefill (--prefill: 1 x 2048 and 8 x 2048 with the per-kernel
#      breakdown) on the built-in texts, each DIR's, and the built-in texts again;
#   then a summary (each cold row's samples and checksums). COLD_TESTS=1 first runs test_gpu_gemm's
#   staged-epilogue, chain and gate tests on each DIR's texts, all at once (as ab.sh's AB_TESTS=dirs).
#   bash bench/gpu/cold-run.sh [DIR ...]      COLD_N (default 2) cold children a row
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
source .gpu-deps/unpack.sh > /dev/null
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
n=${COLD_N:-2}
dirs=()
for d in "$@"; do dirs+=("$(realpath "$d")"); done  # JITK_KERNEL_DIR absolute, whatever the children's folder
set -- ${dirs[@]+"${dirs[@]}"}
log=/tmp/jitk-cold-build.log
targets="jitk_layer_bench decoder_layer"
[ "${COLD_TESTS:-0}" = 1 ] && [ $# -gt 0 ] && targets="$targets test_gpu_gemm"
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DJITK_BUILD_TESTS=ON -DJITK_BUILD_BENCH=ON &&
  cmake --build build-gpu --target $targets; } > "$log" 2>&1 ||
  { cp "$log" "$out/build.log"; grep -E "error|Error" -A3 "$log" | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
dir_env() { [ -n "$1" ] && [ -f "$1/ab.env" ] && grep -Ev '^[[:space:]]*(#|$)' "$1/ab.env"; true; }
status=0
if [ "${COLD_TESTS:-0}" = 1 ] && [ $# -gt 0 ]; then
  pids=()
  for i in $(seq 1 $#); do
    d=${!i}
    env $(dir_env "$d") JITK_KERNEL_DIR="$d" JITK_CACHE_DIR=$(mktemp -d) timeout 300 ./build-gpu/tests/test_gpu_gemm \
      '[sm90_epilogue],[chains],[gate]' > "$out/tests$i.log" 2>&1 &
    pids+=($!)
  done
  for i in $(seq 1 $#); do
    wait "${pids[$((i - 1))]}"
    rc=$?
    [ $rc = 0 ] || status=1
    echo "== test_gpu_gemm on $(basename "${!i}"): exit $rc"
    tail -2 "$out/tests$i.log"
  done
fi
# 1. compiles alone and at once, nothing loaded
compile() {  # jobs, then env assignments
  local jobs=$1
  shift
  echo "== decoder_layer --compile cuda:sm_$arch --jobs $jobs $*"
  local cuda_cache
  cuda_cache=$(mktemp -d)
  env "$@" CUDA_CACHE_PATH="$cuda_cache" timeout 60 ./build-gpu/decoder_layer --compile "cuda:sm_$arch" --jobs "$jobs" || status=1
  rm -rf "$cuda_cache"
}
compile 1
for d in "$@"; do compile 1 $(dir_env "$d") JITK_KERNEL_DIR="$d"; done
for pch in 1 0 auto; do compile 8 JITK_NVRTC_PCH=$pch; done
# 2. the cold row
rows=()
cold() {  # label, then env assignments
  local label=$1
  shift
  echo "== cold: $label"
  env JITK_LOG_LEVEL=info "$@" timeout 200 ./build-gpu/bench/gpu/jitk_layer_bench --cold "$n" > "$out/cold-$label.txt" 2>&1 || status=1
  cat "$out/cold-$label.txt"
  rows+=("$label")
}
cold built-in
cold built-in-pch1 JITK_NVRTC_PCH=1
for d in "$@"; do cold "$(basename "$d")" $(dir_env "$d") JITK_KERNEL_DIR="$d"; done
# 3. the prefill on each text (only with DIRs)
if [ $# -gt 0 ]; then
  texts=("" "$@" "")
  for i in "${!texts[@]}"; do
    d=${texts[$i]}
    env $(dir_env "$d") JITK_KERNEL_DIR=$d JITK_CACHE_DIR=$(mktemp -d) timeout 120 ./build-gpu/bench/gpu/jitk_layer_bench --json --prefill \
      > "$out/prefill$i.jsonl" 2> "$out/prefill$i.err"
    rc=$?
    [ $rc = 0 ] || status=1
    echo "== prefill ${d:-built-in} ($i): exit $rc"
    grep -E '"layer_prefill_(1|8)x2048_ms"|kernel_.*gemm' "$out/prefill$i.jsonl" | cut -c1-200
  done
fi
echo "== summary: cold rows (compile_all ms, first forward done ms, output checksum a sample)"
for r in "${rows[@]}"; do
  echo "$r: $(sed -n 's/^cold sample [0-9]*: compile_all \([0-9.]*\) ms, first forward done at \([0-9.]*\) ms, output checksum \(.*\)/\1 \2 \3;/p' "$out/cold-$r.txt" | tr '\n' ' ')"
done
exit $status
