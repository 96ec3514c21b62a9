// Reading a Python array object into an ArrayView.
#include "arrays.hpp"

#include <sstream>

namespace jitk_py {

std::string ArrayView::dtype_name() const {
  const std::string b = std::to_string(bits);
  switch (code) {
    case 0: return "i" + b;
    case 1: return bits == 8 ? "u8" : "u" + b;
    case 2: return "f" + b;
    case 4: return "bf" + b;
    case 5: return "c" + b;
    case 6: return "bool";
    default: return "type code " + std::to_string(code) + " of " + b + " bits";
  }
}

std::string ArrayView::device_name() const {
  switch (device_type) {
    case 1: return "cpu";
    case 2: return "cuda:" + std::to_string(device_id);
    case 3: return "cuda host memory";
    case 10: return "rocm:" + std::to_string(device_id);
    default: return "device type " + std::to_string(device_type);
  }
}

std::string ArrayView::shape_text() const {
  std::ostringstream o;
  o << "(";
  for (int i = 0; i < ndim; ++i) o << (i ? ", " : "") << shape[i];
  o << (ndim == 1 ? ",)" : ")");
  return o.str();
}

bool ArrayView::c_contiguous() const {
  if (size == 0) return true;  // nothing to lay out (NumPy gives an empty array's strides as 0)
  std::int64_t expect = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

bool ArrayView::f_contiguous() const {
  if (size == 0) return true;
  std::int64_t expect = 1;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

namespace {

// __cuda_array_interface__ (version 2 or 3): shape, typestr, data = (address, read-only), strides in bytes or None.
bool view_cuda_array_interface(nb::handle obj, ArrayView& out) {
  if (!nb::hasattr(obj, "__cuda_array_interface__")) return false;
  nb::dict cai = nb::cast<nb::dict>(obj.attr("__cuda_array_interface__"));
  nb::tuple shape = nb::cast<nb::tuple>(cai["shape"]);
  std::string typestr = nb::cast<std::string>(cai["typestr"]);
  nb::tuple data = nb::cast<nb::tuple>(cai["data"]);
  if (shape.size() > ArrayView::kMaxDims) throw nb::value_error("an array of more than 8 dimensions");
  if (typestr.size() < 3 || (typestr[0] != '<' && typestr[0] != '|'))
    throw nb::value_error(("__cuda_array_interface__ typestr '" + typestr + "' is not little-endian").c_str());
  const std::string size_text = typestr.substr(2);
  if (size_text.empty() || size_text.size() > 2 || size_text.find_first_not_of("0123456789") != std::string::npos)
    throw nb::value_error(("__cuda_array_interface__ typestr '" + typestr + "' has no element size").c_str());
  const int bytes = std::stoi(size_text);
  if (bytes < 1 || bytes > 16) throw nb::value_error(("__cuda_array_interface__ typestr '" + typestr + "': elements of 1 to 16 bytes").c_str());
  switch (typestr[1]) {
    case 'f': out.code = 2; break;
    case 'i': out.code = 0; break;
    case 'u': out.code = 1; break;
    case 'b': out.code = 6; break;
    case 'c': out.code = 5; break;
    default: out.code = 255;
  }
  out.bits = static_cast<std::uint8_t>(bytes * 8);
  out.data = reinterpret_cast<const void*>(nb::cast<std::uintptr_t>(data[0]));
  out.readonly = nb::cast<bool>(data[1]);
  out.device_type = 2;
  out.device_id = 0;  // the interface does not say; the pointer's own device is what the driver uses
  out.ndim = static_cast<int>(shape.size());
  out.size = 1;
  for (int i = 0; i < out.ndim; ++i) {
    out.shape[i] = nb::cast<std::int64_t>(shape[i]);
    if (out.shape[i] < 0 || __builtin_mul_overflow(out.size, out.shape[i], &out.size))
      throw nb::value_error("__cuda_array_interface__ shape with a negative or too large dimension");
  }
  nb::object strides = cai.contains("strides") ? nb::borrow(cai["strides"]) : nb::none();
  if (strides.is_none()) {
    std::int64_t s = 1;
    for (int i = out.ndim - 1; i >= 0; --i) out.strides[i] = s, s *= out.shape[i];
  } else {
    nb::tuple st = nb::cast<nb::tuple>(strides);
    if (st.size() != shape.size()) throw nb::value_error("__cuda_array_interface__ strides and shape differ in length");
    for (int i = 0; i < out.ndim; ++i) {
      const std::int64_t b = nb::cast<std::int64_t>(st[i]);
      if (b % bytes != 0) throw nb::value_error("__cuda_array_interface__ strides that are not whole elements");
      out.strides[i] = b / bytes;
    }
  }
  return true;
}

template <class A> void fill(const A& a, ArrayView& out) {
  if (a.ndim() > static_cast<std::size_t>(ArrayView::kMaxDims)) throw nb::value_error("an array of more than 8 dimensions");
  out.data = a.data();
  out.device_type = a.device_type();
  out.device_id = a.device_id();
  out.device_known = true;
  out.code = a.dtype().code;
  out.bits = a.dtype().bits;
  out.ndim = static_cast<int>(a.ndim());
  out.size = 1;
  for (int i = 0; i < out.ndim; ++i) {
    out.shape[i] = static_cast<std::int64_t>(a.shape(static_cast<std::size_t>(i)));
    out.strides[i] = a.stride(static_cast<std::size_t>(i));
    out.size *= out.shape[i];
  }
}

// The buffer protocol: format characters by kind (struct module's), sizes from itemsize.
bool view_buffer(nb::handle obj, ArrayView& out) {
  PyTypeObject* tp = Py_TYPE(obj.ptr());
  if (!tp->tp_as_buffer || !tp->tp_as_buffer->bf_getbuffer) return false;
  auto view = std::unique_ptr<Py_buffer, BufferRelease>(nullptr);
  auto* raw = new Py_buffer;
  if (PyObject_GetBuffer(obj.ptr(), raw, PyBUF_RECORDS_RO) != 0) {
    delete raw;
    PyErr_Clear();
    return false;
  }
  view.reset(raw);
  const char* f = raw->format ? raw->format : "B";
  if (*f == '<' || *f == '=' || *f == '@') ++f;
  if (raw->ndim > ArrayView::kMaxDims) throw nb::value_error("an array of more than 8 dimensions");
  if (f[0] == '\0' || f[1] != '\0' || raw->itemsize <= 0 || raw->itemsize > 16) return false;  // not one plain type: DLPack may know it
  switch (f[0]) {
    case 'e': case 'f': case 'd': out.code = 2; break;
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': out.code = 0; break;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': out.code = 1; break;
    case '?': out.code = 6; break;
    case 'Z': out.code = 5; break;
    default: return false;
  }
  out.bits = static_cast<std::uint8_t>(raw->itemsize * 8);
  out.data = raw->buf;
  out.device_type = 1;
  out.device_id = 0;
  out.readonly = raw->readonly != 0;
  out.ndim = raw->ndim;
  out.size = 1;
  for (int i = 0; i < out.ndim; ++i) {
    out.shape[i] = raw->shape[i];
    out.size *= out.shape[i];
    const Py_ssize_t st = raw->strides ? raw->strides[i] : 0;
    if (st % raw->itemsize != 0) throw nb::value_error("an array whose strides are not whole elements");
    out.strides[i] = st / raw->itemsize;
  }
  if (!raw->strides) {
    std::int64_t e = 1;
    for (int i = out.ndim - 1; i >= 0; --i) out.strides[i] = e, e *= out.shape[i];
  }
  out.buffer = std::move(view);
  return true;
}

// torch.Tensor through its attributes: data_ptr(), shape, stride(), dtype, get_device().
struct TorchTypes {
  PyTypeObject* tensor = nullptr;
  nb::object dtypes[8];
  std::uint8_t codes[8] = {}, bits[8] = {};
  int count = 0;
};
const TorchTypes* torch_types() {
  static TorchTypes t;
  static bool ready = false;
  if (ready) return t.tensor ? &t : nullptr;
  PyObject* mod = PyImport_GetModule(nb::str("torch").ptr());  // only once torch is imported by someone
  if (!mod) {
    PyErr_Clear();
    return nullptr;
  }
  nb::object torch = nb::steal(mod);
  t.tensor = reinterpret_cast<PyTypeObject*>(torch.attr("Tensor").ptr());
  const std::pair<const char*, std::pair<int, int>> known[] = {
      {"float32", {2, 32}}, {"bfloat16", {4, 16}}, {"float16", {2, 16}}, {"float64", {2, 64}},
      {"int32", {0, 32}},   {"int64", {0, 64}},    {"uint8", {1, 8}},    {"bool", {6, 8}}};
  for (const auto& [name, cb] : known) {
    t.dtypes[t.count] = torch.attr(name);
    t.codes[t.count] = static_cast<std::uint8_t>(cb.first), t.bits[t.count] = static_cast<std::uint8_t>(cb.second);
    ++t.count;
  }
  ready = true;
  return &t;
}

bool view_torch(nb::handle obj, ArrayView& out) {
  const TorchTypes* t = torch_types();
  if (!t || !PyType_IsSubtype(Py_TYPE(obj.ptr()), t->tensor)) return false;
  nb::object dtype = obj.attr("dtype");
  int which = -1;
  for (int i = 0; i < t->count; ++i)
    if (dtype.ptr() == t->dtypes[i].ptr()) which = i;
  if (which < 0) return false;  // another type: DLPack says which
  nb::object shape = obj.attr("shape"), strides = obj.attr("stride")();
  const Py_ssize_t ndim = PyTuple_GET_SIZE(shape.ptr());
  if (ndim > ArrayView::kMaxDims) throw nb::value_error("an array of more than 8 dimensions");
  out.code = t->codes[which], out.bits = t->bits[which];
  out.ndim = static_cast<int>(ndim);
  out.size = 1;
  for (int i = 0; i < out.ndim; ++i) {
    out.shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape.ptr(), i));
    out.strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides.ptr(), i));
    out.size *= out.shape[i];
  }
  const long long device = nb::cast<long long>(obj.attr("get_device")());
  out.device_type = device < 0 ? 1 : 2;  // CPU or CUDA (other devices say -1 too only on CPU; ROCm builds report CUDA)
  out.device_id = device < 0 ? 0 : static_cast<int>(device);
  out.device_known = device >= 0;
  out.data = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(nb::cast<unsigned long long>(obj.attr("data_ptr")())));
  out.readonly = false;
  if (PyErr_Occurred()) throw nb::python_error();
  return true;
}

}  // namespace

bool view_array(nb::handle obj, bool writable, ArrayView& out) {
  out.readonly = false;
  if (view_buffer(obj, out)) {
    if (!writable) out.readonly = false;
    return true;
  }
  if (view_torch(obj, out)) return true;
  if (writable && nb::try_cast<nb::ndarray<>>(obj, out.held_writable)) {
    fill(out.held_writable, out);
    return true;
  }
  // Read-only sources (a NumPy array with writeable=False) import only for reading.
  if (nb::try_cast<nb::ndarray<nb::ro>>(obj, out.held)) {
    fill(out.held, out);
    out.readonly = writable;
    return true;
  }
  return view_cuda_array_interface(obj, out);
}

}  // namespace jitk_py
