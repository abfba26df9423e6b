// The vendor route: the active plugin's collectives table (collectives.h,
// modelled on NCCL), enqueued on the task device's communication stream.
//
// Note [Vendor communicators]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// One communicator per (group, device), created at the group's first
// operation on that device, on the worker thread: rank 0 asks the library
// for a unique id and publishes it under "fccl/uid/<n>" in the group's
// store; the others wait for it (up to the group timeout, then fail naming
// rank 0); every rank then calls commInitRank with the group timeout, which
// the library also applies to every later wait on a peer, so that a missing
// rank yields FLAGOS_ERROR_TIMEOUT naming it instead of a hang. All ranks
// must therefore take part in the first operation on a device within the
// timeout; with more than two ranks a send/recv between two of them
// creates the communicator too, and waits for the others to do anything.
//
// What the table lacks is composed, as NCCL's process group does: uneven
// all_to_all, gather and scatter become sends and receives inside one
// groupStart/groupEnd (the rank's own block is a device copy); an even
// all_to_all uses allToAll when the plugin has it. bool reductions run on
// uint8 (sum/max -> max, product/min -> min); complex sum/avg run on the
// real view.
#include <ATen/ATen.h>

#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "comm/comm.h"
#include "runtime/backend.h"
#include "runtime/dtype.h"
#include "runtime/stream.h"

namespace flagos::comm {
namespace {

const char* statusName(flagosStatus_t status) {
  switch (status) {
    case FLAGOS_ERROR_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case FLAGOS_ERROR_NOT_SUPPORTED:
      return "NOT_SUPPORTED";
    case FLAGOS_ERROR_OUT_OF_MEMORY:
      return "OUT_OF_MEMORY";
    case FLAGOS_ERROR_DEVICE:
      return "DEVICE";
    case FLAGOS_ERROR_TIMEOUT:
      return "TIMEOUT";
    case FLAGOS_ERROR_INTERNAL:
      return "INTERNAL";
    default:
      return "error";
  }
}

flagosDtype_t dtypeOf(const at::Tensor& t) {
  auto dtype = toVendorDtype(t.scalar_type());
  if (!dtype) {
    throw CommFailure(std::string("the vendor route cannot move ") +
                      c10::toString(t.scalar_type()) + " tensors (set FLAGOS_COMM=host)");
  }
  return *dtype;
}

// How a reduction of `type` with `op` runs in the library.
struct Reduction {
  flagosDtype_t dtype;
  uint64_t scale;  // library elements per tensor element
  flagosRedOp_t op;
};

Reduction reductionOf(const at::Tensor& t, c10d::ReduceOp::RedOpType op) {
  flagosRedOp_t red = 0;
  switch (op) {
    case c10d::ReduceOp::SUM:
      red = FLAGOS_RED_SUM;
      break;
    case c10d::ReduceOp::AVG:
      red = FLAGOS_RED_AVG;
      break;
    case c10d::ReduceOp::PRODUCT:
      red = FLAGOS_RED_PROD;
      break;
    case c10d::ReduceOp::MIN:
      red = FLAGOS_RED_MIN;
      break;
    case c10d::ReduceOp::MAX:
      red = FLAGOS_RED_MAX;
      break;
    default:
      throw CommFailure("the vendor route has no " + describeReduce(op) +
                        " reduction (set FLAGOS_COMM=host to use gloo's)");
  }
  const at::ScalarType type = t.scalar_type();
  if (type == at::kBool) {
    if (op == c10d::ReduceOp::AVG) throw CommFailure("avg of bool tensors is undefined");
    const bool any = op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::MAX;
    return {FLAGOS_DTYPE_UINT8, 1, any ? FLAGOS_RED_MAX : FLAGOS_RED_MIN};
  }
  if (at::isComplexType(type)) {
    if (op != c10d::ReduceOp::SUM && op != c10d::ReduceOp::AVG) {
      throw CommFailure(describeReduce(op) + " of complex tensors is undefined");
    }
    return {type == at::kComplexFloat ? FLAGOS_DTYPE_FLOAT32 : FLAGOS_DTYPE_FLOAT64, 2, red};
  }
  return {dtypeOf(t), 1, red};
}

void* ptr(const at::Tensor& t, int64_t element_offset = 0) {
  if (!t.defined()) return nullptr;
  return static_cast<char*>(t.data_ptr()) + element_offset * t.element_size();
}

class VendorRoute final : public Route {
 public:
  explicit VendorRoute(const GroupInfo& group)
      : group_(group), table_(*flagos::backend().tables.collectives), library_(vendorLibrary()) {}

  RouteKind kind() const override { return RouteKind::kVendor; }
  std::string library() const override { return library_; }
  void run(Task& task, const c10::Stream& stream) override;
  void abort() noexcept override;
  void shutdown() noexcept override;

 private:
  // Throws CommFailure with the library's message unless `status` is success.
  void check(flagosStatus_t status, const char* call) const;
  flagosComm_t commFor(c10::DeviceIndex device);
  void collective(const Op& op, flagosComm_t comm, flagosStream_t stream);
  void pointToPoint(const Op& op, flagosComm_t comm, flagosStream_t stream);
  // Sends, receives and a self copy inside one group (Note [Vendor communicators]).
  void composed(const Op& op, flagosComm_t comm, flagosStream_t stream);

  GroupInfo group_;
  const flagosCollectiveTable& table_;
  const std::string library_;
  std::mutex mutex_;
  std::map<c10::DeviceIndex, flagosComm_t> comms_;
  int created_ = 0;  // worker thread only
  bool aborted_ = false;
};

void VendorRoute::check(flagosStatus_t status, const char* call) const {
  if (status == FLAGOS_SUCCESS) return;
  const char* message = flagos::backend().tables.getLastError();
  throw CommFailure(library_ + " " + call + " returned " + statusName(status) + ": " +
                    (message && *message ? message : "(no message)"));
}

flagosComm_t VendorRoute::commFor(c10::DeviceIndex device) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) throw CommFailure("the communicator was aborted after an earlier failure");
    auto it = comms_.find(device);
    if (it != comms_.end()) return it->second;
  }
  const std::string key = "fccl/uid/" + std::to_string(created_++);
  flagosUniqueId id{};
  if (group_.rank == 0) {
    check(table_.getUniqueId(&id), "getUniqueId");
    group_.store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    try {
      group_.store->wait({key}, group_.timeout);
    } catch (const std::exception& e) {
      throw CommFailure("rank " + std::to_string(group_.rank) + " waited " +
                        std::to_string(group_.timeout.count()) + " ms for rank 0 to create the " +
                        library_ +
                        " communicator: rank 0 did not arrive at its first operation on this "
                        "group (" +
                        messageOf(e) + ")");
    }
    const std::vector<uint8_t> bytes = group_.store->get(key);
    if (bytes.size() != sizeof(id.internal)) {
      throw CommFailure("the unique id in the store has " + std::to_string(bytes.size()) +
                        " bytes, expected " + std::to_string(sizeof(id.internal)));
    }
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  flagosComm_t comm = nullptr;
  check(table_.commInitRank(&comm, group_.size, &id, group_.rank, flagos::physicalDevice(device),
                            group_.timeout.count()),
        "commInitRank");
  std::lock_guard<std::mutex> lock(mutex_);
  comms_[device] = comm;
  if (aborted_) table_.commAbort(comm);
  return comm;
}

void VendorRoute::run(Task& task, const c10::Stream& stream) {
  task.ready.block(stream);  // the library reads the inputs after the issuing stream wrote them
  flagosComm_t comm = commFor(task.device);
  flagosStream_t s = flagos::vendorStream(stream);
  for (size_t i = 0; i < task.ops.size();) {
    if (!isP2P(task.ops[i].kind)) {
      collective(task.ops[i++], comm, s);
      continue;
    }
    // A run of sends and receives: one group, so that pairs and rings of
    // them cannot deadlock.
    check(table_.groupStart(), "groupStart");
    try {
      for (; i < task.ops.size() && isP2P(task.ops[i].kind); ++i)
        pointToPoint(task.ops[i], comm, s);
    } catch (...) {
      table_.groupEnd();
      throw;
    }
    check(table_.groupEnd(), "groupEnd");
  }
}

void VendorRoute::pointToPoint(const Op& op, flagosComm_t comm, flagosStream_t stream) {
  if (op.kind == Kind::kSend) {
    check(table_.send(ptr(op.input), op.input.numel(), dtypeOf(op.input), op.peer, comm, stream),
          "send");
  } else {
    check(table_.recv(ptr(op.output), op.output.numel(), dtypeOf(op.output), op.peer, comm, stream),
          "recv");
  }
}

void VendorRoute::collective(const Op& op, flagosComm_t comm, flagosStream_t stream) {
  switch (op.kind) {
    case Kind::kAllReduce: {
      const Reduction r = reductionOf(op.input, op.reduce);
      check(table_.allReduce(ptr(op.input), ptr(op.output), op.input.numel() * r.scale, r.dtype,
                             r.op, comm, stream),
            "allReduce");
      return;
    }
    case Kind::kBroadcast: {
      const at::Tensor& t = op.output;
      check(table_.broadcast(group_.rank == op.root ? ptr(op.input) : nullptr, ptr(t), t.numel(),
                             dtypeOf(t), op.root, comm, stream),
            "broadcast");
      return;
    }
    case Kind::kReduce: {
      const Reduction r = reductionOf(op.input, op.reduce);
      check(table_.reduce(ptr(op.input), ptr(op.output), op.input.numel() * r.scale, r.dtype, r.op,
                          op.root, comm, stream),
            "reduce");
      return;
    }
    case Kind::kAllGather:
      check(table_.allGather(ptr(op.input), ptr(op.output), op.input.numel(), dtypeOf(op.input),
                             comm, stream),
            "allGather");
      return;
    case Kind::kReduceScatter: {
      const Reduction r = reductionOf(op.output, op.reduce);
      check(table_.reduceScatter(ptr(op.input), ptr(op.output), op.output.numel() * r.scale,
                                 r.dtype, r.op, comm, stream),
            "reduceScatter");
      return;
    }
    case Kind::kBarrier:
      check(table_.allReduce(ptr(op.input), ptr(op.output), 1, FLAGOS_DTYPE_INT32, FLAGOS_RED_SUM,
                             comm, stream),
            "allReduce (barrier)");
      return;
    case Kind::kAllToAll: {
      const auto& sc = op.send_counts;
      const bool even = std::all_of(sc.begin(), sc.end(), [&](int64_t c) { return c == sc[0]; }) &&
                        op.recv_counts == sc;
      if (even && table_.allToAll != nullptr) {
        check(
            table_.allToAll(ptr(op.input), ptr(op.output), sc[0], dtypeOf(op.input), comm, stream),
            "allToAll");
        return;
      }
      composed(op, comm, stream);
      return;
    }
    case Kind::kGather:
    case Kind::kScatter:
      composed(op, comm, stream);
      return;
    default:
      throw CommFailure(std::string("unexpected operation ") + kindName(op.kind));
  }
}

void VendorRoute::composed(const Op& op, flagosComm_t comm, flagosStream_t stream) {
  const int me = group_.rank, n = group_.size;
  // Elements to send to / receive from each rank, and their offsets.
  std::vector<int64_t> sends(n, 0), recvs(n, 0);
  if (op.kind == Kind::kAllToAll) {
    sends = op.send_counts;
    recvs = op.recv_counts;
  } else if (op.kind == Kind::kGather) {
    sends[op.root] = op.count;
    if (me == op.root) std::fill(recvs.begin(), recvs.end(), op.count);
  } else {  // kScatter
    recvs[op.root] = op.count;
    if (me == op.root) std::fill(sends.begin(), sends.end(), op.count);
  }
  if (sends[me] != recvs[me]) {
    throw CommFailure(std::string(kindName(op.kind)) + ": this rank sends " +
                      std::to_string(sends[me]) + " elements to itself but expects " +
                      std::to_string(recvs[me]));
  }
  const at::Tensor& t = op.input.defined() ? op.input : op.output;
  const flagosDtype_t dtype = dtypeOf(t);
  std::vector<int64_t> send_at(n, 0), recv_at(n, 0);
  for (int r = 1; r < n; ++r) {
    send_at[r] = send_at[r - 1] + sends[r - 1];
    recv_at[r] = recv_at[r - 1] + recvs[r - 1];
  }
  check(table_.groupStart(), "groupStart");
  try {
    for (int k = 1; k < n; ++k) {  // peers in ring order from this rank
      const int to = (me + k) % n, from = (me - k + n) % n;
      if (sends[to] > 0) {
        check(table_.send(ptr(op.input, send_at[to]), sends[to], dtype, to, comm, stream), "send");
      }
      if (recvs[from] > 0) {
        check(table_.recv(ptr(op.output, recv_at[from]), recvs[from], dtype, from, comm, stream),
              "recv");
      }
    }
  } catch (...) {
    table_.groupEnd();
    throw;
  }
  check(table_.groupEnd(), "groupEnd");
  if (sends[me] > 0) {  // on the communication stream (current), after the group's work
    op.output.narrow(0, recv_at[me], recvs[me]).copy_(op.input.narrow(0, send_at[me], sends[me]));
  }
}

void VendorRoute::abort() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  for (auto& [device, comm] : comms_) table_.commAbort(comm);
}

void VendorRoute::shutdown() noexcept {
  std::map<c10::DeviceIndex, flagosComm_t> comms;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comms.swap(comms_);
  }
  for (auto& [device, comm] : comms) table_.commDestroy(comm);
}

}  // namespace

std::unique_ptr<Route> makeVendorRoute(const GroupInfo& group) {
  TORCH_CHECK(flagos::backend().tables.collectives != nullptr,
              "fccl: the active plugin has no collectives table");
  return std::make_unique<VendorRoute>(group);
}

}  // namespace flagos::comm
