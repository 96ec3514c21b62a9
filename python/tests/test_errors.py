"""Every way a call can be wrong gets a Python exception naming the argument, what was expected and what was given."""
import subprocess
import sys

import numpy as np
import pytest

import jitk


@pytest.fixture(scope="module")
def rms():
    return jitk.get("rms_norm", dtype="f32", hidden=16, target="cpu")


def arrays(rows=4, hidden=16, dtype=np.float32):
    return np.ones((rows, hidden), dtype), np.ones(hidden, dtype), np.zeros((rows, hidden), dtype)


class FakeCudaArray:
    """An array that says it lives on a GPU (__cuda_array_interface__), for the device check."""

    def __init__(self, shape, typestr="<f4"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (0x10000, False), "version": 3,
                                         "strides": None}


def test_unknown_kernel_is_a_value_error_naming_the_known_ones():
    with pytest.raises(jitk.ParamsError, match=r"unknown kernel 'rms_nrom'.*rms_norm") as e:
        jitk.get("rms_nrom", dtype="f32", hidden=16)
    assert isinstance(e.value, ValueError) and e.value.kind == "unknown kernel"


def test_a_kernel_without_a_python_form_says_why():
    with pytest.raises(jitk.ParamsError, match="block_sparse_matmul.*BlockMask"):
        jitk.get("block_sparse_matmul", dtype="f32", target="cpu")


@pytest.mark.parametrize("params,match", [
    ({"dtype": "f32", "hidden": 0}, "hidden"),
    ({"dtype": "f8", "hidden": 16}, "dtype"),
    ({"dtype": "f32"}, "hidden"),
    ({"dtype": "f32", "hidden": 16, "hiden": 3}, "hiden"),
    ({"dtype": "f32", "hidden": 16, "epilogue": "add>frobnicate"}, "frobnicate"),
    ({"dtype": "f32", "hidden": 2 ** 70}, "64 bits"),
])
def test_bad_params_are_value_errors_naming_the_param(params, match):
    with pytest.raises(ValueError, match=match):
        jitk.get("rms_norm", target="cpu", **params)


def test_a_param_of_the_wrong_python_type_is_a_type_error():
    with pytest.raises(TypeError, match=r"hidden must be an int, a bool or a str, got float"):
        jitk.get("rms_norm", dtype="f32", hidden=16.5, target="cpu")
    with pytest.raises(ValueError, match="hidden"):
        jitk.get("rms_norm", dtype="f32", hidden="sixteen", target="cpu")


@pytest.mark.parametrize("value", [["f32"], {"f": 32}, object(), None, 1.5])
def test_a_param_value_of_no_usable_type_is_a_type_error(value):
    with pytest.raises(TypeError, match="dtype must be an int, a bool or a str"):
        jitk.get("rms_norm", dtype=value, hidden=16, target="cpu")


def test_a_bad_target_is_named():
    with pytest.raises(jitk.ParamsError, match="unknown target 'tpu'"):
        jitk.get("rms_norm", dtype="f32", hidden=16, target="tpu")
    with pytest.raises(jitk.ParamsError, match="device"):
        jitk.get("rms_norm", dtype="f32", hidden=16, target="cpu", device=3)


def test_wrong_dtype_names_argument_expected_and_given(rms):
    x, w, y = arrays()
    with pytest.raises(TypeError, match=r"rms_norm: argument 'weight' must be f32, got f64"):
        rms(x, w.astype(np.float64), y)
    with pytest.raises(TypeError, match=r"argument 'x' must be f32, got i32"):
        rms(x.astype(np.int32), w, y)


def test_wrong_shape_names_the_dimension_and_both_values(rms):
    x, w, y = arrays()
    with pytest.raises(ValueError, match=r"argument 'x' has shape \(4, 17\); dimension 1 \(hidden\) must be 16.*got 17"):
        rms(np.ones((4, 17), np.float32), w, y)
    with pytest.raises(ValueError, match=r"argument 'y' has shape \(5, 16\); dimension 0 \(rows\) must be 4"):
        rms(x, w, np.zeros((5, 16), np.float32))
    with pytest.raises(ValueError, match=r"argument 'weight' must have 1 dimensions \[hidden\], got shape \(1, 16\)"):
        rms(x, w.reshape(1, 16), y)


def test_a_product_dimension_that_does_not_divide_is_refused():
    k = jitk.get("silu_and_mul", dtype="f32", hidden=8, target="cpu")
    with pytest.raises(ValueError, match=r"argument 'x' has shape \(3, 15\); dimension 1 \(2\*hidden\) must be 16"):
        k(np.ones((3, 15), np.float32), np.zeros((3, 8), np.float32))
    k = jitk.get("attention_prefill", dtype="f32", head_dim=4, group=2, target="cpu")
    q = np.ones((3, 3, 4), np.float32)  # 3 heads: not a multiple of group 2
    kv = np.ones((3, 1, 4), np.float32)
    cu = np.array([0, 3], np.int32)
    with pytest.raises(ValueError, match=r"argument 'q'.*kv_heads\*group.*multiple of 2"):
        k(q, kv, kv, np.zeros_like(q), cu, cu, 3, 0.5)


def test_non_contiguous_is_refused(rms):
    x, w, y = arrays(rows=4, hidden=32)
    with pytest.raises(ValueError, match=r"argument 'x' must be contiguous, got strides \(in elements\) \(32, 2\)"):
        rms(x[:, ::2], w[:16], y[:, :16].copy())
    k = jitk.get("gemm", dtype="f32", a_layout="col", target="cpu")
    a = np.ones((4, 5), np.float32)  # row-major where column-major is declared
    with pytest.raises(ValueError, match=r"argument 'a' must be column-major"):
        k(a, np.ones((5, 3), np.float32), np.zeros((4, 3), np.float32))


def test_an_array_on_another_device_is_refused(rms):
    x, w, y = arrays()
    with pytest.raises(ValueError, match=r"argument 'x' is on cuda:0, but the kernel runs on cpu"):
        rms(FakeCudaArray((4, 16)), w, y)


def test_a_read_only_output_is_refused(rms):
    x, w, y = arrays()
    y.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 'y' is written, but the array is read-only"):
        rms(x, w, y)
    x.flags.writeable = False  # read-only inputs are fine
    rms(x, w, np.zeros((4, 16), np.float32))


def test_not_an_array(rms):
    x, w, y = arrays()
    with pytest.raises(TypeError, match=r"argument 'x' must be an array .* got list"):
        rms(x.tolist(), w, y)


def test_missing_extra_and_unknown_arguments(rms):
    x, w, y = arrays()
    with pytest.raises(TypeError, match=r"missing array 'y'.*rms_norm|missing array 'y'"):
        rms(x, w)
    with pytest.raises(TypeError, match="takes at most"):
        rms(x, w, y, 1e-6, (), (), 3)
    with pytest.raises(TypeError, match="unexpected argument 'epsilon'"):
        rms(x, w, y, epsilon=1e-6)
    with pytest.raises(TypeError, match="two values for argument 'x'"):
        rms(x, w, y, x=x)
    with pytest.raises(TypeError, match="'eps' must be a number, got str"):
        rms(x, w, y, eps="small")


def test_the_kernels_own_checks_come_through_as_argument_errors(rms):
    x, w, y = arrays()
    with pytest.raises(jitk.ArgumentError, match="eps must be > 0") as e:
        rms(x, w, y, eps=0.0)
    assert isinstance(e.value, ValueError) and e.value.kind == "invalid argument"
    k = jitk.get("attention_prefill", dtype="f32", head_dim=4, target="cpu")
    q = np.ones((3, 1, 4), np.float32)
    with pytest.raises(jitk.ArgumentError, match="cu_seqlens_q"):
        k(q, q, q, np.zeros_like(q), np.array([0, 2], np.int32), np.array([0, 3], np.int32), 3, 0.5)


def test_chain_operands_are_checked():
    k = jitk.get("rms_norm", dtype="f32", hidden=16, epilogue="add_vec", target="cpu")
    x, w, y = arrays()
    with pytest.raises(TypeError, match=r"epilogue operands: the chain add_vec takes 1, got 0"):
        k(x, w, y)
    with pytest.raises(ValueError, match=r"epilogue operands \[0\] has 3 elements; it must have 16"):
        k(x, w, y, epilogue=[np.ones(3, np.float32)])
    with pytest.raises(TypeError, match=r"epilogue\[0\]' must be f32, got f64"):
        k(x, w, y, epilogue=[np.ones(16)])
    plain = jitk.get("rms_norm", dtype="f32", hidden=16, target="cpu")
    with pytest.raises(ValueError, match="without a epilogue chain"):
        plain(x, w, y, epilogue=[np.ones(16, np.float32)])


def test_get_tuned_of_a_kernel_that_cannot_be_tuned():
    with pytest.raises(jitk.ParamsError, match="cannot be tuned"):
        jitk.get_tuned("rms_norm", (1, 2, 3), dtype="f32", hidden=16, target="cpu")
    with pytest.raises(jitk.Error, match="three positive numbers"):
        jitk.get_tuned("gemm", (1, 2), dtype="f32", a_layout="row", b_layout="row", target="cpu")


def test_configure_after_first_use_changes_the_log_level_but_not_the_cache_root(rms, tmp_path):
    jitk.configure(log_level="warn")  # the log level applies at any time
    jitk.configure(cache_dir=jitk.cache.root())  # the root in use: accepted
    with pytest.raises(jitk.Error, match="already in use"):
        jitk.configure(cache_dir=tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="cache_mode 'sometimes' is not one of"):
        jitk.configure(cache_mode="sometimes")


def test_configure_before_first_use_sets_the_cache_root_and_log_level(tmp_path):
    code = ("import jitk, numpy as np\n"
            f"jitk.configure(cache_dir={str(tmp_path / 'c')!r}, log_level='info')\n"
            "k = jitk.get('saxpy', dtype='f32', target='cpu')\n"
            "k(np.ones(3, np.float32), np.ones(3, np.float32), 1.0)\n"
            "print(jitk.cache.root())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(tmp_path / "c")
    assert "[jitk I]" in r.stderr  # info lines: the compile is logged
    with pytest.raises(ValueError, match="log_level 'loud' is not one of"):
        jitk.configure(log_level="loud")
    with pytest.raises(ValueError, match="cache_dir is empty"):
        jitk.configure(cache_dir="")


class OddArray:
    def __init__(self, cai):
        self._cai = cai

    @property
    def __cuda_array_interface__(self):
        if isinstance(self._cai, Exception):
            raise self._cai
        return self._cai


@pytest.mark.parametrize("cai", [
    {"shape": (4, 16), "typestr": "<f0", "data": (1, False), "version": 3},
    {"shape": (4, 16), "typestr": "<f", "data": (1, False), "version": 3},
    {"shape": (4, 16), "typestr": "<fxx", "data": (1, False), "version": 3},
    {"shape": (-4, 16), "typestr": "<f4", "data": (1, False), "version": 3},
    {"shape": (2 ** 40, 2 ** 40), "typestr": "<f4", "data": (1, False), "version": 3},
    {"shape": (4, 16), "typestr": "<f4", "data": (1, False), "version": 3, "strides": (4,)},
    {"shape": (4, 16), "typestr": "<f4", "data": (1, False), "version": 3, "strides": (6, 4)},
    {"shape": (4, 16), "typestr": ">f4", "data": (1, False), "version": 3},
    {"shape": (4, 16), "typestr": "<f4", "version": 3},
    {"shape": "four", "typestr": "<f4", "data": (1, False), "version": 3},
    [1, 2, 3],
    RuntimeError("no interface today"),
])
def test_a_malformed_cuda_array_interface_is_an_exception_not_a_crash(rms, cai):
    x, w, y = arrays()
    with pytest.raises((ValueError, TypeError, KeyError, RuntimeError)):
        rms(OddArray(cai), w, y)
