#!/usr/bin/env python3
"""What a launch from Python costs over the same launch from C++, beside a torch eager op of the same size.

    PYTHONPATH=build/python python bench/python/launch_overhead.py               # CPU, NumPy arrays
    PYTHONPATH=build/python python bench/python/launch_overhead.py --device cuda  # torch CUDA tensors

For each case: the C++ launch (the arguments gathered once, jit::Kernel::launch in a loop, in this
process), the whole Python call k(...), what the Python call adds (their difference; target <= 3 us),
the argument checks alone (gather), and a torch eager op on tensors of the same size when torch is
installed. Each figure is the best of 7 loops (the machine's other load only adds). On CUDA the times are the host's (launches enqueue; one synchronize at the end of a loop).
"""
import argparse
import json
import os
import platform
import time
import timeit

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # NumPy's BLAS threads spin and steal the cores timed here

import numpy as np  # noqa: E402

import jitk  # noqa: E402


def per_call(stmt, names, iterations, repeats=7, sync=None):
    """Seconds a run of `stmt` (a call written out, so no wrapper of the benchmark's is timed) takes."""
    timer = timeit.Timer(stmt, globals=names)
    times = []
    for _ in range(repeats):
        t = timer.timeit(iterations)
        if sync:
            t0 = time.perf_counter()
            sync()
            t += time.perf_counter() - t0
        times.append(t / iterations)
    return min(times)


def cases(device, rows, hidden):
    """(name, kernel, args, kwargs, torch op or None) of the same sizes on `device`."""
    try:
        import torch
    except ImportError:
        torch = None
    if device == "cpu":
        x = np.random.default_rng(0).standard_normal((rows, hidden), dtype=np.float32)
        w = np.ones(hidden, np.float32)
        y = np.empty_like(x)
        gu = np.random.default_rng(1).standard_normal((rows, 2 * hidden), dtype=np.float32)
        out = np.empty((rows, hidden), np.float32)
        tx = torch.from_numpy(x) if torch else None
        tw = torch.from_numpy(w) if torch else None
        tgu = torch.from_numpy(gu) if torch else None
        target = "cpu"
    else:
        x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
        w = torch.ones(hidden, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        gu = torch.randn(rows, 2 * hidden, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(rows, hidden, device="cuda", dtype=torch.bfloat16)
        tx, tw, tgu = x, w, gu
        target = "cuda"
    dtype = "f32" if device == "cpu" else "bf16"
    rms = jitk.get("rms_norm", dtype=dtype, hidden=hidden, target=target)
    silu = jitk.get("silu_and_mul", dtype=dtype, hidden=hidden, target=target)
    torch_rms = torch_silu = None
    if torch is not None:
        torch_rms = (lambda: torch.nn.functional.rms_norm(tx, (hidden,), tw, 1e-6))
        torch_silu = (lambda: torch.nn.functional.silu(tgu[:, :hidden]) * tgu[:, hidden:])
    return [("rms_norm", rms, (x, w, y), {"eps": 1e-6}, torch_rms),
            ("silu_and_mul", silu, (gu, out), {}, torch_silu)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    sync = None
    if a.device == "cuda":
        import torch
        sync = torch.cuda.synchronize
    results = []
    print(f"{platform.node()} {platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"{a.device}, rows {a.rows} x hidden {a.hidden}, best of 7 x {a.iterations} calls, microseconds a call")
    print(f"{'kernel':14} {'C++ launch':>11} {'Python call':>12} {'added':>7} {'checks':>7} {'torch eager':>12}")
    for name, k, args, kwargs, torch_op in cases(a.device, a.rows, a.hidden):
        k(*args, **kwargs)  # compiled or loaded before timing
        cpp, gather = [], []
        for _ in range(7):
            t = k._time_launches(a.iterations, *args, **kwargs)
            cpp.append(t["cpp_launch_s"])
            gather.append(t["gather_s"])
        if sync:
            sync()
        cpp_s, gather_s = min(cpp), min(gather)
        names = {"k": k, "op": torch_op, **{f"a{i}": v for i, v in enumerate(args)}, **kwargs}
        call = "k(" + ", ".join([f"a{i}" for i in range(len(args))] + [f"{n}={n}" for n in kwargs]) + ")"
        py_s = per_call(call, names, a.iterations, sync=sync)
        torch_s = per_call("op()", names, a.iterations, sync=sync) if torch_op else float("nan")
        row = {"kernel": name, "cpp_launch_us": cpp_s * 1e6, "python_call_us": py_s * 1e6,
               "added_us": (py_s - cpp_s) * 1e6, "checks_us": gather_s * 1e6, "torch_eager_us": torch_s * 1e6}
        results.append(row)
        print(f"{name:14} {row['cpp_launch_us']:11.2f} {row['python_call_us']:12.2f} {row['added_us']:7.2f} "
              f"{row['checks_us']:7.2f} {row['torch_eager_us']:12.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": a.device, "rows": a.rows, "hidden": a.hidden, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
