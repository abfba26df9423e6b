// Per-operator, per-tier call counters: the data behind op_stats(), the
// coverage report and "never silent" fallback. Thread-safe, cheap on the
// call path (one hash lookup under a shared lock after the first call).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace flagos {

// Execution tiers of an operator call (docs/architecture.md, "Tiers").
enum class Tier : uint8_t {
  Native = 0,         // the vendor's kernel for the semantic ID
  Generated = 1,      // a kernel from the generator + kernel cache
  Decomposition = 2,  // rewritten into operators the backend runs
  Fallback = 3,       // host fallback: copy to CPU, ATen CPU kernel, copy back
  Core = 4,           // handled by the core itself (allocation, views, copies)
};
const char* tierName(Tier tier);

// Count one call of `op` (an ATen operator name with overload, e.g.
// "aten::add.Tensor") on `tier`. Returns true on the op's first call on
// that tier (callers log once per operator).
bool recordOpCall(const std::string& op, Tier tier);

// The counters of one operator, at a stable address (never freed; a reset
// zeroes them): hot paths look them up once and then count with one relaxed
// atomic add instead of a locked string-hash lookup per call.
struct OpCounters;
OpCounters* opCounters(const std::string& op);
// As recordOpCall(op, tier) for the operator behind @p counters.
bool recordOpCall(OpCounters* counters, Tier tier);

// Counts one call of operator @p op (a string literal) on @p tier; the
// counters are looked up once per call site.
#define FLAGOS_RECORD_OP(op, tier)                                                     \
  do {                                                                                 \
    static ::flagos::OpCounters* const flagos_op_counters_ = ::flagos::opCounters(op); \
    ::flagos::recordOpCall(flagos_op_counters_, (tier));                               \
  } while (0)

// Snapshot: op -> tier name -> calls.
std::map<std::string, std::map<std::string, uint64_t>> opStatsSnapshot();
void resetOpStats();

}  // namespace flagos
