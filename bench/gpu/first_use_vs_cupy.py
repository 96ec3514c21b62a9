#!/usr/bin/env python3
"""First use of a cached kernel in a new process: jitk against CuPy's RawKernel (and Triton where it is
installed), in the same run, each side in fresh child processes taken in turn (A B A B ...), medians
and the ratio jitk / CuPy. Each child starts its GPU context first and times only getting the kernel
ready from its warm disk cache (jitk: jit::get, which loads the module; CuPy: RawKernel + compile,
which loads its cached cubin; Triton: the first call, which loads its cached kernel and launches).
    python3 bench/gpu/first_use_vs_cupy.py ./build-gpu/bench/gpu/jitk_gpu_bench [REPS]
One JSON object per line, then a line of text with the medians and ratios.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

# CuPy's kernel: an rms_norm of bf16 rows, the size of jitk's (one block a row).
CUPY_CHILD = r'''
import sys, time
import cupy
cupy.cuda.Device(0).use()
cupy.zeros(1).sum()  # context and CuPy's own kernels: not the first use being timed
src = r"""
#include <cuda_bf16.h>
extern "C" __global__ void rms_norm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int hidden, float eps) {
  const __nv_bfloat16* row = x + (long long)blockIdx.x * hidden;
  __shared__ float partial[32];
  float s = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) { float v = __bfloat162float(row[i]); s += v * v; }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if (threadIdx.x == 0) partial[0] = rsqrtf(s / hidden + eps);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < hidden; i += blockDim.x)
    y[(long long)blockIdx.x * hidden + i] = __float2bfloat16(__bfloat162float(row[i]) * partial[0] * __bfloat162float(w[i]));
}
"""
t0 = time.perf_counter()
k = cupy.RawKernel(src, "rms_norm_bf16")
k.compile()  # compiles, or loads the cubin CuPy cached on disk
_ = k.kernel if hasattr(k, "kernel") else None
print("%.4f" % ((time.perf_counter() - t0) * 1e3))
'''

TRITON_CHILD = r'''
import time
import torch
import triton
import triton.language as tl

@triton.jit
def rms_norm(x, w, y, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    v = tl.load(x + row * hidden + cols, mask=mask, other=0.).to(tl.float32)
    r = tl.rsqrt(tl.sum(v * v, axis=0) / hidden + eps)
    g = tl.load(w + cols, mask=mask, other=0.).to(tl.float32)
    tl.store(y + row * hidden + cols, (v * r * g).to(tl.bfloat16), mask=mask)

x = torch.ones(4, 4096, dtype=torch.bfloat16, device="cuda")
w = torch.ones(4096, dtype=torch.bfloat16, device="cuda")
y = torch.empty_like(x)
torch.cuda.synchronize()
t0 = time.perf_counter()
rms_norm[(4,)](x, w, y, 4096, 1e-6, BLOCK=4096)
torch.cuda.synchronize()
print("%.4f" % ((time.perf_counter() - t0) * 1e3))
'''


def child(cmd, env):
    out = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError("%s failed:\n%s%s" % (cmd[0], out.stdout, out.stderr[-2000:]))
    return out.stdout.split()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    bench = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    work = tempfile.mkdtemp(prefix="jitk-first-use-vs-")
    triton_file = os.path.join(work, "triton_child.py")
    with open(triton_file, "w") as f:
        f.write(TRITON_CHILD)
    sides = {
        "jitk": ([bench, "--child-first-use"], {"JITK_CACHE_DIR": os.path.join(work, "jitk")}),
        "cupy": ([sys.executable, "-c", CUPY_CHILD], {"CUPY_CACHE_DIR": os.path.join(work, "cupy")}),
        "triton": ([sys.executable, triton_file], {"TRITON_CACHE_DIR": os.path.join(work, "triton")}),
    }
    # A side whose first (compiling) run fails is left out, said on stderr.
    for name in list(sides):
        try:
            child(*sides[name])
        except Exception as e:  # noqa: BLE001: an absent package or GPU is reported, not fatal
            print("%s: left out (%s)" % (name, str(e).splitlines()[-1] if str(e) else e), file=sys.stderr)
            del sides[name]
    if "jitk" not in sides:
        sys.exit("jitk's child failed")
    times = {name: [] for name in sides}
    for _ in range(reps):
        for name, (cmd, env) in sides.items():
            fields = child(cmd, env)
            if name == "jitk" and (len(fields) < 2 or fields[1] != "1"):
                raise RuntimeError("jitk's child did not find its kernel on disk: %s" % fields)
            times[name].append(float(fields[0]))
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        row = {"bench": "first_use_warm_" + name + "_ms", "value": round(med[name], 4), "unit": "ms", "reps": reps,
               "min": round(min(t), 4), "max": round(max(t), 4)}
        if name != "jitk":
            row["jitk_ratio"] = round(med["jitk"] / med[name], 3)
        print(json.dumps(row), flush=True)
    text = "first use of a cached kernel, new process, median of %d: jitk %.3f ms" % (reps, med["jitk"])
    for name in sides:
        if name != "jitk":
            text += "; %s %.3f ms (jitk / %s = %.2fx)" % (name, med[name], name, med["jitk"] / med[name])
    print(text)


if __name__ == "__main__":
    main()
