// The kinds of collective operation, named once for the core's comm plane
// (csrc/comm: what a c10d call becomes) and the plugins' collective
// libraries (backends/host/collectives: what an operation in flight is, in
// timeout and abort messages). Each side uses the subset it runs.
//
// Part of the kit (kit/flagos_kit/): header-only helpers compiled into each
// plugin and into the core; never passed across the vendor ABI.
#pragma once

#include <cstdint>

namespace flagos_kit {

enum class CollectiveKind : int32_t {
  kAllReduce = 1,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kSend,
  kRecv,
  kSendRecv,  // a batch of sends and receives (one call, or one group)
  kBarrier,
};

// The operation's name as torch.distributed spells it ("all_reduce").
inline const char* collectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kGather:
      return "gather";
    case CollectiveKind::kScatter:
      return "scatter";
    case CollectiveKind::kSend:
      return "send";
    case CollectiveKind::kRecv:
      return "recv";
    case CollectiveKind::kSendRecv:
      return "send/recv";
    case CollectiveKind::kBarrier:
      return "barrier";
  }
  return "(unknown operation)";
}

}  // namespace flagos_kit
