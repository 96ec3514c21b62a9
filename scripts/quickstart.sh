#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs the quickstart twice on a fresh cache:
# the first run compiles every kernel, the second finds them all on disk.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh -DJITK_BUILD_TESTS=OFF -DJITK_BUILD_BENCH=OFF
export JITK_CACHE_DIR=${JITK_CACHE_DIR:-$(mktemp -d /tmp/jitk-quickstart-XXXXXX)}
./build/jitk clear >/dev/null
echo "== first run (cold cache: compiles) =="
./build/quickstart
echo "== second run, new process (compiles nothing) =="
./build/quickstart
./build/jitk stats
