"""Shared setup: each pytest run gets an empty kernel cache of its own, and the package is imported
from the build tree when PYTHONPATH points there (ctest does).

ctest names the folder (JITK_PYTEST_CACHE_DIR, in the build tree), emptied here before jitk is first
used; by hand, a temporary folder unless JITK_CACHE_DIR is set. (Not removed at exit: jitk's cache
still does its upkeep as the process ends.)"""
import os
import shutil
import tempfile

import pytest

if os.environ.get("JITK_PYTEST_CACHE_DIR"):
    shutil.rmtree(os.environ["JITK_PYTEST_CACHE_DIR"], ignore_errors=True)
    os.makedirs(os.environ["JITK_PYTEST_CACHE_DIR"], mode=0o700)
    os.environ["JITK_CACHE_DIR"] = os.environ["JITK_PYTEST_CACHE_DIR"]
elif not os.environ.get("JITK_CACHE_DIR"):
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


def _cpu_backend():
    import jitk
    return any(b["name"] == "cpu" and b["available"] for b in jitk.cache.backends())


CPU_BACKEND = _cpu_backend()
# Files whose tests run kernels on the CPU backend (a build without LLVM, as on the GPU machine, has none).
_CPU_FILES = {"test_kernels_cpu.py", "test_errors.py", "test_cache.py"}


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="no GPU found (torch.cuda or CuPy): GPU tests skipped")
    skip_cpu = pytest.mark.skip(reason="this jitk has no CPU backend (built without LLVM)")
    for item in items:
        if "gpu" in item.keywords and not GPU_FRAMEWORKS:
            item.add_marker(skip_gpu)
        if item.path.name in _CPU_FILES and not CPU_BACKEND:
            item.add_marker(skip_cpu)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU through torch or CuPy")
