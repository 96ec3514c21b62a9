"""Shared setup: each pytest run gets its own kernel cache (unless JITK_CACHE_DIR is set), and the
package is imported from the build tree when PYTHONPATH points there (ctest does)."""
import os
import tempfile

import pytest

if not os.environ.get("JITK_CACHE_DIR"):
    os.environ["JITK_CACHE_DIR"] = tempfile.mkdtemp(prefix="jitk-pytest-")


def _gpu_frameworks():
    found = []
    try:
        import torch
        if torch.cuda.is_available():
            found.append("torch")
    except ImportError:
        pass
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            found.append("cupy")
    except Exception:  # noqa: BLE001  (no CuPy, or no device: either way no GPU test)
        pass
    return found


GPU_FRAMEWORKS = _gpu_frameworks()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="no GPU found (torch.cuda or CuPy): GPU tests skipped")
    for item in items:
        if "gpu" in item.keywords and not GPU_FRAMEWORKS:
            item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU through torch or CuPy")
