#!/usr/bin/env bash
# The test job: installs what is missing, builds, runs the whole suite through ctest; with
# JITK_SANITIZE=1 also builds and runs it under ASan + UBSan; with JITK_FUZZ_SECONDS=N also runs
# each libFuzzer target (manifest, params and pack parsers) for N seconds; with JITK_TSAN=1 also runs the
# concurrency tests (threads, processes, the soak) under ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# The Python package and its pytest suite (ctest runs it, label cpu) build with a venv of PyPI's
# nanobind, numpy, pytest; JITK_PYTHON_TESTS=0 leaves them out (no PyPI).
python_args=(-DJITK_BUILD_PYTHON=OFF)
if [ "${JITK_PYTHON_TESTS:-1}" != 0 ]; then
  python=$(./scripts/python-env.sh build/python-venv)  # fails the job, saying why, when it cannot
  python_args=(-DJITK_BUILD_PYTHON=ON "-DPython_EXECUTABLE=$python")
fi
./scripts/build.sh -DJITK_BUILD_TESTS=ON -DJITK_BUILD_BENCH=OFF "${python_args[@]}"  # ON: quickstart.sh turns them off in build/
jobs=$(nproc)
(cd build && ctest --output-on-failure -j "$jobs")
if [ "${JITK_SANITIZE:-0}" = 1 ]; then
  BUILD_DIR=build-asan ./scripts/build.sh -DJITK_BUILD_BENCH=OFF -DJITK_SANITIZE=ON
  # LLVM keeps some process-lifetime allocations on purpose; leaks are not what this run looks for.
  # The NVRTC compile check is left out here: its time is NVRTC's own (not instrumented), and the
  # plain run above already compiled every kernel text; ASan sees the same path in the other tests.
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$jobs" \
     -E "compiles with NVRTC for sm_80")
fi
if [ "${JITK_TSAN:-0}" = 1 ]; then
  BUILD_DIR=build-tsan ./scripts/build.sh -DJITK_BUILD_BENCH=OFF -DJITK_TSAN=ON
  (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/../tests/tsan.supp" \
     ctest --output-on-failure -R 'at once|together|mixing|warm compiles')
fi
if [ -n "${JITK_FUZZ_SECONDS:-}" ]; then
  BUILD_DIR=build-fuzz ./scripts/build.sh -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 -DJITK_FUZZ=ON
  for target in manifest params object_loader blob_header pack remote_url hits_journal; do
    corpus=$(mktemp -d)
    cp fuzz/corpus/$target/* "$corpus"/
    ./build-fuzz/fuzz/fuzz_$target -max_total_time="$JITK_FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 "$corpus"
    rm -rf "$corpus"
  done
fi
