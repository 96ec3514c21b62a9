#!/usr/bin/env bash
# Installs the Debian 12 packages jitk builds with, only those missing (run as root).
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config
          llvm-16-dev libclang-16-dev clang-16 libclang-rt-16-dev
          libxxhash-dev libsqlite3-dev libspdlog-dev catch2
          libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
          libhiredis-dev redis-server  # the fleet cache's remote tier; its tests start a redis-server
          libamdhip64-5 libamd-comgr2  # hipRTC, opened at run time: HIP compiles need no AMD GPU
          python3-dev python3-venv)     # the Python package (scripts/python-env.sh adds PyPI's nanobind, numpy, pytest)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
