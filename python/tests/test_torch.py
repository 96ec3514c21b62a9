"""The torch.library ops and the layer swaps (skipped where torch is not installed). On CPU tensors the
ops run jitk's CPU backend; on CUDA tensors its CUDA one."""
import math

import pytest

torch = pytest.importorskip("torch")
jt = pytest.importorskip("jitk.torch")

from conftest import CPU_BACKEND, GPU_FRAMEWORKS  # noqa: E402

DEVICES = (["cpu"] if CPU_BACKEND else []) + (["cuda"] if "torch" in GPU_FRAMEWORKS else [])
DEV = DEVICES[-1] if DEVICES else "cpu"  # where the single-device tests run: the GPU when there is one
pytestmark = pytest.mark.skipif(not DEVICES, reason="neither jitk's CPU backend nor a CUDA GPU for torch")


def close(got, want, tol):
    got, want = got.double().cpu(), want.double().cpu()
    return (got - want).norm() / max(want.norm(), 1e-30) <= tol


def ref_rms_norm(x, w, eps):
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.double()


@pytest.mark.parametrize("device", DEVICES)
def test_ops_match_torch(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 96, generator=g).to(device)
    w = torch.randn(96, generator=g).to(device)
    assert close(torch.ops.jitk.rms_norm(x, w, 1e-6), ref_rms_norm(x, w, 1e-6), 1e-5)
    gu = torch.randn(7, 2 * 48, generator=g).to(device)
    assert close(jt.silu_and_mul(gu), torch.nn.functional.silu(gu[:, :48]) * gu[:, 48:], 1e-5)
    assert close(jt.softmax(x), torch.softmax(x.double(), -1), 1e-5)
    a, b = torch.randn(33, 17, generator=g).to(device), torch.randn(40, 17, generator=g).to(device)
    assert close(jt.gemm(a, b.t()), a.double() @ b.double().t(), 1e-5)


GATE_ACT = {"silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
            "gelu_tanh": lambda g: torch.nn.functional.gelu(g, approximate="tanh")}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("gate", ["none", "silu", "gelu_tanh"])
def test_gemm_gate_and_residual_in_the_epilogue(device, gate):
    # odd sizes (C's n / 2 = 24 columns): float32 on the CPU; on CUDA (the gated gemm is f16 / bf16
    # there) f16, and bf16 at sizes the Hopper text takes (16-byte rows); METHOD.md's 16-bit tolerance
    cases = [(torch.float32, 37, 53, 48, 1e-5)] if device == "cpu" else [
        (torch.float16, 37, 53, 48, 1e-2), (torch.bfloat16, 300, 256, 2 * 192, 1e-2), (torch.float16, 65, 4096, 2 * 256, 1e-2)]
    g = torch.Generator().manual_seed(5)
    for dtype, m, k, n, tol in cases:
        a = torch.randn(m, k, generator=g).to(device, dtype)
        wg, wu = torch.randn(k, n // 2, generator=g) / k ** 0.5, torch.randn(k, n // 2, generator=g) / k ** 0.5
        if gate == "none":
            b = torch.cat([wg, wu], 1).to(device, dtype)
            want = a.double() @ b.double()
        else:
            b = jt.interleave_gate_up(wg, wu).to(device, dtype)
            a64 = a.double()
            want = GATE_ACT[gate](a64 @ wg.to(device, dtype).double()) * (a64 @ wu.to(device, dtype).double())
        assert close(torch.ops.jitk.gemm(a, b, gate), want, tol), (dtype, m, k, n)
        residual = torch.randn(*want.shape, generator=g).to(device, dtype)
        got = torch.ops.jitk.gemm(a, b, gate, residual)
        assert close(got, want + residual.double(), tol), (dtype, m, k, n)
        # B transposed (a column-major view) gives the same
        assert close(torch.ops.jitk.gemm(a, b.t().contiguous().t(), gate, residual), want + residual.double(), tol)
    with pytest.raises(ValueError, match="residual must be"):
        torch.ops.jitk.gemm(a, b, gate, residual[:, :-1])
    with pytest.raises(ValueError, match="one shape"):
        jt.interleave_gate_up(torch.zeros(4, 8), torch.zeros(4, 16))


@pytest.mark.parametrize("device", DEVICES)
def test_attention_matches_sdpa(device):
    # The GPU's attention runs f16 / bf16 only (a float32 tensor there is a clear ParamsError, below);
    # METHOD.md: 16-bit operands land between 1e-3 and 1e-2 of a float64 reference.
    dtype, tol = (torch.float32, 1e-5) if device == "cpu" else (torch.float16, 5e-3)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 9, 32, generator=g).to(device, dtype)
    k = torch.randn(2, 2, 9, 32, generator=g).to(device, dtype)
    v = torch.randn(2, 2, 9, 32, generator=g).to(device, dtype)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double().repeat_interleave(2, 1), v.double().repeat_interleave(2, 1), is_causal=True)
    assert close(jt.attention(q, k, v, causal=True), want, tol)
    if device == "cuda":
        import jitk
        with pytest.raises(jitk.ParamsError, match="'dtype' = 'f32' is not supported"):
            jt.attention(q.float(), k.float(), v.float(), causal=True)


def test_ops_pass_opcheck():
    x, w = torch.randn(4, 32, device=DEV), torch.randn(32, device=DEV)
    torch.library.opcheck(torch.ops.jitk.rms_norm, (x, w, 1e-6))
    torch.library.opcheck(torch.ops.jitk.silu_and_mul, (torch.randn(4, 64, device=DEV),))
    torch.library.opcheck(torch.ops.jitk.gemm, (torch.randn(8, 5, device=DEV), torch.randn(5, 3, device=DEV)))
    half = torch.float32 if DEV == "cpu" else torch.bfloat16  # the gated gemm is f16 / bf16 on CUDA
    torch.library.opcheck(torch.ops.jitk.gemm, (torch.randn(8, 5, device=DEV, dtype=half), torch.randn(5, 32, device=DEV, dtype=half),
                                                "silu", torch.randn(8, 16, device=DEV, dtype=half)))


def test_torch_compile_traces_without_graph_breaks():
    def f(x, w):
        return torch.ops.jitk.silu_and_mul(torch.ops.jitk.rms_norm(x, w, 1e-6)) * 2

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    x, w = torch.randn(6, 64, device=DEV), torch.randn(64, device=DEV)
    assert close(compiled(x, w), f(x, w), 1e-6)
    explanation = torch._dynamo.explain(f)(x, w)
    assert explanation.graph_break_count == 0


class RMSNorm(torch.nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(hidden))
        self.variance_epsilon = eps

    def forward(self, x):
        return ref_rms_norm(x, self.weight, self.variance_epsilon).to(x.dtype)


class MLP(torch.nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, inter, bias=False)
        self.up_proj = torch.nn.Linear(hidden, inter, bias=False)
        self.down_proj = torch.nn.Linear(inter, hidden, bias=False)
        self.act_fn = torch.nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def test_kernelize_swaps_rms_norm_and_mlp_and_keeps_results():
    torch.manual_seed(0)
    model = torch.nn.Sequential(RMSNorm(64), MLP(64, 96)).to(DEV)
    x = torch.randn(5, 64, device=DEV)
    with torch.no_grad():
        want = model(x)
        swapped = jt.kernelize(model)
        got = model(x)
    assert swapped == ["0", "1"]
    assert close(got, want, 1e-5)
    with pytest.raises(ValueError, match="no jitk forward"):
        jt.use_kernel(torch.nn.ReLU())


def test_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="int64"):
        jt.rms_norm(torch.ones(2, 8, dtype=torch.int64, device=DEV), torch.ones(8, dtype=torch.int64, device=DEV), 1e-6)
