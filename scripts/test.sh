#!/usr/bin/env bash
# The test job: installs what is missing, builds, runs the whole suite through ctest; with
# JITK_SANITIZE=1 also builds and runs it under ASan + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh -DJITK_BUILD_BENCH=OFF
jobs=$(nproc)
(cd build && ctest --output-on-failure -j "$jobs")
if [ "${JITK_SANITIZE:-0}" = 1 ]; then
  BUILD_DIR=build-asan ./scripts/build.sh -DJITK_BUILD_BENCH=OFF -DJITK_SANITIZE=ON
  # LLVM keeps some process-lifetime allocations on purpose; leaks are not what this run looks for.
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$jobs")
fi
