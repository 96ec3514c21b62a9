#!/usr/bin/env bash
# On the GPU machine, from the repository root (carry [".gpu-deps", ".gpu-wheels"]; see
# python/fetch-gpu-wheels.sh): builds jitk with the Python package against the system python (the one
# with torch and CuPy), runs the Python tests (the GPU ones included; the CPU backend is off there, so
# CPU-only tests skip) and the launch-overhead bench on CUDA. Logs to $OUT (or ./gpu-out).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
source .gpu-deps/unpack.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
python=${PYTHON:-python3}
venv=/tmp/jitk-gpu-venv
# the system's site-packages stay visible: torch, CuPy and numpy come from there
"$python" -m venv --system-site-packages "$venv" &&
  "$venv/bin/python" -m pip install -q --no-index --find-links .gpu-wheels nanobind scikit-build-core pytest ||
  { echo "could not make the venv (is .gpu-wheels carried?)"; exit 1; }
log=/tmp/jitk-gpu-python-build.log
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DJITK_BUILD_PYTHON=ON -DJITK_BUILD_BENCH=OFF \
    -DPython_EXECUTABLE="$venv/bin/python" && cmake --build build-gpu; } > "$log" 2>&1 ||
  { cp "$log" "$out/build.log"; grep -E "error|Error" -A3 "$log" | head -60; exit 1; }
export JITK_CACHE_DIR=$(mktemp -d /tmp/jitk-gpu-py-XXXXXX)
export PYTHONPATH=$PWD/build-gpu/python
(cd python/tests && "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs .) > "$out/python_tests.log" 2>&1
echo "python tests exit: $?"; tail -25 "$out/python_tests.log"
"$venv/bin/python" bench/python/launch_overhead.py --device cuda --rows 1 --hidden 4096 --json "$out/launch_overhead.json" \
  2>&1 | tee "$out/launch_overhead.txt"
"$venv/bin/python" bench/python/decoder_layer.py 2>&1 | tee "$out/decoder_layer.txt"
