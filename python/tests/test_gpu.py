"""CUDA arrays from torch and CuPy (skipped where no GPU is found)."""
import numpy as np
import pytest

import jitk
from conftest import GPU_FRAMEWORKS

pytestmark = pytest.mark.gpu


def ref_rms_norm(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


@pytest.mark.skipif("torch" not in GPU_FRAMEWORKS, reason="no torch with CUDA")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_torch_tensors_on_the_current_stream(dtype):
    import torch
    dt = getattr(torch, dtype)
    x = torch.randn(37, 1000, device="cuda").to(dt)
    w = torch.randn(1000, device="cuda").to(dt)
    y = torch.empty_like(x)
    k = jitk.get("rms_norm", dtype=dt, hidden=1000, target="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        k(x, w, y)  # on s, the current stream
    s.synchronize()
    want = ref_rms_norm(x.float().cpu().numpy(), w.float().cpu().numpy(), 1e-6)
    tol = 1e-5 if dtype == "float32" else 2e-2
    assert np.linalg.norm(y.float().cpu().numpy() - want) / np.linalg.norm(want) <= tol


@pytest.mark.skipif("torch" not in GPU_FRAMEWORKS, reason="no torch with CUDA")
def test_host_arrays_into_a_gpu_kernel_are_refused():
    import torch
    k = jitk.get("rms_norm", dtype="f32", hidden=16, target="cuda")
    x = torch.ones(4, 16, device="cuda")
    with pytest.raises(ValueError, match=r"argument 'weight' is on cpu, but the kernel runs on cuda"):
        k(x, torch.ones(16), torch.empty_like(x))


def _cuda_devices():
    try:
        import torch
        return torch.cuda.device_count() if "torch" in GPU_FRAMEWORKS else 0
    except ImportError:
        return 0


@pytest.mark.skipif(_cuda_devices() < 2, reason="needs two CUDA GPUs (torch)")
def test_arrays_on_another_gpu_are_refused():
    import torch
    k = jitk.get("rms_norm", dtype="f32", hidden=16, target="cuda", device=0)
    x = torch.ones(4, 16, device="cuda:0")
    with pytest.raises(ValueError, match=r"argument 'weight' is on cuda:1, but the kernel was got for device 0"):
        k(x, torch.ones(16, device="cuda:1"), torch.empty_like(x))
    k1 = jitk.get("rms_norm", dtype="f32", hidden=16, target="cuda", device=1)
    x1 = torch.ones(4, 16, device="cuda:1")
    y1 = torch.empty_like(x1)
    k1(x1, torch.ones(16, device="cuda:1"), y1)
    torch.cuda.synchronize(1)
    assert torch.allclose(y1.cpu(), torch.ones(4, 16), rtol=1e-5)


@pytest.mark.skipif("cupy" not in GPU_FRAMEWORKS, reason="no CuPy with a GPU")
def test_cupy_arrays():
    import cupy
    x = cupy.random.standard_normal((5, 64), dtype=cupy.float32)
    w = cupy.random.standard_normal(64, dtype=cupy.float32)
    y = cupy.empty_like(x)
    jitk.get("rms_norm", dtype="f32", hidden=64, target="cuda")(x, w, y)
    want = ref_rms_norm(cupy.asnumpy(x), cupy.asnumpy(w), 1e-6)
    assert np.linalg.norm(cupy.asnumpy(y) - want) / np.linalg.norm(want) <= 1e-5
