// Per-operator routing overrides, parsed once from the environment:
//
//   FLAGOS_OP_<ID>=native|generated|fallback   one semantic op (ID in any case)
//   FLAGOS_FORCE_FALLBACK=<list or regex>      ops sent straight to the host
//
// The list form is comma-separated semantic IDs or ATen overload names
// ("relu", "aten::add.Tensor", "add.out"); every name must exist. A value
// containing a regex metacharacter is an ECMAScript regex matched against the
// whole semantic ID and the whole overload name ("add.Tensor").
// Unknown IDs and bad values are errors (see STYLE.md, "routing data stays
// small ... unknown operators are rejected when the data is parsed").
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <sstream>
#include <unordered_map>

#include "dispatch/bridge/catalog.h"
#include "runtime/env.h"

extern char** environ;

namespace flagos::semantic {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n"), e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

struct Routes {
  std::vector<Route> by_overload;  // index: kOverloads
};

Routes parse() {
  Routes r;
  r.by_overload.assign(kNumOverloads, Route::Auto);
  std::vector<Route> by_op(kNumOps, Route::Auto);

  constexpr const char* kPrefix = "FLAGOS_OP_";
  for (char** env = environ; env && *env; ++env) {
    if (std::strncmp(*env, kPrefix, std::strlen(kPrefix)) != 0) continue;
    std::string entry(*env);
    auto eq = entry.find('=');
    std::string var = entry.substr(0, eq);
    std::string id = lower(var.substr(std::strlen(kPrefix)));
    std::string value = lower(trim(eq == std::string::npos ? "" : entry.substr(eq + 1)));
    int op = findOp(id);
    TORCH_CHECK(op >= 0, var, ": '", id,
                "' is not a semantic operator ID of the catalog "
                "(ops/catalog.yaml; `ops.h` lists them)");
    if (value == "native" || value == "auto" || value.empty()) {
      by_op[op] = Route::Native;
    } else if (value == "generated") {
      by_op[op] = Route::Generated;
    } else if (value == "fallback" || value == "host") {
      by_op[op] = Route::Fallback;
    } else {
      TORCH_CHECK(false, var, "=", value, ": expected native, generated or fallback");
    }
  }
  for (int i = 0; i < kNumOverloads; ++i) r.by_overload[i] = by_op[kOverloads[i].op];

  std::string pattern = env::text("FLAGOS_FORCE_FALLBACK");
  if (!pattern.empty()) {
    if (pattern.find_first_of("*?[]()|^$\\+{}") != std::string::npos) {
      std::regex re;
      try {
        re = std::regex(pattern, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        TORCH_CHECK(false, "FLAGOS_FORCE_FALLBACK: bad regex '", pattern, "': ", e.what());
      }
      for (int i = 0; i < kNumOverloads; ++i) {
        if (std::regex_match(kOverloads[i].name, re) ||
            std::regex_match(kOps[kOverloads[i].op].id, re)) {
          r.by_overload[i] = Route::Fallback;
        }
      }
    } else {
      std::stringstream ss(pattern);
      std::string item;
      while (std::getline(ss, item, ',')) {
        item = trim(item);
        if (item.empty()) continue;
        if (item.rfind("aten::", 0) == 0) item = item.substr(6);
        bool found = false;
        int op = findOp(lower(item));
        for (int i = 0; i < kNumOverloads; ++i) {
          if (kOverloads[i].op == op || item == kOverloads[i].name) {
            r.by_overload[i] = Route::Fallback;
            found = true;
          }
        }
        TORCH_CHECK(found, "FLAGOS_FORCE_FALLBACK: '", item,
                    "' is neither a semantic operator ID "
                    "nor an ATen overload of the catalog");
      }
    }
  }
  return r;
}

std::once_flag g_once;
std::atomic<const Routes*> g_routes{nullptr};

}  // namespace

int findOp(const std::string& id) {
  static const std::unordered_map<std::string, int> index = [] {
    std::unordered_map<std::string, int> m;
    for (int i = 0; i < kNumOps; ++i) m.emplace(kOps[i].id, i);
    return m;
  }();
  auto it = index.find(id);
  return it == index.end() ? -1 : it->second;
}

void initRouting() {
  if (g_routes.load(std::memory_order_acquire)) return;
  // A parse error propagates and leaves g_routes null, so every later call
  // reports it again rather than running with half-applied overrides.
  std::call_once(g_once, [] { g_routes.store(new Routes(parse()), std::memory_order_release); });
}

Route routeFor(int op, int overload) {
  const Routes* r = g_routes.load(std::memory_order_acquire);
  if (!r) {
    initRouting();
    r = g_routes.load(std::memory_order_acquire);
  }
  return r->by_overload[overload];
}

}  // namespace flagos::semantic
