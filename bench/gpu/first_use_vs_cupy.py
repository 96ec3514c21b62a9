#!/usr/bin/env python3
"""First use of a cached kernel in a new process: jitk against CuPy's RawKernel (and Triton where it is
installed), in the same run, each side in fresh child processes taken in turn (A B A B ...), medians
and the ratios. Each child pays its per-process costs before the clock and times getting the kernel
ready from its warm disk cache, then (second figure) that plus its first launch and a sync:
  jitk              jit::get of rms_norm bf16 in jitk_first_use (libjitk and the driver only; cuInit and
                    the context before the clock): NVRTC's facts from the cache, NVRTC never opened
  jitk_nvrtc_first  the same with NVRTC opened before the clock (as every process did before jitk
                    remembered NVRTC's facts: its open, about 5-7 ms, is then not in the figure)
  jitk_after_other  the same after another kernel (saxpy) was got first: the driver's first module load
                    of the process is then paid before the clock, as in CuPy's figure
  jitk_tiny_*       the same after an empty kernel's module was loaded: PTX or CUBIN, before the clock
                    (first) or on a thread (thread; cubin_thread: started as the clock starts)
  cupy              DESIGN's figure: RawKernel + compile() of rms_norm after another RawKernel was
                    compiled before the clock (CuPy keys its cache with an NVRTC compile of an empty
                    program, once a process: about 20 ms; that and its first module load are not timed)
  cupy_keying       the same without that warm-up: CuPy's keying inside the clock (for reference)
  triton            the first call of a cached Triton kernel
    python3 bench/gpu/first_use_vs_cupy.py ./build-gpu/bench/gpu/jitk_gpu_bench [REPS] [SIDES]
(jitk_first_use, the child, is taken from the same folder; jitk_gpu_bench writes the tiny CUBIN.)
SIDES: a comma-separated subset (e.g. jitk,jitk_after_other,cupy), all by default. The environment
passes through: JITK_CUDA_LOAD=library or JITK_REQUEST_KEYS=0 for A/B runs of jitk's sides.
One JSON object per line, then lines of text with the medians and ratios.
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
import numpy
import cupy
cupy.cuda.Device(0).use()
cupy.cuda.runtime.free(0)  # the context, before the clock (jitk's child makes its own first too)
rows, hidden = 4, 4096
x = cupy.zeros(rows * hidden, dtype=cupy.uint16)  # bf16 bits
w = cupy.zeros(hidden, dtype=cupy.uint16)
y = cupy.zeros(rows * hidden, dtype=cupy.uint16)
cupy.cuda.Device(0).synchronize()
if sys.argv[1] == "warm":
    # Another kernel first: CuPy's once-a-process keying (an NVRTC compile of an empty program) and
    # the process's first module load are paid here, before the clock.
    other = cupy.RawKernel(r'extern "C" __global__ void other_kernel(float* p) { p[threadIdx.x] = 1.f; }', "other_kernel")
    other.compile()
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
ready = (time.perf_counter() - t0) * 1e3
k((rows,), (256,), (x, w, y, numpy.int32(hidden), numpy.float32(1e-6)))
cupy.cuda.Device(0).synchronize()
launched = (time.perf_counter() - t0) * 1e3
print("%.4f %.4f" % (ready, launched))
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
ms = (time.perf_counter() - t0) * 1e3
print("%.4f %.4f" % (ms, ms))  # Triton's first call is its ready and its first launch at once
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
    jitk_cache = {"JITK_CACHE_DIR": os.path.join(work, "jitk")}
    cupy_cache = {"CUPY_CACHE_DIR": os.path.join(work, "cupy")}
    # An empty kernel's CUBIN for the tiny_cubin sides (left out below where it cannot be made).
    tiny_cubin = {"JITK_BENCH_TINY_CUBIN": os.path.join(work, "tiny.cubin")}
    subprocess.run([bench, "--write-tiny-cubin", tiny_cubin["JITK_BENCH_TINY_CUBIN"]], timeout=120)
    first_use = os.path.join(os.path.dirname(os.path.abspath(bench)), "jitk_first_use")
    sides = {
        "jitk": ([first_use], jitk_cache),
        "jitk_nvrtc_first": ([first_use], {**jitk_cache, "JITK_BENCH_NVRTC_FIRST": "1"}),
        "jitk_after_other": ([first_use], {**jitk_cache, "JITK_BENCH_OTHER_FIRST": "1"}),
        # issue 27's experiment: the process's first module load paid by a tiny PTX module, before the
        # clock (sync) or on a thread started at CUDA init and joined after the get (thread)
        "jitk_tiny_first": ([first_use], {**jitk_cache, "JITK_BENCH_TINY_FIRST": "sync"}),
        "jitk_tiny_thread": ([first_use], {**jitk_cache, "JITK_BENCH_TINY_FIRST": "thread"}),
        # the same with an empty kernel's CUBIN of the device's arch (the ELF loader jitk's artifacts
        # take, not the PTX JIT): before the clock, or on a thread started as the clock starts
        "jitk_tiny_cubin_first": ([first_use], {**jitk_cache, **tiny_cubin, "JITK_BENCH_TINY_FIRST": "cubin"}),
        "jitk_tiny_cubin_thread": ([first_use], {**jitk_cache, **tiny_cubin, "JITK_BENCH_TINY_FIRST": "cubin-thread"}),
        "cupy": ([sys.executable, "-c", CUPY_CHILD, "warm"], cupy_cache),
        "cupy_keying": ([sys.executable, "-c", CUPY_CHILD, "cold"], cupy_cache),
        "triton": ([sys.executable, triton_file], {"TRITON_CACHE_DIR": os.path.join(work, "triton")}),
    }
    if len(sys.argv) > 3:
        wanted = sys.argv[3].split(",")
        sides = {name: side for name, side in sides.items() if name in wanted}
    # A side whose first (compiling) run fails is left out, said on stderr.
    for name in list(sides):
        try:
            child(*sides[name])
        except Exception as e:  # noqa: BLE001: an absent package or GPU is reported, not fatal
            print("%s: left out (%s)" % (name, str(e).splitlines()[-1] if str(e) else e), file=sys.stderr)
            del sides[name]
    if "jitk" not in sides:
        sys.exit("jitk's child failed")
    ready = {name: [] for name in sides}
    launched = {name: [] for name in sides}
    nvrtc_open = []  # what opening NVRTC costs a jitk child after its get (the "jitk" side's)
    for _ in range(reps):
        for name, (cmd, env) in sides.items():
            fields = child(cmd, env)
            if name.startswith("jitk"):  # get ms, from disk (1), get + first launch ms
                if len(fields) < 3 or fields[1] != "1":
                    raise RuntimeError("jitk's child did not find its kernel on disk: %s" % fields)
                ready[name].append(float(fields[0]))
                launched[name].append(float(fields[2]))
                if name == "jitk" and len(fields) > 4:
                    if fields[4] != "0":  # NVRTC's facts were not found in the cache: the figure would hide it
                        raise RuntimeError("jitk's child mapped NVRTC in its warm get: %s" % fields)
                    nvrtc_open.append(float(fields[3]))
            else:
                ready[name].append(float(fields[0]))
                launched[name].append(float(fields[1]))
    med = {name: statistics.median(t) for name, t in ready.items()}
    med_launched = {name: statistics.median(t) for name, t in launched.items()}
    for name in sides:
        t = ready[name]
        row = {"bench": "first_use_warm_" + name + "_ms", "value": round(med[name], 4), "unit": "ms", "reps": reps,
               "min": round(min(t), 4), "max": round(max(t), 4), "with_first_launch_ms": round(med_launched[name], 4)}
        if "cupy" in sides and name != "cupy":
            row["ratio_to_cupy"] = round(med[name] / med["cupy"], 3)
        print(json.dumps(row), flush=True)
    if nvrtc_open:
        print(json.dumps({"bench": "first_use_nvrtc_open_after_ms", "value": round(statistics.median(nvrtc_open), 4), "unit": "ms",
                          "reps": reps, "note": "opening NVRTC in the jitk child after its get: what a warm get no longer pays"}),
              flush=True)
    print("first use of a cached kernel, new process, median of %d (ms; with the first launch + sync in brackets):" % reps)
    for name in sides:
        line = "  %-17s %.3f (%.3f)" % (name, med[name], med_launched[name])
        if "cupy" in sides and name != "cupy":
            line += "   %s / cupy = %.2fx (%.2fx with the launch)" % (name, med[name] / med["cupy"],
                                                                      med_launched[name] / med_launched["cupy"])
        print(line)


if __name__ == "__main__":
    main()
