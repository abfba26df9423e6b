// Choosing and bringing up the active plugin; the logical->physical device
// map; the per-thread current device. See backend.h.
#include "runtime/backend.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>

#include "runtime/lifecycle.h"
#include "runtime/plugin_loader.h"
#include "runtime/stream_registry.h"

namespace flagos {
namespace {

using detail::Plugin;

std::mutex g_mutex;
std::atomic<bool> g_ready{false};
// Written once under g_mutex before g_ready is set; read-only afterwards.
Backend g_backend;
std::vector<CandidateReport> g_reports;
thread_local c10::DeviceIndex tl_device = 0;

// Loaded plugins by real path. Intentionally leaked: tensors and streams
// may be released during static destruction and still call into them.
std::map<std::string, std::unique_ptr<Plugin>>& pluginCache() {
  static auto* cache = new std::map<std::string, std::unique_ptr<Plugin>>();
  return *cache;
}

std::string baseName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string joinPaths(const std::vector<std::string>& paths) {
  std::string out;
  for (const auto& p : paths) out += (out.empty() ? "" : ", ") + p;
  return out.empty() ? "nothing" : out;
}

// "0,2" -> {0, 2}; "" -> {} (all devices). Syntax and duplicates are
// checked here, the range once the plugin reports its device count.
std::vector<int32_t> parseVisibleDevices(const std::string& spec) {
  std::vector<int32_t> ids;
  std::set<int32_t> seen;
  if (spec.find_first_not_of(" \t") == std::string::npos) return ids;
  std::stringstream in(spec);
  std::string token;
  while (std::getline(in, token, ',')) {
    auto b = token.find_first_not_of(" \t");
    auto e = token.find_last_not_of(" \t");
    std::string t = b == std::string::npos ? "" : token.substr(b, e - b + 1);
    bool digits = !t.empty() && t.size() < 9 &&
                  std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c); });
    TORCH_CHECK(digits, "flagos: FLAGOS_VISIBLE_DEVICES='", spec, "': '", t,
                "' is not a device index (expected e.g. \"0,2\")");
    int32_t id = std::stoi(t);
    TORCH_CHECK(seen.insert(id).second, "flagos: FLAGOS_VISIBLE_DEVICES='", spec, "': device ", id,
                " is listed twice");
    ids.push_back(id);
  }
  return ids;
}

// init() the plugin once; a failure is remembered and never retried (the
// ABI allows one init per process).
bool tryInit(Plugin& p) {
  if (p.initialized) return true;
  if (p.init_error.empty()) {
    flagosStatus_t st = p.device.init();
    int32_t count = 0;
    if (st != FLAGOS_SUCCESS) {
      std::string msg = detail::lastError(p.tables);
      p.init_error = std::string("init failed: ") + (msg.empty() ? detail::statusName(st) : msg);
    } else if (p.device.getCount(&count) != FLAGOS_SUCCESS || count <= 0) {
      p.init_error = "init succeeded but the plugin reports no devices";
    } else {
      p.initialized = true;
      return true;
    }
  }
  p.usable = false;
  p.report.status = "failed";
  p.report.reason = p.init_error;
  return false;
}

Plugin* findByName(const std::vector<Plugin*>& candidates, const std::string& name) {
  for (auto* p : candidates)
    if (p->loaded && p->report.name == name) return p;
  // A library that never said its name (dlopen failed, ...): match the
  // conventional file name, so the error can say why "opencl" is unusable.
  for (auto* p : candidates)
    if (!p->loaded && baseName(p->path) == "libflagos_" + name + ".so") return p;
  return nullptr;
}

std::vector<CandidateReport> reportsOf(const std::vector<Plugin*>& candidates) {
  std::vector<CandidateReport> out;
  for (auto* p : candidates) out.push_back(p->report);
  return out;
}

Plugin* select(const InitOptions& options, const std::vector<Plugin*>& candidates) {
  if (options.backend != "auto") {
    Plugin* p = findByName(candidates, options.backend);
    if (p != nullptr && p->usable) tryInit(*p);
    if (p != nullptr && p->initialized) return p;
    g_reports = reportsOf(candidates);
    TORCH_CHECK(p != nullptr, "flagos: backend '", options.backend,
                "' not found (searched: ", joinPaths(options.search_paths), ")\n",
                detail::describeCandidates(g_reports));
    TORCH_CHECK(false, "flagos: backend '", options.backend, "' unusable: ", baseName(p->path),
                ": ", p->report.reason, "\n", detail::describeCandidates(g_reports));
  }
  std::vector<Plugin*> usable;
  for (auto* p : candidates)
    if (p->usable) usable.push_back(p);
  std::stable_sort(usable.begin(), usable.end(), [](const Plugin* a, const Plugin* b) {
    return a->tables.priority > b->tables.priority;
  });
  for (auto* p : usable)
    if (tryInit(*p)) return p;
  g_reports = reportsOf(candidates);
  TORCH_CHECK(false, "flagos: no usable backend (searched: ", joinPaths(options.search_paths),
              ")\n", detail::describeCandidates(g_reports));
}

}  // namespace

static std::vector<void (*)()>& initHooks() {
  static std::vector<void (*)()> hooks;
  return hooks;
}

void initialize(const InitOptions& options) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_ready.load(std::memory_order_acquire)) {
    TORCH_CHECK(options.backend == "auto" || options.backend == g_backend.name,
                "flagos: already initialized with backend '", g_backend.name,
                "'; cannot switch to '", options.backend, "' in the same process");
    return;
  }
  auto candidates = detail::discoverPlugins(options.search_paths, pluginCache(), options.backend);
  for (auto* p : candidates)
    if (p->report.status == "selected") p->report.status = "usable";
  g_reports = reportsOf(candidates);
  // Syntax first, so that a typo never brings a plugin up.
  std::vector<int32_t> visible = parseVisibleDevices(options.visible_devices);
  Plugin* chosen = select(options, candidates);
  g_reports = reportsOf(candidates);

  int32_t count = 0;
  chosen->device.getCount(&count);
  if (visible.empty()) {
    for (int32_t i = 0; i < count; ++i) visible.push_back(i);
  }
  for (int32_t id : visible) {
    TORCH_CHECK(id < count, "flagos: FLAGOS_VISIBLE_DEVICES='", options.visible_devices,
                "': device ", id, " out of range (backend '", chosen->report.name, "' has ", count,
                " device", count == 1 ? "" : "s", ")");
  }
  TORCH_CHECK(visible.size() <= static_cast<size_t>(std::numeric_limits<c10::DeviceIndex>::max()),
              "flagos: too many devices (", visible.size(), ")");

  Backend b;
  b.name = chosen->report.name;
  b.path = chosen->path;
  b.tables = chosen->tables;
  b.probe = chosen->probe;
  b.physical_ids = visible;
  detail::createDefaultStreams(b);
  chosen->device.setCurrent(b.physical_ids[0]);

  chosen->report.status = "selected";
  g_reports = reportsOf(candidates);
  g_backend = std::move(b);
  g_ready.store(true, std::memory_order_release);
  watchForks();
  for (void (*hook)() : initHooks()) {
    try {
      hook();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[flagos] an initialization hook failed (ignored): %s\n", e.what());
    }
  }
}

void onInitialized(void (*hook)()) {
  initHooks().push_back(hook);
}

bool isInitialized() noexcept {
  return g_ready.load(std::memory_order_acquire);
}

const Backend& backend() {
  TORCH_CHECK(isInitialized(),
              "flagos: the backend is not initialized; call flagos_torchfl.initialize() first");
  TORCH_CHECK(!inForkedChild(), kForkedChildError);  // Note [Forked children]
  return g_backend;
}

const std::vector<CandidateReport>& discoveryReport() {
  // Written under g_mutex; callers read after initialize() returned.
  return g_reports;
}

c10::DeviceIndex deviceCount() noexcept {
  if (!isInitialized()) return 0;
  return static_cast<c10::DeviceIndex>(g_backend.physical_ids.size());
}

void checkDeviceIndex(int64_t device, const char* what) {
  const int64_t count = deviceCount();
  if (device >= 0 && device < count) return;
  // The hint: where the count comes from. The host plugin's own variable is
  // named for it, since that is where a CPU-only user asks for flagos:1.
  const bool host = isInitialized() && g_backend.name == "host";
  TORCH_CHECK(false, "flagos: invalid device index ", device, " ", what, "(", count, " device",
              count == 1 ? "" : "s", " visible; FLAGOS_VISIBLE_DEVICES selects them",
              host ? ", and the host plugin has FLAGOS_HOST_DEVICES devices (default 1)" : "", ")");
}

int32_t physicalDevice(c10::DeviceIndex logical) {
  const Backend& b = backend();
  checkDeviceIndex(logical);
  return b.physical_ids[logical];
}

c10::DeviceIndex currentDevice() {
  return tl_device;
}

void setCurrentDevice(c10::DeviceIndex logical) {
  if (logical == tl_device && isInitialized()) return;
  int32_t physical = physicalDevice(logical);
  check(backend().tables.device->setCurrent(physical), "setCurrent");
  tl_device = logical;
}

void check(flagosStatus_t status, const char* what) {
  if (status == FLAGOS_SUCCESS) return;
  const bool ready = isInitialized();
  std::string msg = ready ? detail::lastError(g_backend.tables) : std::string();
  std::string who = ready ? g_backend.name : std::string("plugin");
  std::string suffix = msg.empty() ? std::string() : ": " + msg;
  TORCH_CHECK_WITH(OutOfMemoryError, status != FLAGOS_ERROR_OUT_OF_MEMORY, "flagos: ", who, ": ",
                   what, " failed: out of memory", suffix);
  TORCH_CHECK(false, "flagos: ", who, ": ", what, " failed: ", detail::statusName(status), suffix);
}

}  // namespace flagos
