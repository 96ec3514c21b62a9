#!/usr/bin/env bash
# Makes (once) the virtual environment the Python package builds and tests in: nanobind,
# scikit-build-core, numpy and pytest from PyPI, over the system's python3 (Debian: python3-dev and
# python3-venv, which install-deps.sh installs). Prints the environment's python. Usage:
#   python=$(scripts/python-env.sh [folder])      # default folder: build/python-venv
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(realpath -m "${1:-build/python-venv}")
base=${JITK_PYTHON:-python3}
needs="import nanobind, numpy, pytest, scikit_build_core"
if ! "$venv/bin/python" -c "$needs" 2>/dev/null; then
  if ! "$base" -c "import sysconfig, os, sys; h = sysconfig.get_paths()['include']; sys.exit(not os.path.exists(os.path.join(h, 'Python.h')))"; then
    echo "python-env: $base has no Python.h (Debian: apt-get install python3-dev)" >&2
    exit 1
  fi
  rm -rf "$venv"
  if ! "$base" -m venv "$venv" >&2; then
    echo "python-env: '$base -m venv' failed (Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
  if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check nanobind scikit-build-core numpy pytest >&2; then
    echo "python-env: pip could not install nanobind, scikit-build-core, numpy, pytest from PyPI into $venv" >&2
    echo "            (offline: JITK_PYTHON_TESTS=0 ./scripts/test.sh builds and tests without the Python package)" >&2
    exit 1
  fi
fi
echo "$venv/bin/python"
