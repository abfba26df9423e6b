// The stream registry: PyTorch (device, stream id) <-> vendor stream handle,
// and the per-thread current stream of each device. See stream.h.
#include "runtime/stream.h"

#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/backend.h"
#include "runtime/lifecycle.h"
#include "runtime/stream_registry.h"

namespace flagos {
namespace {

// Note [Stream ids and the stream pool]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Id 0 of each device is its default stream, created by initialize().
// Every other stream comes from a small per-device pool, handed out round
// robin by getNewStream/getStreamFromGlobalPool (as CUDA does): PyTorch
// never destroys a stream it asked for, and on the host plugin each vendor
// stream owns a worker thread, so an unbounded number would leak threads.
// Id 1 + level * kPoolSize + i names pool stream i of a priority level
// (0 normal, 1 high); pool streams are created on first use.
constexpr int kPoolSize = 4;
constexpr int kLevels = 2;
constexpr c10::StreamId kMaxId = kLevels * kPoolSize;

struct DeviceStreams {
  int32_t physical = 0;
  flagosStream_t default_stream = nullptr;
  std::mutex create_mutex;
  std::array<std::array<std::atomic<flagosStream_t>, kPoolSize>, kLevels> pool{};
  std::array<std::atomic<uint32_t>, kLevels> next{};
};

// Set once by createDefaultStreams (before the backend is marked ready) and
// never freed: streams may be used during static destruction.
std::vector<std::unique_ptr<DeviceStreams>>* g_devices = nullptr;

thread_local std::vector<c10::StreamId> tl_current;

DeviceStreams& devStreams(c10::DeviceIndex device) {
  TORCH_CHECK(g_devices != nullptr && isInitialized(),
              "flagos: the backend is not initialized; call flagos_torchfl.initialize() first");
  TORCH_CHECK(!inForkedChild(), kForkedChildError);  // every launch asks for its stream
  TORCH_CHECK(device >= 0 && static_cast<size_t>(device) < g_devices->size(),
              "flagos: invalid device index ", static_cast<int>(device));
  return *(*g_devices)[device];
}

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  return device < 0 ? currentDevice() : device;
}

flagosStream_t poolStream(DeviceStreams& ds, int level, int index) {
  flagosStream_t s = ds.pool[level][index].load(std::memory_order_acquire);
  if (s != nullptr) return s;
  std::lock_guard<std::mutex> lock(ds.create_mutex);
  s = ds.pool[level][index].load(std::memory_order_relaxed);
  if (s == nullptr) {
    check(backend().tables.stream->streamCreate(ds.physical, level == 1 ? -1 : 0, &s),
          "streamCreate");
    ds.pool[level][index].store(s, std::memory_order_release);
  }
  return s;
}

c10::Stream makeStream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

}  // namespace

flagosStream_t vendorStream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "flagos: expected a flagos stream, got one on ", stream.device());
  DeviceStreams& ds = devStreams(stream.device_index());
  const c10::StreamId id = stream.id();
  if (id == 0) return ds.default_stream;
  TORCH_CHECK(id > 0 && id <= kMaxId, "flagos: unknown stream id ", id, " on device ",
              static_cast<int>(stream.device_index()));
  return poolStream(ds, static_cast<int>((id - 1) / kPoolSize),
                    static_cast<int>((id - 1) % kPoolSize));
}

c10::Stream currentStream(c10::DeviceIndex device) {
  device = resolve(device);
  devStreams(device);  // validates the index
  if (tl_current.size() <= static_cast<size_t>(device)) return makeStream(device, 0);
  return makeStream(device, tl_current[device]);
}

flagosStream_t currentVendorStream(c10::DeviceIndex device) {
  device = resolve(device);
  DeviceStreams& ds = devStreams(device);  // validates the index
  const c10::StreamId id =
      tl_current.size() <= static_cast<size_t>(device) ? 0 : tl_current[device];
  if (id == 0) return ds.default_stream;
  return poolStream(ds, static_cast<int>((id - 1) / kPoolSize),
                    static_cast<int>((id - 1) % kPoolSize));
}

c10::Stream defaultStream(c10::DeviceIndex device) {
  device = resolve(device);
  devStreams(device);
  return makeStream(device, 0);
}

void setCurrentStream(const c10::Stream& stream) {
  vendorStream(stream);  // validates (and creates a pool stream on first use)
  const auto device = static_cast<size_t>(stream.device_index());
  if (tl_current.size() <= device) tl_current.resize(g_devices->size(), 0);
  tl_current[device] = stream.id();
}

c10::Stream newStream(c10::DeviceIndex device, int priority) {
  device = resolve(device);
  DeviceStreams& ds = devStreams(device);
  const int level = priority < 0 ? 1 : 0;
  const int index = static_cast<int>(ds.next[level].fetch_add(1) % kPoolSize);
  poolStream(ds, level, index);
  return makeStream(device, 1 + level * kPoolSize + index);
}

namespace detail {

void createDefaultStreams(const Backend& backend) {
  auto devices = std::make_unique<std::vector<std::unique_ptr<DeviceStreams>>>();
  for (int32_t physical : backend.physical_ids) {
    auto ds = std::make_unique<DeviceStreams>();
    ds->physical = physical;
    flagosStatus_t st = backend.tables.stream->streamCreate(physical, 0, &ds->default_stream);
    check(st, "streamCreate (default stream)");
    devices->push_back(std::move(ds));
  }
  g_devices = devices.release();
}

}  // namespace detail
}  // namespace flagos
