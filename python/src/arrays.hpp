// Arrays as the binding sees them: DLPack (through nanobind's ndarray: NumPy, PyTorch, CuPy, JAX) or
// __cuda_array_interface__ (Numba and others), reduced to an address, a device, a shape and strides.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <memory>
#include <string>

namespace jitk_py {

namespace nb = nanobind;

// Releases a buffer-protocol view (with the GIL held, as every ArrayView is dropped).
struct BufferRelease {
  void operator()(Py_buffer* b) const {
    PyBuffer_Release(b);
    delete b;
  }
};

struct ArrayView {
  static constexpr int kMaxDims = 8;
  const void* data = nullptr;
  int device_type = 1;  // DLPack's: 1 CPU, 2 CUDA, 3 CUDA host memory, 10 ROCm
  int device_id = 0;
  bool device_known = false;  // device_id is the array's own (DLPack, torch), not a default (__cuda_array_interface__)
  std::uint8_t code = 2, bits = 32;  // DLPack's type code (0 int, 1 uint, 2 float, 4 bfloat) and bits
  bool readonly = false;
  int ndim = 0;
  std::int64_t shape[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};  // in elements
  std::int64_t size = 1;
  nb::ndarray<nb::ro> held;     // keeps a DLPack import alive for the call
  nb::ndarray<> held_writable;  // (the one of an array to be written)
  std::unique_ptr<Py_buffer, BufferRelease> buffer;  // a buffer-protocol view (NumPy), released with this

  bool on_host() const { return device_type == 1 || device_type == 3; }
  std::string dtype_name() const;   // "f32", "bf16", "i32", "u8", "bool", ...
  std::string device_name() const;  // "cpu", "cuda:0"
  std::string shape_text() const;   // "(3, 4)"
  bool c_contiguous() const;
  bool f_contiguous() const;
};

// Reads `obj` as an array, the cheapest way it offers: the buffer protocol (NumPy; host memory), a
// torch.Tensor's own attributes (torch's __dlpack__ is Python code, several microseconds a tensor),
// then DLPack, then __cuda_array_interface__. False when it is none (the caller says what was expected). Throws
// nb::value_error for an array it cannot take (too many dimensions, a version of DLPack it cannot read).
// `writable`: the array will be written; a read-only one is then `readonly` (the caller refuses it).
bool view_array(nb::handle obj, bool writable, ArrayView& out);

}  // namespace jitk_py
