#!/usr/bin/env bash
# Hardware counters and machine code of the GEMM (ONLY=block_sparse: block-sparse) cases whose names
# hold FILTER, in one device call from the repo root (carry [".gpu-deps"]):
#   bash bench/gpu/profile.sh FILTER[,FILTER...] [DIR]
# Builds jitk_gpu_bench (Release), runs `--only ${ONLY:-gemm} --filter FILTER` under Nsight Compute (clocks
# left alone) for the first LAUNCHES kernels after SKIP (ours and cuBLAS's alternate: the names say
# which), and writes $OUT/ncu.txt (speed of light, pipes, scheduler, warp stalls, top stall lines)
# (and memory: L1, L2 hit rates, DRAM bytes) $OUT/source-FILTER.csv (per instruction of the first kernel: stall samples, shared-memory
# wavefronts) and $OUT/sass-N.txt, the machine code of each CUDA kernel jitk compiled (nvdisasm). DIR: kernel
# texts to use instead of the built-in ones (JITK_KERNEL_DIR). KERNEL=REGEX: only kernels so named
# (e.g. KERNEL=jitk for jitk's, not cuBLAS's or the bench's own).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
filter=${1:?a gemm case name part, e.g. f32_row_col_4096x4096x4096}
dir=${2:-}
source .gpu-deps/unpack.sh > /dev/null
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
log=/tmp/jitk-gpu-build.log
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target jitk_gpu_bench jitk; } > "$log" 2>&1 ||
  { cp "$log" "$out/build.log"; grep -E "error|Error" -A3 "$log" | head -60; exit 1; }
cache=$(mktemp -d)
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || echo /usr/local/cuda/bin/ncu)
IFS=, read -ra filters <<< "$filter"
for f in "${filters[@]}"; do
  echo "=== $f"
  JITK_KERNEL_DIR=$dir JITK_CACHE_DIR=$cache timeout 300 "$ncu" --clock-control none --target-processes application-only \
    --launch-skip "${SKIP:-0}" --launch-count "${LAUNCHES:-4}" ${KERNEL:+--kernel-name "regex:$KERNEL"} \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
    --section InstructionStats --section LaunchStats --section Occupancy --section SourceCounters \
    --export "/tmp/profile-$f" --force-overwrite --print-summary none \
    build-gpu/bench/gpu/jitk_gpu_bench --only "${ONLY:-gemm}" --filter "$f" 2>> "$out/ncu.err"
  echo "ncu exit: $?"
  "$ncu" --import "/tmp/profile-$f.ncu-rep" --print-details all
  # per instruction: stall samples, shared wavefronts (the first kernel profiled)
  "$ncu" --import "/tmp/profile-$f.ncu-rep" --page source --csv --print-source sass --launch-count 1 > "$out/source-$f.csv" 2>&1
done > "$out/ncu.txt"
grep -E "^===|^  [a-zA-Z_]|Duration|SM Frequency|Issue Slots Busy|Executed Ipc A|No Eligible|Registers Per|Warp Cycles Per Issued" "$out/ncu.txt" | head -120
n=0
JITK_CACHE_DIR=$cache build-gpu/jitk ls --json |
  python3 -c 'import json, sys
for r in json.load(sys.stdin):
    if r["backend"] == "cuda":
        print(r["key"], r["params"].replace(" ", "_"))' |
  while read -r key params; do
    n=$((n + 1))
    tail -c +89 "$cache/blobs/${key:0:2}/$key" > /tmp/k.cubin
    { echo "# $params"; "$CUDA_HOME/bin/cuobjdump" --dump-resource-usage /tmp/k.cubin; "$CUDA_HOME/bin/nvdisasm" -c /tmp/k.cubin; } > "$out/sass-$n.txt" 2>&1
    echo "sass-$n.txt: $params ($(wc -l < "$out/sass-$n.txt") lines)"
  done
rm -rf "$cache"
