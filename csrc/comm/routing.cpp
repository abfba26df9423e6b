// The routing decision (FLAGOS_COMM and the plugin's tables) and the names
// used in messages. See comm.h.
#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "comm/comm.h"
#include "runtime/backend.h"
#include "runtime/env.h"

namespace flagos::comm {

Mode modeFromEnv() {
  const std::string raw = env::text("FLAGOS_COMM");
  const std::string value = flagos_kit::lowered(raw);
  if (value.empty() || value == "auto") return Mode::kAuto;
  if (value == "vendor") return Mode::kVendor;
  if (value == "host") return Mode::kHost;
  TORCH_CHECK_VALUE(false, "FLAGOS_COMM='", raw,
                    "' is not a communication route: use auto (the plugin's collectives "
                    "library when it has one, else host), vendor or host");
  return Mode::kAuto;
}

const char* modeName(Mode mode) {
  switch (mode) {
    case Mode::kVendor:
      return "vendor";
    case Mode::kHost:
      return "host";
    default:
      return "auto";
  }
}

const char* routeName(RouteKind route) {
  return route == RouteKind::kVendor ? "vendor" : "host";
}

std::string vendorLibrary() {
  const flagosCollectiveTable* table = flagos::backend().tables.collectives;
  if (table == nullptr) return "";
  return table->library_name ? table->library_name : "(unnamed)";
}

RouteKind chooseRoute(Mode mode) {
  if (mode == Mode::kHost) return RouteKind::kHost;
  const Backend& b = flagos::backend();
  if (b.tables.collectives != nullptr) return RouteKind::kVendor;
  TORCH_CHECK(mode != Mode::kVendor,
              "fccl: the vendor route was requested (FLAGOS_COMM=vendor, or "
              "Options(route='vendor')), but the active plugin '",
              b.name, "' (", b.path,
              ") has no collectives table; use auto or host to stage collectives through host "
              "memory over gloo");
  return RouteKind::kHost;
}

std::string describeReduce(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "sum";
    case c10d::ReduceOp::AVG:
      return "avg";
    case c10d::ReduceOp::PRODUCT:
      return "product";
    case c10d::ReduceOp::MIN:
      return "min";
    case c10d::ReduceOp::MAX:
      return "max";
    case c10d::ReduceOp::BAND:
      return "band";
    case c10d::ReduceOp::BOR:
      return "bor";
    case c10d::ReduceOp::BXOR:
      return "bxor";
    case c10d::ReduceOp::PREMUL_SUM:
      return "premul_sum";
    default:
      return "(unknown op)";
  }
}

std::string messageOf(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

bool Task::involvesAll() const {
  return std::any_of(ops.begin(), ops.end(), [](const Op& op) { return !isP2P(op.kind); });
}

std::string Task::describe() const {
  std::ostringstream out;
  out << name << " #" << seq << " (flagos:" << static_cast<int>(device);
  if (!ops.empty() && ops[0].kind != Kind::kBarrier) {
    const Op& op = ops[0];
    const at::Tensor& t = op.input.defined() ? op.input : op.output;
    if (t.defined()) out << ", " << t.numel() << " x " << c10::toString(t.scalar_type());
    if (op.kind == Kind::kAllReduce || op.kind == Kind::kReduce ||
        op.kind == Kind::kReduceScatter) {
      out << ", " << describeReduce(op.reduce);
    }
    if (op.root >= 0) out << ", root " << op.root;
    if (op.peer >= 0) out << ", peer " << op.peer;
    if (ops.size() > 1) out << ", " << ops.size() << " ops";
  }
  out << ")";
  return out.str();
}

}  // namespace flagos::comm
