#!/usr/bin/env bash
# The whole GPU check, run on the device machine from the repo root:
#   carry [".gpu-deps"], command: bash bench/gpu/run.sh [SECTION...]
# Builds (no LLVM there: the CPU backend is off), then runs the sections named (all when none):
#   tests      the gpu-labelled tests, with and without NVRTC's PCH      -> tests.log
#   ship       quickstart + record / warm / export / import chain       -> ship.log
#   layer      jitk_layer_bench (Llama-3-8B layer) + torch --layer        -> layer.jsonl
#   qkv        the QKV gemm epilogue's GPU tests, the layer's prefill and decode fused / unfused -> qkv.log
#   bench      jitk_gpu_bench, everything (about 8 min; JITK_BENCH_ONLY=prefill,decode: those) -> gpu_bench.jsonl/.err
#   torch      torch_baseline.py row kernels + attention + plot           -> torch.jsonl, row_kernels.png
#   first_use  a warm first use in new processes, with its breakdown (also after an empty kernel's
#              CUBIN was loaded, and eager), vs CuPy, and A/B of JITK_CUDA_LOAD=library,
#              CUDA_MODULE_LOADING=EAGER and JITK_REQUEST_KEYS=0             -> first_use.log
#   fleet      bench/gpu/fleet.sh: JITK_FLEET_N (default 32) processes, empty caches, one redis-server,
#              the layer's cold start against one node's (carry redis-server: fetch-gpu-deps.sh) -> fleet.log
#   python     python/gpu-run.sh (carry .gpu-wheels too): the package's tests on CUDA, launch overhead,
#              the decoder layer against torch eager and torch.compile in one process -> python/
# A device call runs at most 10 minutes: the whole check takes three calls on a fresh machine, e.g.
# `run.sh tests ship`, `run.sh layer first_use`, `run.sh bench torch` (each builds first, ~2 min).
# Logs go to $OUT (or ./gpu-out), info.txt first; at most 8 files come back from the device.
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
source .gpu-deps/unpack.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
log=/tmp/jitk-gpu-build.log
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu; } > "$log" 2>&1 ||
  { cp "$log" "$out/build.log"; grep -E "error|Error" -A3 "$log" | head -60; exit 1; }
export JITK_CACHE_DIR=$(mktemp -d /tmp/jitk-gpu-XXXXXX)
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; ./build-gpu/jitk info; } 2>&1 | tee "$out/info.txt"
section_tests() {
  (cd build-gpu && ctest -L gpu --output-on-failure -j 4 --timeout 300) > "$out/tests.log" 2>&1
  echo "gpu tests exit: $?"; tail -15 "$out/tests.log"
  # the same tests without NVRTC's PCH (JITK_NVRTC_PCH=0), so both compile paths stay proven
  (cd build-gpu && JITK_NVRTC_PCH=0 ctest -L gpu --output-on-failure -j 4 --timeout 300) >> "$out/tests.log" 2>&1
  echo "gpu tests without PCH exit: $?"; grep -E "tests passed" "$out/tests.log"
}
# qkv: the QKV gemm's epilogue (rope + the KV-cache write): its GPU tests and the layer's, then the
# layer's prefill and decode with their same-run unfused baselines (_unfused_qkv)  -> qkv.log
section_qkv() {
  (cd build-gpu && ctest -R "writes the KV cache in its epilogue|decoder layer on the GPU|decoder layer's run records" --output-on-failure \
    --timeout 300) > "$out/qkv.log" 2>&1; echo "qkv tests exit: $?"; grep -E "tests passed|Failed|FAILED" "$out/qkv.log" | head
  { timeout 150 ./build-gpu/bench/gpu/jitk_layer_bench --prefill; echo "prefill exit: $?"
    timeout 120 ./build-gpu/bench/gpu/jitk_layer_bench --decode; echo "decode exit: $?"; } >> "$out/qkv.log" 2>&1
  grep -vE "^(ok|PASS)" "$out/qkv.log" | tail -80
}
section_ship() {
  ./build-gpu/quickstart > "$out/ship.log" 2>&1; echo "quickstart exit: $?"; tail -4 "$out/ship.log"
  # record -> warm with no GPU visible -> export -> import elsewhere -> the quickstart compiles nothing
  ship=$(mktemp -d /tmp/jitk-ship-XXXXXX)
  { JITK_RECORD=$ship/used.toml JITK_CACHE_DIR=$ship/a ./build-gpu/quickstart > /dev/null 2>&1
    cat $ship/used.toml
    CUDA_VISIBLE_DEVICES= JITK_CACHE_DIR=$ship/b ./build-gpu/jitk warm $ship/used.toml
    JITK_CACHE_DIR=$ship/b ./build-gpu/jitk export $ship/warm.jitkpack --target cuda
    JITK_CACHE_DIR=$ship/c ./build-gpu/jitk import $ship/warm.jitkpack
    JITK_CACHE_DIR=$ship/c ./build-gpu/quickstart; } >> "$out/ship.log" 2>&1
  echo "ship exit: $?"; tail -8 "$out/ship.log"
}
section_layer() {
  dump=$(mktemp -d /tmp/jitk-layer-XXXXXX)
  timeout 400 ./build-gpu/bench/gpu/jitk_layer_bench --json --dump "$dump" > "$out/layer.jsonl" 2>&1; echo "layer bench exit: $?"
  timeout 300 python3 bench/gpu/torch_baseline.py --layer "$dump" >> "$out/layer.jsonl" 2>&1; echo "torch layer exit: $?"
  rm -rf "$dump"; cat "$out/layer.jsonl"
}
section_bench() {
  timeout 520 ./build-gpu/bench/gpu/jitk_gpu_bench --json ${JITK_BENCH_ONLY:+--only $JITK_BENCH_ONLY} > "$out/gpu_bench.jsonl" 2> "$out/gpu_bench.err"
  echo "bench exit: $?"; cat "$out/gpu_bench.err" | tail -5
  bash bench/gpu/regs.sh "$JITK_CACHE_DIR" ./build-gpu/jitk >> "$out/gpu_bench.err" 2>&1; grep -E "layer_norm|chain|prologue|epilogue" "$out/gpu_bench.err" | head -30
  cat "$out/gpu_bench.jsonl"
}
section_torch() {
  # PyTorch on the same data, same timing method (the baseline of each kernel's GB/s)
  python3 bench/gpu/torch_baseline.py > "$out/torch.jsonl" 2>> "$out/gpu_bench.err"; echo "torch exit: $?"
  # torch SDPA's cuDNN, flash and efficient backends on the prefill section's shapes
  python3 bench/gpu/torch_baseline.py --attention >> "$out/torch.jsonl" 2>> "$out/gpu_bench.err"; echo "torch attention exit: $?"
  cat "$out/torch.jsonl"
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  python3 bench/gpu/plot.py "$out/gpu_bench.jsonl" "$out/torch.jsonl" "$out/row_kernels.png" "$gpu_name" 2>> "$out/gpu_bench.err"
  echo "plot exit: $?"
}
section_first_use() {
  # where a warm first use spends its time (INFO lines time the disk read and the module load)
  first_use_cache=$(mktemp -d /tmp/jitk-first-use-XXXXXX)
  JITK_CACHE_DIR=$first_use_cache ./build-gpu/bench/gpu/jitk_first_use > /dev/null 2>&1
  for i in 1 2 3; do
    JITK_CACHE_DIR=$first_use_cache JITK_LOG_LEVEL=info ./build-gpu/bench/gpu/jitk_first_use
  done > "$out/first_use.log" 2>&1
  for i in 1 2; do JITK_CACHE_DIR=$first_use_cache JITK_BENCH_BREAKDOWN=1 ./build-gpu/bench/gpu/jitk_first_use; done >> "$out/first_use.log" 2>&1
  for i in 1 2; do JITK_CACHE_DIR=$first_use_cache JITK_CUDA_LOAD=library JITK_BENCH_BREAKDOWN=1 ./build-gpu/bench/gpu/jitk_first_use; done >> "$out/first_use.log" 2>&1
  # the same after an empty kernel's CUBIN was loaded (does the first module load still cost more?),
  # and with the driver's lazy loading off
  tiny_cubin=$first_use_cache.tiny.cubin
  ./build-gpu/bench/gpu/jitk_gpu_bench --write-tiny-cubin "$tiny_cubin" >> "$out/first_use.log" 2>&1
  for i in 1 2; do JITK_CACHE_DIR=$first_use_cache JITK_BENCH_TINY_FIRST=cubin JITK_BENCH_TINY_CUBIN=$tiny_cubin JITK_BENCH_BREAKDOWN=1 ./build-gpu/bench/gpu/jitk_first_use; done >> "$out/first_use.log" 2>&1
  echo "== breakdown, CUDA_MODULE_LOADING=EAGER" >> "$out/first_use.log"
  JITK_CACHE_DIR=$first_use_cache CUDA_MODULE_LOADING=EAGER JITK_BENCH_BREAKDOWN=1 ./build-gpu/bench/gpu/jitk_first_use >> "$out/first_use.log" 2>&1
  # the same first use against CuPy's RawKernel (and Triton where installed), same run, medians and ratios
  python3 bench/gpu/first_use_vs_cupy.py ./build-gpu/bench/gpu/jitk_gpu_bench 15 >> "$out/first_use.log" 2>&1
  # A/B in the same run: cuLibraryLoadData instead of cuModuleLoadData; the text rendered on every get
  echo "== JITK_CUDA_LOAD=library" >> "$out/first_use.log"
  JITK_CUDA_LOAD=library python3 bench/gpu/first_use_vs_cupy.py ./build-gpu/bench/gpu/jitk_gpu_bench 15 jitk,jitk_nvrtc_first,jitk_after_other,cupy >> "$out/first_use.log" 2>&1
  echo "== CUDA_MODULE_LOADING=EAGER" >> "$out/first_use.log"
  CUDA_MODULE_LOADING=EAGER python3 bench/gpu/first_use_vs_cupy.py ./build-gpu/bench/gpu/jitk_gpu_bench 15 jitk,jitk_nvrtc_first,jitk_after_other,cupy >> "$out/first_use.log" 2>&1
  echo "== JITK_REQUEST_KEYS=0" >> "$out/first_use.log"
  JITK_REQUEST_KEYS=0 python3 bench/gpu/first_use_vs_cupy.py ./build-gpu/bench/gpu/jitk_gpu_bench 15 jitk,jitk_nvrtc_first,jitk_after_other,cupy >> "$out/first_use.log" 2>&1
  cat "$out/first_use.log"
}
section_fleet() {
  # redis-server and redis-cli carried in .gpu-deps (fetch-gpu-deps.sh redis-server redis-tools ...)
  PATH="/opt/gpu-deps/usr/bin:$PATH" bash bench/gpu/fleet.sh ./build-gpu/bench/gpu/jitk_layer_bench "${JITK_FLEET_N:-32}" > "$out/fleet.log" 2>&1; echo "fleet exit: $?"
  cat "$out/fleet.log"
}
section_python() {  # needs .gpu-wheels carried too (python/fetch-gpu-wheels.sh); builds its own build-gpu-python
  OUT="$out/python" bash python/gpu-run.sh; echo "python exit: $?"
}
sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=(tests ship layer bench torch first_use python)
for s in "${sections[@]}"; do
  case $s in
    tests|ship|layer|bench|torch|first_use|fleet|python|qkv) echo "== $s"; "section_$s" ;;
    *) echo "run.sh: unknown section '$s' (tests ship layer bench torch first_use fleet python qkv)"; exit 2 ;;
  esac
done
