"""jitk from Python: the shipped kernels by name, specialized and compiled at first use, cached on disk.

    import numpy as np, jitk
    k = jitk.get("rms_norm", dtype="f32", hidden=4096)
    k(x, weight, y, eps=1e-6)          # x, y: (rows, 4096) float32; weight: (4096,)

Arrays come through DLPack or ``__cuda_array_interface__``: NumPy on the CPU backend, PyTorch and
CuPy tensors on CUDA (launched on the framework's current stream, or ``stream=``). See docs/python.md.
"""
from __future__ import annotations

import os as _os
import threading as _threading

from . import _jitk
from ._jitk import ArgumentError, Error, Kernel, ParamsError
from . import cache

__all__ = ["get", "get_tuned", "kernels", "signature", "register_kernel", "configure", "default_target", "Kernel",
           "Error", "ParamsError", "ArgumentError", "cache"]

_DTYPE_NAMES = {
    "float16": "f16", "half": "f16", "f16": "f16",
    "bfloat16": "bf16", "bf16": "bf16",
    "float32": "f32", "float": "f32", "f32": "f32",
    "float64": "f64", "double": "f64", "f64": "f64",
}


def _dtype_name(value):
    """'f32' for "f32", numpy.float32, numpy.dtype('float32') or torch.float32; other values unchanged."""
    if isinstance(value, str):
        return _DTYPE_NAMES.get(value, value)
    name = getattr(value, "__name__", None) or str(value)  # numpy scalar types; dtype objects
    name = name.rsplit(".", 1)[-1]  # "torch.float32" -> "float32"
    return _DTYPE_NAMES.get(name, value)


def _normalize(params):
    out = {}
    for name, value in params.items():
        if name == "dtype":
            value = _dtype_name(value)
        out[name] = value
    return out


_memo = {}
_raw_memo = {}  # the same kernels by get()'s arguments as given (kwargs order and all)
_memo_lock = _threading.Lock()


def _key(kernel, params, *rest):
    try:
        key = (kernel, tuple(sorted(params.items())), *rest)
        hash(key)
        return key
    except TypeError:  # an unorderable or unhashable value: the C++ side says what is wrong with it
        return None


def get(kernel: str, *, target: str | None = None, device: int | None = None, implementation: str | None = None,
        training: bool = False, **params) -> Kernel:
    """The kernel `kernel` specialized for `params` on `target` ("cpu", "cuda", "cuda:sm_90"; default: the
    GPU when one is usable, else the CPU) and `device` (a GPU's index; default 0). Compiled at first use,
    then loaded from the disk cache. `implementation` picks one by name; training=True asks for one with a
    backward. Gets are remembered: a second get with the same arguments returns the same Kernel.

    Raises ParamsError (a ValueError) for an unknown kernel or params it does not take."""
    # The arguments as given first (one tuple, one lookup: what a get in a hot loop pays), then as normalized.
    try:
        raw = (kernel, target, device, implementation, training, *params.items())
        hit = _raw_memo.get(raw)
    except TypeError:  # an unhashable value
        raw = hit = None
    if hit is not None:
        return hit
    params = _normalize(params)
    key = _key(kernel, params, target, device, implementation, training)
    hit = _memo.get(key) if key is not None else None
    if hit is None:
        hit = _jitk._get(kernel, params, target, implementation, training, -1 if device is None else device)
        if key is not None:
            with _memo_lock:
                hit = _memo.setdefault(key, hit)
    if raw is not None:
        _raw_memo[raw] = hit
    return hit


def get_tuned(kernel: str, shape, *, target: str | None = None, device: int | None = None, **params) -> Kernel:
    """The kernel with the best of its candidate tiles for this class of shapes (gemm: shape = (m, n, k)),
    tuned once per device and remembered in the cache (jit::get_tuned)."""
    params = _normalize(params)
    shape = [int(v) for v in shape]
    key = _key(kernel, params, target, device, "tuned", tuple(shape))
    if key is not None and key in _memo:
        return _memo[key]
    k = _jitk._get_tuned(kernel, params, shape, target, -1 if device is None else device)
    if key is not None:
        with _memo_lock:
            _memo.setdefault(key, k)
    return k


def kernels() -> list[dict]:
    """Every kernel reachable from Python: name, summary, params (name, allowed values, doc), the call's
    arguments (name, kind, dims, dtype) and its signature text."""
    return _jitk._kernels()


def signature(kernel: str) -> str:
    """How a kernel is called: "rms_norm(x[rows, hidden], weight[hidden], y[rows, hidden], eps=1e-06, ...)"."""
    for k in _jitk._kernels():
        if k["name"] == kernel:
            return kernel + k["signature"]
    registered = _jitk._registered_signature(kernel)
    if registered is not None:
        return registered
    raise ParamsError(f"unknown kernel '{kernel}'")


def register_kernel(name: str, *, params: dict, signature: str, work: str, cpu: str, summary: str = "",
                    min_grain: int = 1) -> None:
    """Adds a kernel of your own, compiled and cached like the shipped ones (jit::register_kernel):

    params: {"dtype": ["f32", "f64"], "hidden": (1, 1 << 20)}: text choices, or (min, max) integers.
    signature: its arguments in the grammar of python/src/kernel_table.cpp, e.g.
        "rows; x:in[rows,hidden]; bias:in[hidden]; out:out[rows,hidden]; scale:float=1"
    work: the count the kernel's range covers (the CPU text's jitk_begin .. jitk_end), e.g. "rows".
    cpu: the CPU text (#include "jitk_cpu.h", JITK_CPU_KERNEL, JITK_ARG(i, type); docs/writing-kernels.md).
    The launch passes the signature's fields in order, all but `work`: arrays as pointers, counts and
    integers as int64 (i64), numbers as the kernel's scalar type (float; double for f64).
    min_grain: the fewest work items worth a task of the thread pool.

    Raises ParamsError when the name is taken or the declaration is unsound (nothing is registered)."""
    _jitk._register_kernel(name, summary, params, signature, work, cpu, min_grain)


def default_target() -> str:
    """The target get() uses when given none: "cuda:sm_90" when a GPU is usable, else "cpu"."""
    return _jitk.default_target()


_LEVELS = ("trace", "debug", "info", "warn", "warning", "error", "critical", "off")


_MODES = ("read-write", "rw", "read-only", "ro", "memory-only", "memory", "off")


def configure(*, cache_dir: str | _os.PathLike | None = None, log_level: str | None = None,
              cache_mode: str | None = None) -> None:
    """Sets the cache root, the log level and the cache mode for this process (jit::configure).

    Each one given wins over its environment variable ($JITK_CACHE_DIR, $JITK_LOG_LEVEL,
    $JITK_CACHE_MODE: read-write, read-only, memory-only). The log level applies at once, at any
    time; the cache root and mode are fixed when the cache is first used (the first get() or cache
    call): after that another value raises jitk.Error (the same value is accepted)."""
    if log_level is not None and str(log_level).lower() not in _LEVELS:
        raise ValueError(f"log_level '{log_level}' is not one of {', '.join(_LEVELS)}")
    if cache_mode is not None and str(cache_mode) not in _MODES:
        raise ValueError(f"cache_mode '{cache_mode}' is not one of {', '.join(_MODES)}")
    path = None if cache_dir is None else _os.fspath(cache_dir)
    if path is not None and not path:
        raise ValueError("cache_dir is empty")
    _jitk._configure(None if path is None else _os.path.abspath(path),
                     None if log_level is None else str(log_level).lower(),
                     None if cache_mode is None else str(cache_mode))

