// The routing layer of the communication plane: the flat operations the c10d
// backend (backend.h) hands to a route, and the two routes that run them.
//
//   vendor  the active plugin's collectives table (NCCL-like, enqueued on a
//           flagos stream); vendor_route.cpp
//   host    stage through host memory and run the op on an inner gloo
//           backend; host_route.cpp
//
// FLAGOS_COMM=auto|vendor|host picks one per process group (auto: vendor when
// the plugin has a collectives table). See README.md in this folder.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "flagos_kit/collective_kind.h"

namespace flagos::comm {

// The name the backend is registered under (dist.Backend.register_backend).
inline constexpr const char* kBackendName = "fccl";

enum class Mode { kAuto, kVendor, kHost };
enum class RouteKind { kVendor, kHost };

// FLAGOS_COMM: "auto" (or unset/empty), "vendor" or "host", any case.
// Throws c10::Error naming the valid values otherwise.
Mode modeFromEnv();
const char* modeName(Mode mode);
const char* routeName(RouteKind route);
// The route `mode` selects for the active plugin. Throws c10::Error when
// mode is kVendor and the plugin has no collectives table.
RouteKind chooseRoute(Mode mode);
// The active plugin's collectives library ("host-shm"), "" if it has none.
std::string vendorLibrary();

// Note [Flat operations]
// ~~~~~~~~~~~~~~~~~~~~~~
// Every c10d call becomes one or more Ops on contiguous 1-D-equivalent
// buffers, all on the task's device; lists, uneven sizes, non-contiguous
// tensors and PREMUL_SUM are resolved by the backend before a route sees
// them (copies on the issuing stream before, `Task::finish` steps after).
//   kAllReduce      input == output, in place
//   kBroadcast      root sends `input`; every rank receives into `output`
//                   (root too; may alias input)
//   kReduce         every rank contributes `input`; `output` at root only
//   kAllGather      input n elements -> output size*n, rank-major
//   kReduceScatter  input size*n -> output n (block `rank`)
//   kAllToAll       input split by send_counts -> output split by recv_counts
//   kGather         input n -> output size*n at root only
//   kScatter        input size*n at root only -> output n
//   kSend, kRecv    input to / output from `peer`
//   kBarrier        no data (the vendor route reduces one scratch element)
// `count` is the per-rank element count every rank must agree on (checked by
// the host route, Note [Descriptors] in host_route.cpp); -1 for kAllToAll,
// whose counts are checked pairwise.
// The kinds of flat operation, named once with the plugins' collective
// libraries (flagos_kit/collective_kind.h); the core runs every kind but
// kSendRecv (its sends and receives are single operations).
using Kind = flagos_kit::CollectiveKind;
inline const char* kindName(Kind kind) {
  return flagos_kit::collectiveName(kind);
}
inline bool isP2P(Kind kind) {
  return kind == Kind::kSend || kind == Kind::kRecv;
}

struct Op {
  Kind kind = Kind::kBarrier;
  at::Tensor input;
  at::Tensor output;
  c10d::ReduceOp::RedOpType reduce = c10d::ReduceOp::SUM;
  int root = -1;
  int peer = -1;
  int tag = 0;
  int64_t count = 0;
  std::vector<int64_t> send_counts, recv_counts;  // kAllToAll, elements per rank
};

// One unit of work for the worker thread: what one c10d call (or one
// coalesced block) became.
struct Task {
  std::string name;       // the torch.distributed name: "all_reduce", ...
  uint64_t seq = 0;       // this group's task number (all tasks)
  uint64_t coll_seq = 0;  // this group's collective number (tasks that involve every rank)
  c10::DeviceIndex device = 0;
  std::vector<Op> ops;
  // Run on the communication stream after the route's ops (copies into
  // list outputs, non-contiguous outputs, ...).
  std::vector<std::function<void()>> finish;
  // Recorded on the issuing thread's current stream once the inputs are
  // prepared: the route must not read them before it completes.
  c10::Event ready{c10::DeviceType::PrivateUse1};

  bool involvesAll() const;
  // "all_reduce #3 (flagos:0, 4 x float32, sum)"
  std::string describe() const;
};

// A failure a route reports; the worker wraps it (Note [Comm error messages]
// in backend.cpp).
class CommFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a route knows about its process group.
struct GroupInfo {
  c10::intrusive_ptr<c10d::Store> store;  // the group's prefixed store
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{300000};
  std::string name;  // group name, for messages
};

class Route {
 public:
  virtual ~Route() = default;
  virtual RouteKind kind() const = 0;
  // Library doing the transfers: the plugin's ("host-shm") or "gloo".
  virtual std::string library() const = 0;
  // Runs `task` on the worker thread with `stream` (the task device's
  // communication stream) current. Must not read inputs before
  // task.ready completed. The vendor route enqueues on `stream` and returns;
  // the host route finishes the transfers. Throws CommFailure (or c10::Error).
  virtual void run(Task& task, const c10::Stream& stream) = 0;
  // Make pending and future operations fail at once (no rank hangs).
  virtual void abort() noexcept = 0;
  // Release communicators; the worker has drained.
  virtual void shutdown() noexcept = 0;
};

std::unique_ptr<Route> makeVendorRoute(const GroupInfo& group);
// `gloo` is a CPU backend of the same ranks (a ProcessGroupGloo made by the
// Python side on a sub-prefix of the group's store).
std::unique_ptr<Route> makeHostRoute(const GroupInfo& group,
                                     c10::intrusive_ptr<c10d::Backend> gloo);

// Helpers shared by the routes.
std::string describeReduce(c10d::ReduceOp::RedOpType op);
// A c10::Error's message without its C++ backtrace; what() for others.
std::string messageOf(const std::exception& e);

}  // namespace flagos::comm
