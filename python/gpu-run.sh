#!/usr/bin/env bash
# On the GPU machine, from the repository root (carry [".gpu-deps", ".gpu-wheels"]; see
# python/fetch-gpu-wheels.sh): builds jitk with the Python package against the system python (the one
# with torch and CuPy; PYTHON=... for another), runs the Python tests (the GPU ones included; the CPU backend is off there, so
# CPU-only tests skip), the launch-overhead bench and the decoder layer on CUDA. Builds in build-gpu-python
# (bench/gpu/run.sh's build-gpu keeps its own options). Logs to $OUT (or ./gpu-out).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
source .gpu-deps/unpack.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
python=${PYTHON:-python3}
# The carried wheels are pure Python: unzipped onto PYTHONPATH, they need neither pip nor venv there
# (the system's site-packages, with torch, CuPy and numpy, stay as they are).
site=/tmp/jitk-gpu-site
rm -rf "$site" && mkdir -p "$site"
ls .gpu-wheels/*.whl > /dev/null 2>&1 || { echo "no .gpu-wheels (run python/fetch-gpu-wheels.sh here, carry it)"; exit 1; }
for w in .gpu-wheels/*.whl; do "$python" -m zipfile -e "$w" "$site"; done
export PYTHONPATH=$site
"$python" -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" ||
  { echo "$python has no Python.h here: the module cannot build (PYTHON=<a python with its headers and torch>)"; exit 1; }
# The module must be built by the compiler whose libstdc++ the process will load. torch loads the
# system's (/usr/lib/x86_64-linux-gnu/libstdc++.so.6); the GPU machine's default $CXX (/opt/gcc) is
# another GCC with its own libstdc++: a jitk built by it and loaded beside torch mixes two libstdc++
# ABIs in one process and crashes in the first iostream use (jitk.get's specializer) or in torch's import.
export CC=${JITK_PY_CC:-/usr/bin/gcc} CXX=${JITK_PY_CXX:-/usr/bin/g++}
echo "module compiler: $("$CXX" --version | head -1) (libstdc++ $("$CXX" -print-file-name=libstdc++.so.6))"
log=/tmp/jitk-gpu-python-build.log
{ cmake -S . -B build-gpu-python -G Ninja -DCMAKE_BUILD_TYPE=Release -DJITK_BUILD_PYTHON=ON -DJITK_BUILD_BENCH=OFF \
    -DPython_EXECUTABLE="$(command -v "$python")" && cmake --build build-gpu-python; } > "$log" 2>&1 ||
  { cp "$log" "$out/build.log"; grep -E "error|Error" -A3 "$log" | head -60; exit 1; }
export JITK_CACHE_DIR=$(mktemp -d /tmp/jitk-gpu-py-XXXXXX)
export PYTHONPATH=$PWD/build-gpu-python/python:$site
(cd python/tests && "$python" -m pytest -q -p no:cacheprovider -rs .) > "$out/python_tests.log" 2>&1
echo "python tests exit: $?"; tail -25 "$out/python_tests.log"
"$python" bench/python/launch_overhead.py --device cuda --rows 1 --hidden 4096 --json "$out/launch_overhead.json" \
  2>&1 | tee "$out/launch_overhead.txt"
"$python" bench/python/decoder_layer.py --json "$out/decoder_layer.json" 2>&1 | tee "$out/decoder_layer.txt"
