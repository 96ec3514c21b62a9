// CUDA helpers for users of GPU kernels: device discovery, device arrays, streams (no CUDA headers needed).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "jit/jit.hpp"

namespace jit::cuda {

// Whether jit::get can run kernels on an NVIDIA GPU here, and if not, why.
bool available();
std::string unavailable_reason();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string arch;  // "sm_90"
  int sm_count = 0;
  int shared_mem_per_block = 0, shared_mem_per_block_optin = 0;
  std::size_t total_mem = 0;
};
std::vector<DeviceInfo> devices();

// Waits for all work on the device.
void synchronize(int device = 0);

namespace detail {
void* allocate(std::size_t bytes, int device);
void release(void* p, int device) noexcept;
void copy_to_device(void* dst, const void* src, std::size_t bytes, int device);
void copy_to_host(void* dst, const void* src, std::size_t bytes, int device);
void fill_bytes(void* dst, unsigned char value, std::size_t bytes, int device);
}  // namespace detail

// n elements of T in device memory, freed at the end of the scope. data() is a device address,
// usable as a kernel argument, never dereferenced on the host.
template <class T> class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n, int device = 0)
      : data_(static_cast<T*>(detail::allocate(n * sizeof(T), device))), size_(n), device_(device) {}
  explicit DeviceArray(const std::vector<T>& host, int device = 0) : DeviceArray(host.size(), device) { upload(host); }
  ~DeviceArray() { detail::release(data_, device_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept : data_(o.data_), size_(o.size_), device_(o.device_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  DeviceArray& operator=(DeviceArray&&) = delete;

  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  void upload(const std::vector<T>& host) {
    if (host.size() != size_) throw Error(ErrorCode::InvalidArgument, "DeviceArray::upload: size differs");
    detail::copy_to_device(data_, host.data(), size_ * sizeof(T), device_);
  }
  std::vector<T> download() const {  // synchronous: waits for work queued before it
    std::vector<T> host(size_);
    detail::copy_to_host(host.data(), data_, size_ * sizeof(T), device_);
    return host;
  }
  void fill_bytes(unsigned char value) { detail::fill_bytes(data_, value, size_ * sizeof(T), device_); }

 private:
  T* data_;
  std::size_t size_;
  int device_;
};

// A stream of the library's own, destroyed at the end of the scope; converts to jit::Stream.
class OwnedStream {
 public:
  explicit OwnedStream(int device = 0);
  ~OwnedStream();
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  operator Stream() const { return {handle_}; }
  void synchronize() const;

 private:
  void* handle_ = nullptr;
  int device_;
};

// Times the work queued on a stream between start() and stop_ms() with a pair of device events:
// the GPU's own clock, not the host's (launch overhead stays out while the GPU's queue runs ahead
// of the host, i.e. for kernels longer than a launch).
class Timer {
 public:
  explicit Timer(int device = 0);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  void start(Stream stream = {});
  double stop_ms(Stream stream = {});  // waits for the work queued before it

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
  int device_;
};

// A CUDA graph: the launches a function queues on a stream, recorded once (stream capture) and
// replayed with one launch. A decode step of ten small kernels is bound by their launch costs; its
// graph replays them back to back. Any jit::Kernel launch on the captured stream is recorded
// (jitk's launches are asynchronous and allocate nothing outside the stream). Rules, as CUDA's:
// capture on a stream of the caller's (not the default stream); run each kernel once before the
// capture (its first launch loads its module: jit::get and that launch must not happen while the
// stream captures); a replay reads and writes the same pointers and sees the scalars the capture
// saw (put values that change between steps in device memory, e.g. context lengths).
//   jit::cuda::OwnedStream stream;
//   step(stream);                                             // warm: every get and module load
//   auto graph = jit::cuda::Graph::capture(stream, [&] { step(stream); });
//   for (...) graph.replay(stream);
class Graph {
 public:
  template <class Record> static Graph capture(Stream stream, Record&& record, int device = 0) {
    Graph g(stream, device);  // begins the capture
    try {
      record();
    } catch (...) {
      g.abandon();
      throw;
    }
    g.finish();
    return g;
  }
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();
  void replay(Stream stream = {}) const;  // asynchronous, like a launch

 private:
  Graph(Stream stream, int device);
  void finish();
  void abandon() noexcept;
  void* stream_ = nullptr;
  void* graph_ = nullptr;
  void* exec_ = nullptr;
  int device_ = 0;
};

}  // namespace jit::cuda
