// Internal header of the skeleton plugin: the smallest complete flagos
// plugin, over plain host memory. A vendor copies this folder, renames it,
// and replaces each marked body with calls into its SDK (docs/vendor-guide.md
// walks through it). Nothing here crosses the ABI: the core sees only the C
// tables entry.cpp hands out.
//
//   entry.cpp   the exported entry point (the kit's) and the table list
//   device.cpp  device table: probe, init, properties, current device
//   memory.cpp  memory table: malloc/free, copies, fill, memory info
//   stream.cpp  stream table: streams (one worker thread each) and events
//
// The "device" is one worker thread per stream running tasks in order, so
// asynchrony is real (streamQuery sees pending work, events order streams),
// as it is on an accelerator.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "flagos/vendor.h"
#include "flagos_kit/error.h"
#include "flagos_kit/handle.h"
#include "flagos_kit/markers.h"
#include "flagos_kit/tables.h"

namespace flagos_skeleton {

using flagos_kit::fail;
using flagos_kit::guard;

constexpr const char* kVersion = "0.1.0";
// Bytes one device hands out (SDK: the device's memory size).
constexpr uint64_t kCapacity = uint64_t{1} << 30;

struct Device {
  int32_t index = 0;
  std::mutex mu;                       // guards the members below
  std::map<uintptr_t, uint64_t> live;  // allocation start -> bytes
  uint64_t allocated = 0;              // sum of live
  std::set<flagosStream_t> streams;    // for device-wide synchronize
};

// The device of @p index after init(); records a message naming @p call and
// returns nullptr when not initialized or out of range.
Device* findDevice(const char* call, int32_t index) noexcept;
// Is [ptr, ptr + bytes) inside one live allocation of any device? One past
// the end is accepted (memory.h). Records a message naming @p call if not.
bool isDeviceRange(const char* call, const void* ptr, uint64_t bytes) noexcept;

const flagosDeviceTable* deviceTable();
const flagosMemoryTable* memoryTable();
const flagosStreamTable* streamTable();

}  // namespace flagos_skeleton

// A stream: tasks run in order on its worker thread. A task returns its
// status; the first failure is kept and reported by the next synchronize or
// query (vendor.h: "reported once ..., then cleared").
struct flagosStream_st {
  using Task = std::function<flagosStatus_t()>;
  explicit flagosStream_st(int32_t device);
  ~flagosStream_st();  // finishes queued work, joins the worker

  void enqueue(Task task);
  // Enqueues the completion of @p marker (eventRecord; flagos_kit::Marker,
  // markers.h). It completes under the stream's lock right after the stream
  // counts it done, so once eventSynchronize returns, streamQuery agrees the
  // record is done.
  void enqueueMark(std::shared_ptr<flagos_kit::Marker> marker);
  flagosStatus_t synchronize();
  flagosStatus_t query();

  static constexpr uint32_t kMagic = flagos_kit::magicOf("SKST");  // handle.h
  uint32_t magic = kMagic;
  const int32_t device;

 private:
  void run();
  flagosStatus_t takeError();  // mu_ held

  std::mutex mu_;
  std::condition_variable cv_;
  struct Item {
    Task task;
    std::shared_ptr<flagos_kit::Marker> marker;  // or nullptr
  };
  std::deque<Item> queue_;
  uint64_t queued_ = 0, done_ = 0;
  bool stop_ = false;
  flagosStatus_t error_ = FLAGOS_SUCCESS;
  std::string error_message_;
  std::thread worker_;  // last: starts once the members above exist
};

// An event: the marker of its last record (kit/flagos_kit/markers.h).
struct flagosEvent_st : flagos_kit::MarkerEvent<flagos_kit::magicOf("SKEV")> {};
