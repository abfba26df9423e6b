// Per-operator, per-tier call counters. See op_stats.h.
#include "dispatch/core/op_stats.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace flagos {
namespace {

constexpr size_t kTiers = 5;
using Counters = OpCounters;

struct Registry {
  std::shared_mutex mutex;
  // unique_ptr: counters keep their address while the map rehashes, and
  // entries are never erased (opCounters() pointers stay valid).
  std::unordered_map<std::string, std::unique_ptr<Counters>> ops;
};

Registry& registry() {
  static auto* r = new Registry();  // leaked: counted until exit
  return *r;
}

}  // namespace

struct OpCounters : std::array<std::atomic<uint64_t>, kTiers> {};

const char* tierName(Tier tier) {
  switch (tier) {
    case Tier::Native:
      return "native";
    case Tier::Generated:
      return "generated";
    case Tier::Decomposition:
      return "decomposition";
    case Tier::Fallback:
      return "fallback";
    case Tier::Core:
      return "core";
  }
  return "unknown";
}

OpCounters* opCounters(const std::string& op) {
  Registry& r = registry();
  {
    std::shared_lock<std::shared_mutex> lock(r.mutex);
    auto it = r.ops.find(op);
    if (it != r.ops.end()) return it->second.get();
  }
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  auto& slot = r.ops[op];
  if (!slot) {
    slot = std::make_unique<Counters>();
    for (auto& c : *slot) c.store(0, std::memory_order_relaxed);
  }
  return slot.get();
}

bool recordOpCall(OpCounters* counters, Tier tier) {
  return (*counters)[static_cast<size_t>(tier)].fetch_add(1, std::memory_order_relaxed) == 0;
}

bool recordOpCall(const std::string& op, Tier tier) {
  return recordOpCall(opCounters(op), tier);
}

std::map<std::string, std::map<std::string, uint64_t>> opStatsSnapshot() {
  std::map<std::string, std::map<std::string, uint64_t>> out;
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  for (const auto& [op, counters] : r.ops) {
    for (size_t t = 0; t < kTiers; ++t) {
      uint64_t n = (*counters)[t].load(std::memory_order_relaxed);
      if (n > 0) out[op][tierName(static_cast<Tier>(t))] = n;
    }
  }
  return out;
}

void resetOpStats() {
  Registry& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  for (auto& [op, counters] : r.ops)
    for (auto& c : *counters) c.store(0, std::memory_order_relaxed);
}

}  // namespace flagos
