#!/usr/bin/env bash
# Run here (the build machine reaches PyPI), from the repository root, before a device run that builds
# the Python package: downloads the wheels the GPU machine lacks (nanobind, scikit-build-core, pytest
# and what they need; all pure Python) into .gpu-wheels/ (git-ignored). Carry it with .gpu-deps:
#   carry [".gpu-deps", ".gpu-wheels"], command: bash python/gpu-run.sh
# torch, CuPy and numpy are the GPU machine's own.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.gpu-wheels
mkdir -p "$dest"
rm -f "$dest"/*.whl
python3 -m pip download --disable-pip-version-check --only-binary=:all: --dest "$dest" \
  --python-version 3.12 --platform any --implementation py \
  nanobind scikit-build-core pathspec packaging pytest pluggy iniconfig >/dev/null
ls "$dest"
du -sh "$dest"
