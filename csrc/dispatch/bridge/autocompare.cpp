// Note [Autocompare]
// ~~~~~~~~~~~~~~~~~~
// FLAGOS_AUTOCOMPARE=1 (or torch.ops.flagos._set_autocompare("1")) checks
// every catalog call that ran on the native, generated or decomposition tier against
// ATen's CPU kernel:
//  - before the call, every tensor argument is copied to the CPU (in-place
//    and out= variants overwrite theirs);
//  - after it, the same overload runs on the copies (the catalog's `host` op
//    where the overload has no CPU kernel, as on the host tier), and every
//    output is compared: the returns that alias no argument, and every
//    argument the call writes (out=, in-place, void, `mutates`);
//  - each output element passes when |d - c| <= atol + rtol * |c|
//    (Note [Autocompare tolerances]); NaN == NaN;
//  - max_abs and max_rel are the largest |d - c| and |d - c| / |c| (over
//    the elements with |c| > atol) of every element of every checked call,
//    passing or not: a healthy run reports its real rounding difference.
// The first divergence in the process prints one report to stderr (operator,
// tier, arguments, output, errors); every divergence is counted per overload
// (torch.ops.flagos._autocompare_report(): one JSON object per checked
// overload). FLAGOS_AUTOCOMPARE=raise raises a RuntimeError instead.
// Calls made by the checker itself (copies, the CPU run) are never checked;
// the catalog calls a decomposition makes are, each on its own.
// FLAGOS_AUTOCOMPARE_INJECT=<semantic id or overload> (tests only) adds 1 to
// that operator's device outputs after the call, to prove the checker fires.
#include "dispatch/bridge/autocompare.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "dispatch/tiers/host/host_tier.h"
#include "runtime/backend.h"
#include "runtime/env.h"

namespace flagos::semantic {

std::atomic<int> g_autocompare_mode{-1};

namespace {

thread_local bool t_inside = false;

struct Guard {
  bool prev;
  Guard() : prev(t_inside) { t_inside = true; }
  ~Guard() { t_inside = prev; }
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

int parseMode(const std::string& raw, const char* what) {
  const std::string v = lower(raw);
  if (v.empty() || v == "0" || v == "off" || v == "false" || v == "no") return 0;
  if (v == "1" || v == "on" || v == "true" || v == "yes" || v == "report") return 1;
  if (v == "raise") return 2;
  TORCH_CHECK(false, what, "=", raw, ": expected 0, 1 or raise");
}

const char* modeName(int m) {
  return m == 2 ? "raise" : m == 1 ? "1" : "0";
}

std::once_flag g_once;
std::string g_inject;  // FLAGOS_AUTOCOMPARE_INJECT, read once

struct OpRecord {
  std::string tier;
  uint64_t checked = 0;
  uint64_t mismatches = 0;
  double max_abs = 0.0, max_rel = 0.0;  // over every checked element
  std::string first;                    // the first divergent output
};
std::mutex g_mu;
std::map<std::string, OpRecord>* g_records = new std::map<std::string, OpRecord>();
std::atomic<bool> g_reported{false};

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string jsonNumber(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  std::ostringstream o;
  o.precision(9);
  o << d;
  return o.str();
}

at::Tensor toCpu(const at::Tensor& t) {
  if (!t.defined()) return t;
  // Python scalars (wrapped numbers) keep their flag: it changes promotion.
  if (t.unsafeGetTensorImpl()->is_wrapped_number() && t.device().is_cpu()) return t;
  at::Tensor c = t.device().is_cpu() ? t.clone() : t.to(at::kCPU);
  if (t.unsafeGetTensorImpl()->is_wrapped_number())
    c.unsafeGetTensorImpl()->set_wrapped_number(true);
  return c;
}

// A CPU copy of an argument; false: the call cannot be replayed on the CPU.
bool copyArg(const c10::IValue& v, c10::IValue& out) {
  if (v.isTensor()) {
    out = toCpu(v.toTensor());
  } else if (v.isTensorList()) {
    c10::List<at::Tensor> l;
    for (const at::Tensor& t : v.toTensorList()) l.push_back(toCpu(t));
    out = l;
  } else if (v.isList() && v.toListRef().size() > 0 &&
             (v.toListRef()[0].isTensor() || v.toListRef()[0].isNone())) {
    c10::List<std::optional<at::Tensor>> l;
    for (const c10::IValue& e : v.toListRef())
      l.push_back(e.isNone() ? std::optional<at::Tensor>() : toCpu(e.toTensor()));
    out = l;
  } else if (v.isDevice()) {
    out = v.toDevice().is_cpu() ? v : c10::IValue(c10::Device(at::kCPU));
  } else if (v.isGenerator() || v.isObject() || v.isCapsule()) {
    return false;  // random streams differ between devices
  } else {
    out = v;
  }
  return true;
}

void flatten(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) out.push_back(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      out.push_back(e.isTensor() ? e.toTensor() : at::Tensor());
  } else {
    out.emplace_back();
  }
}

std::string dtypeName(at::ScalarType t) {
  return std::string(c10::getDtypeNames(t).first);
}

std::string describe(const at::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::ostringstream o;
  o << dtypeName(t.scalar_type()) << t.sizes() << " strides " << t.strides() << " on "
    << t.device();
  return o.str();
}

struct Tolerance {
  double rtol, atol;
  bool exact;
};

// Note [Autocompare tolerances]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Per dtype: integers and bool exact; float64 rtol=atol=1e-6; float32 /
// complex64 rtol=atol=1e-4; float16 rtol=1e-2 atol=1e-4; bfloat16 rtol=1.6e-1
// atol=1e-4 (torch.testing's defaults x10, float32 widened for the
// accumulation order of GEMM / convolution libraries). For operators that
// accumulate (GEMM, convolution, reductions, norms, losses) the absolute
// tolerance is scaled by the output's largest magnitude: the rounding error
// of a sum grows with the size of its terms, not of its result, so an output
// near zero of a convolution whose outputs reach 1e4 differs by ~1e-3 in
// healthy fp32 (it was flagged with max_rel 1.17, and
// FLAGOS_AUTOCOMPARE=raise aborted a correct model).
Tolerance toleranceFor(at::ScalarType t) {
  switch (t) {
    case at::kDouble:
    case at::kComplexDouble:
      return {1e-6, 1e-6, false};
    case at::kFloat:
    case at::kComplexFloat:
      return {1e-4, 1e-4, false};
    case at::kHalf:
    case at::kComplexHalf:
      return {1e-2, 1e-4, false};
    case at::kBFloat16:
      return {1.6e-1, 1e-4, false};
    default:
      return {0.0, 0.0, true};
  }
}

struct Diff {
  bool differs = false;
  std::string what;  // shape / dtype / element summary
  double max_abs = 0.0, max_rel = 0.0;
};

// `dev`: the device result already on the CPU.
Diff compare(const at::Tensor& dev, const at::Tensor& ref, bool accumulates) {
  Diff d;
  if (!dev.defined() || !ref.defined()) {
    if (dev.defined() != ref.defined()) {
      d.differs = true;
      d.what = std::string("device output is ") + (dev.defined() ? "defined" : "undefined") +
               ", CPU output is " + (ref.defined() ? "defined" : "undefined");
    }
    return d;
  }
  if (dev.sizes() != ref.sizes()) {
    d.differs = true;
    std::ostringstream o;
    o << "shape " << dev.sizes() << " on the device, " << ref.sizes() << " on the CPU";
    d.what = o.str();
    return d;
  }
  if (dev.scalar_type() != ref.scalar_type()) {
    d.differs = true;
    d.what = "dtype " + dtypeName(dev.scalar_type()) + " on the device, " +
             dtypeName(ref.scalar_type()) + " on the CPU";
    return d;
  }
  if (dev.numel() == 0) return d;
  Tolerance tol = toleranceFor(ref.scalar_type());
  const bool complex = at::isComplexType(ref.scalar_type());
  at::Tensor a = complex ? dev.to(at::kComplexDouble) : dev.to(at::kDouble);
  at::Tensor b = complex ? ref.to(at::kComplexDouble) : ref.to(at::kDouble);
  at::Tensor diff = (a - b).abs();
  at::Tensor same = a.eq(b);  // equal infinities: inf - inf is nan
  if (!tol.exact) same = same.logical_or(a.isnan().logical_and(b.isnan()));
  diff.masked_fill_(same, 0.0);
  at::Tensor rel = diff.div(b.abs());
  rel.masked_fill_(diff.eq(0.0).logical_or(b.abs().le(tol.atol)), 0.0);  // |c| <= atol: abs only
  d.max_abs = diff.isnan().any().item<bool>() ? std::nan("") : diff.max().item<double>();
  d.max_rel = rel.isnan().any().item<bool>() ? std::nan("") : rel.max().item<double>();
  if (accumulates && !tol.exact) {
    at::Tensor finite = b.abs().masked_fill(b.isfinite().logical_not(), 0.0);
    tol.atol *= std::max(1.0, finite.max().item<double>());
  }
  at::Tensor bad = tol.exact
                       ? same.logical_not()
                       : diff.gt(b.abs().mul(tol.rtol).add(tol.atol)).logical_or(diff.isnan());
  const int64_t n_bad = bad.sum().item<int64_t>();
  if (n_bad == 0) return d;
  d.differs = true;
  std::ostringstream o;
  o << n_bad << " of " << ref.numel() << " elements differ (";
  if (tol.exact) {
    o << "exact comparison";
  } else {
    o << "rtol=" << tol.rtol << " atol=" << tol.atol;
  }
  const int64_t first = bad.reshape(-1).to(at::kByte).argmax().item<int64_t>();
  o << "; first at flat index " << first << ": device " << a.reshape(-1)[first].item() << ", CPU "
    << b.reshape(-1)[first].item() << ")";
  d.what = o.str();
  return d;
}

}  // namespace

int initAutocompare() {
  std::call_once(g_once, [] {
    g_inject = lower(env::text("FLAGOS_AUTOCOMPARE_INJECT"));
    const int mode = parseMode(env::text("FLAGOS_AUTOCOMPARE"), "FLAGOS_AUTOCOMPARE");
    int expected = -1;  // _set_autocompare may have won the race: keep its value
    g_autocompare_mode.compare_exchange_strong(expected, mode);
  });
  return g_autocompare_mode.load(std::memory_order_relaxed);
}

bool inAutocompare() {
  return t_inside;
}

struct AutocompareCall::State {
  const c10::OperatorHandle* op;
  const std::string* name;
  const char* op_id;
  const char* host_op;
  int num_args;
  bool accumulates = false;
  bool replayable = true;
  std::vector<c10::IValue> dev_args;  // the call's own arguments (aliases)
  std::vector<c10::IValue> cpu_args;  // their CPU copies, taken before the call
  std::vector<int> written;           // argument indices the call writes
};

AutocompareCall::AutocompareCall(const c10::OperatorHandle& op, const std::string& name,
                                 const char* op_id, const char* host_op, c10::ArrayRef<int> mutated,
                                 const torch::jit::Stack& stack, int num_args, bool accumulates)
    : s_(std::make_unique<State>()) {
  Guard guard;
  s_->op = &op;
  s_->name = &name;
  s_->op_id = op_id;
  s_->host_op = host_op;
  s_->num_args = num_args;
  s_->accumulates = accumulates;
  const auto& schema_args = op.schema().arguments();
  for (int i = 0; i < num_args; ++i) {
    const auto& info = schema_args[i].alias_info();
    if ((info && info->isWrite()) || std::find(mutated.begin(), mutated.end(), i) != mutated.end())
      s_->written.push_back(i);
  }
  const c10::IValue* args = stack.data() + (stack.size() - num_args);
  s_->dev_args.assign(args, args + num_args);
  s_->cpu_args.resize(num_args);
  try {
    for (int i = 0; i < num_args && s_->replayable; ++i)
      s_->replayable = copyArg(args[i], s_->cpu_args[i]);
  } catch (const c10::Error&) {
    s_->replayable = false;
  }
}

AutocompareCall::~AutocompareCall() = default;

void AutocompareCall::check(Tier tier, const torch::jit::Stack& stack) {
  if (!s_->replayable ||
      (tier != Tier::Native && tier != Tier::Generated && tier != Tier::Decomposition))
    return;
  Guard guard;
  const c10::OperatorHandle& op = *s_->op;
  const c10::FunctionSchema& schema = op.schema();
  const size_t num_returns = schema.returns().size();
  if (stack.size() < num_returns) return;

  // The CPU reference; a call ATen's CPU kernels refuse (a dtype they lack)
  // cannot be checked.
  torch::jit::Stack cpu(s_->cpu_args.begin(), s_->cpu_args.end());
  try {
    if (s_->host_op) {
      runOnHost(op, s_->host_op, {}, &cpu);
    } else {
      op.callBoxed(&cpu);
    }
  } catch (const c10::Error&) {
    return;
  }
  if (cpu.size() != num_returns) return;

  // (label, device value, CPU value) of every output.
  struct Out {
    std::string label;
    c10::IValue dev, ref;
  };
  std::vector<Out> outs;
  const c10::IValue* rets = stack.data() + (stack.size() - num_returns);
  for (size_t j = 0; j < num_returns; ++j)
    if (!schema.returns()[j].alias_info())
      outs.push_back({"return " + std::to_string(j), rets[j], cpu[j]});
  for (int i : s_->written)
    outs.push_back(
        {"argument '" + schema.arguments()[i].name() + "'", s_->dev_args[i], s_->cpu_args[i]});

  const bool inject = !g_inject.empty() && (g_inject == s_->op_id || g_inject == lower(*s_->name) ||
                                            "aten::" + g_inject == lower(*s_->name));
  const char* tier_name = tierName(tier);
  std::string first_label, first_what, first_dev, first_ref;
  double max_abs = 0.0, max_rel = 0.0;
  int divergent = 0;
  for (const Out& o : outs) {
    std::vector<at::Tensor> dev, ref;
    flatten(o.dev, dev);
    flatten(o.ref, ref);
    if (dev.size() != ref.size()) continue;
    for (size_t k = 0; k < dev.size(); ++k) {
      if (inject && dev[k].defined() && dev[k].numel() > 0 &&
          (at::isFloatingType(dev[k].scalar_type()) ||
           at::isIntegralType(dev[k].scalar_type(), /*includeBool=*/false))) {
        dev[k].add_(1);  // on the device: the wrong result the caller gets
      }
      Diff d;
      try {
        d = compare(dev[k].defined() ? dev[k].to(at::kCPU) : dev[k], ref[k], s_->accumulates);
      } catch (const c10::Error&) {
        continue;
      }
      // NaN (a NaN where the CPU has none) sticks: it is the worst.
      max_abs = std::isnan(max_abs) || std::isnan(d.max_abs) ? std::nan("")
                                                             : std::max(max_abs, d.max_abs);
      max_rel = std::isnan(max_rel) || std::isnan(d.max_rel) ? std::nan("")
                                                             : std::max(max_rel, d.max_rel);
      if (!d.differs) continue;
      if (divergent++ == 0) {
        first_label =
            o.label + (dev.size() > 1 || o.dev.isList() ? "[" + std::to_string(k) + "]" : "");
        first_what = d.what;
        first_dev = describe(dev[k]);
        first_ref = describe(ref[k]);
      }
    }
  }

  {
    std::lock_guard<std::mutex> lock(g_mu);
    OpRecord& r = (*g_records)[*s_->name];
    r.tier = tier_name;
    ++r.checked;
    r.max_abs =
        std::isnan(r.max_abs) || std::isnan(max_abs) ? std::nan("") : std::max(r.max_abs, max_abs);
    r.max_rel =
        std::isnan(r.max_rel) || std::isnan(max_rel) ? std::nan("") : std::max(r.max_rel, max_rel);
    if (divergent && r.mismatches++ == 0) r.first = first_label + ": " + first_what;
  }
  if (!divergent) return;

  std::ostringstream msg;
  msg << "operator " << *s_->name << " (semantic op '" << s_->op_id << "') on tier " << tier_name
      << " of backend '" << (flagos::isInitialized() ? flagos::backend().name.c_str() : "?")
      << "' differs from the CPU reference\n  inputs:";
  for (int i = 0; i < s_->num_args; ++i) {
    const c10::IValue& v = s_->cpu_args[i];
    const c10::IValue& dv = s_->dev_args[i];
    msg << "\n    " << schema.arguments()[i].name() << ": ";
    if (dv.isTensor()) {
      msg << describe(dv.toTensor());
    } else if (dv.isTensorList() ||
               (dv.isList() && v.isList() && !dv.toListRef().empty() &&
                (dv.toListRef()[0].isTensor() || dv.toListRef()[0].isNone()))) {
      std::vector<at::Tensor> ts;
      flatten(dv, ts);
      msg << "[";
      for (size_t k = 0; k < ts.size() && k < 8; ++k) msg << (k ? ", " : "") << describe(ts[k]);
      if (ts.size() > 8) msg << ", ... (" << ts.size() << " tensors)";
      msg << "]";
    } else {
      std::ostringstream val;
      val << dv;
      std::string s = val.str();
      if (s.size() > 120) s = s.substr(0, 117) + "...";
      msg << s;
    }
  }
  msg << "\n  output: " << first_label << " (device: " << first_dev << "; CPU: " << first_ref
      << ")\n  " << first_what << "\n  max abs error " << jsonNumber(max_abs) << ", max rel error "
      << jsonNumber(max_rel);
  if (divergent > 1) msg << " (over " << divergent << " divergent outputs)";

  if (g_autocompare_mode.load(std::memory_order_relaxed) == 2) {
    TORCH_CHECK(false, "[flagos] FLAGOS_AUTOCOMPARE=raise: ", msg.str());
  }
  if (!g_reported.exchange(true)) {
    std::fprintf(stderr,
                 "[flagos] autocompare: first divergence from the CPU reference in this "
                 "process:\n  %s\n  later divergences are only counted "
                 "(torch.ops.flagos._autocompare_report())\n",
                 msg.str().c_str());
    std::fflush(stderr);
  }
}

namespace {

// Python-visible, like _catalog_routes(): torch.ops.flagos.<name>().
std::string setAutocompare(std::string mode) {
  const int prev = initAutocompare();
  g_autocompare_mode.store(parseMode(mode, "_set_autocompare"), std::memory_order_relaxed);
  return modeName(prev);
}

std::string getAutocompare() {
  return modeName(initAutocompare());
}

// One JSON object per checked overload: op, tier, checked, mismatches,
// max_abs, max_rel, first (the first divergent output and its summary).
std::vector<std::string> autocompareReport() {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto& [op, r] : *g_records) {
    out.push_back("{\"op\": \"" + jsonEscape(op) + "\", \"tier\": \"" + r.tier +
                  "\", \"checked\": " + std::to_string(r.checked) + ", \"mismatches\": " +
                  std::to_string(r.mismatches) + ", \"max_abs\": " + jsonNumber(r.max_abs) +
                  ", \"max_rel\": " + jsonNumber(r.max_rel) + ", \"first\": \"" +
                  jsonEscape(r.first) + "\"}");
  }
  return out;
}

void resetAutocompare() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_records->clear();
  g_reported.store(false);
}

}  // namespace
}  // namespace flagos::semantic

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  m.def("_set_autocompare(str mode) -> str", &flagos::semantic::setAutocompare);
  m.def("_get_autocompare() -> str", &flagos::semantic::getAutocompare);
  m.def("_autocompare_report() -> str[]", &flagos::semantic::autocompareReport);
  m.def("_autocompare_reset() -> ()", &flagos::semantic::resetAutocompare);
}
