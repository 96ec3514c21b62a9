#!/usr/bin/env bash
# rotary_embedding on the device machine, in one call from the repo root:
#   carry [".gpu-deps"], command: bash bench/gpu/rotary.sh
# Builds the GPU tests and bench (no LLVM there: the CPU backend is off), runs the GPU kernel tests
# (rotary's first, then the rest of the file, as a check the family broke nothing), then
# `jitk_gpu_bench --only rotary,bandwidth` twice (the spread between the runs is the noise).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
source .gpu-deps/unpack.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
log=/tmp/jitk-gpu-build.log
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target test_gpu_kernels jitk_gpu_bench jitk_tool; } > "$log" 2>&1 ||
  { cp "$log" "$out/build.log"; grep -E "error|Error" -A3 "$log" | head -60; exit 1; }
export JITK_CACHE_DIR=$(mktemp -d /tmp/jitk-gpu-XXXXXX)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/info.txt"
./build-gpu/tests/test_gpu_kernels "[rotary]" > "$out/rotary_tests.log" 2>&1
echo "rotary gpu tests exit: $?"; tail -4 "$out/rotary_tests.log"
./build-gpu/tests/test_gpu_kernels > "$out/gpu_tests.log" 2>&1
echo "all gpu kernel tests exit: $?"; tail -3 "$out/gpu_tests.log"
for run in 1 2; do
  timeout 200 ./build-gpu/bench/gpu/jitk_gpu_bench --only rotary,bandwidth > "$out/bench$run.txt" 2>&1
  echo "bench run $run exit: $?"
done
grep -E "rotary|rms_norm_bf16_8192_GBps" "$out/bench1.txt" "$out/bench2.txt"
