#!/usr/bin/env bash
# Configures and builds jitk into ${BUILD_DIR:-build} (extra arguments go to cmake).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build "$build_dir"
