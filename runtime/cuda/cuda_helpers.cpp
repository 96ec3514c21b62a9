// jit::cuda: the public helpers (devices, memory, copies, streams, timers) over the driver API.
#include "jit/cuda.hpp"
#include "jit/cuda/nvrtc_compiler.hpp"
#include "runtime/cuda/cuda_api.hpp"

#include <new>
#include <optional>
#include <utility>

namespace jit::cuda {

using namespace jit::detail::cuda;

namespace {
const DriverApi& api_or_throw() {
  std::string reason;
  const DriverApi* api = driver_api(&reason);
  if (!api) throw Error(ErrorCode::BackendUnavailable, "CUDA is unavailable: " + reason);
  return *api;
}
}  // namespace

bool available() { return unavailable_reason().empty(); }

std::string unavailable_reason() {
  std::string reason;
  if (!driver_api(&reason)) return reason;
  return jit::detail::NvrtcCompiler::unavailable_reason(probe_memos().get());
}

std::vector<DeviceInfo> devices() {
  std::vector<DeviceInfo> out;
  for (const auto& d : jit::detail::cuda::devices())
    out.push_back({d.ordinal, d.name, d.arch(), d.sm_count, d.shared_mem_per_block, d.shared_mem_per_block_optin, d.total_mem});
  return out;
}

void synchronize(int device) {
  const DriverApi& api = api_or_throw();
  const ContextScope context_scope(device);
  check(api.cuCtxSynchronize(), "cuCtxSynchronize");
}

namespace detail {
void* allocate(std::size_t bytes, int device) {
  const DriverApi& api = api_or_throw();
  const ContextScope context_scope(device);
  CUdeviceptr p = 0;
  check(api.cuMemAlloc(&p, bytes == 0 ? 1 : bytes), "cuMemAlloc");
  return reinterpret_cast<void*>(p);
}
void release(void* p, int device) noexcept {
  if (const DriverApi* api = driver_api(); api && p) {
    std::optional<ContextScope> scope;
    try {
      scope.emplace(device);
    } catch (...) {
    }
    api->cuMemFree(reinterpret_cast<CUdeviceptr>(p));
  }
}
void copy_to_device(void* dst, const void* src, std::size_t bytes, int device) {
  const DriverApi& api = api_or_throw();
  const ContextScope context_scope(device);
  check(api.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, bytes), "cuMemcpyHtoD");
}
void copy_to_host(void* dst, const void* src, std::size_t bytes, int device) {
  const DriverApi& api = api_or_throw();
  const ContextScope context_scope(device);
  check(api.cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoH");
}
void fill_bytes(void* dst, unsigned char value, std::size_t bytes, int device) {
  const DriverApi& api = api_or_throw();
  const ContextScope context_scope(device);
  check(api.cuMemsetD8(reinterpret_cast<CUdeviceptr>(dst), value, bytes), "cuMemsetD8");
}
}  // namespace detail

OwnedStream::OwnedStream(int device) : device_(device) {
  const DriverApi& api = api_or_throw();
  const ContextScope context_scope(device);
  CUstream s = nullptr;
  check(api.cuStreamCreate(&s, 0), "cuStreamCreate");
  handle_ = s;
}
OwnedStream::~OwnedStream() {
  if (const DriverApi* api = driver_api(); api && handle_) api->cuStreamDestroy(static_cast<CUstream>(handle_));
}
void OwnedStream::synchronize() const {
  check(api_or_throw().cuStreamSynchronize(static_cast<CUstream>(handle_)), "cuStreamSynchronize");
}

Timer::Timer(int device) : device_(device) {
  const DriverApi& api = api_or_throw();
  const ContextScope context_scope(device);
  CUevent a = nullptr, b = nullptr;
  check(api.cuEventCreate(&a, 0), "cuEventCreate");
  if (const CUresult r = api.cuEventCreate(&b, 0); r != CUDA_SUCCESS) {
    api.cuEventDestroy(a);
    check(r, "cuEventCreate");
  }
  start_ = a, stop_ = b;
}
Timer::~Timer() {
  if (const DriverApi* api = driver_api()) {
    if (start_) api->cuEventDestroy(static_cast<CUevent>(start_));
    if (stop_) api->cuEventDestroy(static_cast<CUevent>(stop_));
  }
}
void Timer::start(Stream stream) {
  const ContextScope context_scope(device_);
  check(api_or_throw().cuEventRecord(static_cast<CUevent>(start_), static_cast<CUstream>(stream.handle)), "cuEventRecord");
}
double Timer::stop_ms(Stream stream) {
  const DriverApi& api = api_or_throw();
  const ContextScope context_scope(device_);
  check(api.cuEventRecord(static_cast<CUevent>(stop_), static_cast<CUstream>(stream.handle)), "cuEventRecord");
  check(api.cuEventSynchronize(static_cast<CUevent>(stop_)), "cuEventSynchronize");
  float ms = 0;
  check(api.cuEventElapsedTime(&ms, static_cast<CUevent>(start_), static_cast<CUevent>(stop_)), "cuEventElapsedTime");
  return ms;
}

namespace {
const DriverApi& graph_api() {
  const DriverApi& api = api_or_throw();
  if (!api.cuStreamBeginCapture || !api.cuStreamEndCapture || !api.cuGraphInstantiateWithFlags || !api.cuGraphLaunch ||
      !api.cuGraphExecDestroy || !api.cuGraphDestroy)
    throw Error(ErrorCode::BackendUnavailable, "CUDA graphs are unavailable: this driver lacks stream capture (CUDA 11.4 or newer needed)");
  return api;
}
}  // namespace

Graph::Graph(Stream stream, int device) : stream_(stream.handle), device_(device) {
  if (!stream.handle)
    throw Error(ErrorCode::InvalidArgument,
                "jit::cuda::Graph::capture: the default stream cannot be captured; pass a stream of your own (jit::cuda::OwnedStream)");
  const DriverApi& api = graph_api();
  const ContextScope context_scope(device);
  check(api.cuStreamBeginCapture(static_cast<CUstream>(stream_), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
}
void Graph::finish() {
  const DriverApi& api = graph_api();
  const ContextScope context_scope(device_);  // instantiated in the device's context
  CUgraph graph = nullptr;
  const CUresult r = api.cuStreamEndCapture(static_cast<CUstream>(stream_), &graph);
  stream_ = nullptr;
  check(r, "cuStreamEndCapture (a launch in the capture failed or synchronized: see jit/cuda.hpp's Graph for the rules)");
  graph_ = graph;
  CUgraphExec exec = nullptr;
  check(api.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
  exec_ = exec;
}
void Graph::abandon() noexcept {
  const DriverApi* api = driver_api();
  if (!api || !stream_) return;
  CUgraph graph = nullptr;
  api->cuStreamEndCapture(static_cast<CUstream>(stream_), &graph);  // ends it, failed or not
  if (graph) api->cuGraphDestroy(graph);
  stream_ = nullptr;
}
Graph::Graph(Graph&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), graph_(std::exchange(other.graph_, nullptr)),
      exec_(std::exchange(other.exec_, nullptr)), device_(other.device_) {}
Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    this->~Graph();
    new (this) Graph(std::move(other));
  }
  return *this;
}
Graph::~Graph() {
  const DriverApi* api = driver_api();
  if (!api) return;
  abandon();
  if (exec_) api->cuGraphExecDestroy(static_cast<CUgraphExec>(exec_));
  if (graph_) api->cuGraphDestroy(static_cast<CUgraph>(graph_));
  exec_ = graph_ = nullptr;
}
void Graph::replay(Stream stream) const {
  const DriverApi& api = graph_api();
  const ContextScope context_scope(device_);
  check(api.cuGraphLaunch(static_cast<CUgraphExec>(exec_), static_cast<CUstream>(stream.handle)), "cuGraphLaunch");
}

}  // namespace jit::cuda
