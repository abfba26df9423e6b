// Plugin discovery: dlopen, entry point, ABI and table checks, probe.
// See plugin_loader.h and Note [Normalized vendor tables].
#include "runtime/plugin_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

namespace flagos::detail {
namespace {

std::string baseName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool isPluginFileName(const std::string& name) {
  return name.size() > 6 && name.compare(0, 3, "lib") == 0 &&
         name.compare(name.size() - 3, 3, ".so") == 0;
}

std::string boundedString(const char* s, size_t capacity) {
  return std::string(s, strnlen(s, capacity));
}

// dlopen + entry point + table checks. Fills p.report on failure.
bool loadLibrary(Plugin& p) {
  // Only a regular file is opened: dlopen of a FIFO named *.so blocks
  // forever, and of a device or folder makes no sense.
  struct stat file {};
  if (stat(p.realpath.c_str(), &file) != 0 || !S_ISREG(file.st_mode)) {
    p.report.reason = "not a regular file";
    return false;
  }
  dlerror();
  // RTLD_LOCAL: a vendor's copy of a library never satisfies torch's (or
  // another vendor's) symbols. See Note [Plugin symbol isolation].
  p.handle = dlopen(p.realpath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (p.handle == nullptr) {
    const char* err = dlerror();
    p.report.reason = std::string("dlopen failed: ") + (err ? err : "unknown error");
    return false;
  }
  auto entry =
      reinterpret_cast<flagosVendorGetTablesFn>(dlsym(p.handle, FLAGOS_VENDOR_ENTRY_SYMBOL));
  if (entry == nullptr) {
    p.report.reason = "not a flagos plugin: no entry point " FLAGOS_VENDOR_ENTRY_SYMBOL
                      " (or built for another ABI major)";
    // No plugin code ran, so unloading is safe. Plugins whose code ran stay
    // loaded: SDKs often start threads or register atexit handlers.
    dlclose(p.handle);
    p.handle = nullptr;
    return false;
  }
  flagosVendorTables t{};
  t.struct_size = sizeof(t);
  flagosStatus_t st = entry(FLAGOS_ABI_VERSION_MAJOR, FLAGOS_ABI_VERSION_MINOR, &t);
  if (st != FLAGOS_SUCCESS || t.abi_major != FLAGOS_ABI_VERSION_MAJOR) {
    std::ostringstream why;
    if (st == FLAGOS_SUCCESS || st == FLAGOS_ERROR_ABI_MISMATCH) {
      why << "ABI mismatch: core speaks ABI " << FLAGOS_ABI_VERSION_MAJOR << "."
          << FLAGOS_ABI_VERSION_MINOR;
      if (t.abi_major != 0) why << ", plugin was built for " << t.abi_major << "." << t.abi_minor;
    } else {
      why << "entry point " FLAGOS_VENDOR_ENTRY_SYMBOL " failed: " << statusName(st);
    }
    p.report.reason = why.str();
    return false;
  }
  constexpr size_t kMinTablesSize =
      offsetof(flagosVendorTables, getLastError) + sizeof(t.getLastError);
  if (t.struct_size < kMinTablesSize) {
    p.report.reason = "vendor tables too small (" + std::to_string(t.struct_size) +
                      " bytes, ABI 1.0 needs " + std::to_string(kMinTablesSize) + ")";
    return false;
  }
  if (t.struct_size < sizeof(t)) {
    std::memset(reinterpret_cast<char*>(&t) + t.struct_size, 0, sizeof(t) - t.struct_size);
  }
  p.tables = t;
  if (t.name != nullptr && validBackendName(t.name)) p.report.name = t.name;
  p.report.priority = t.priority;
  std::string why;
  if (!checkTables(p, why)) {
    p.report.reason = why;
    return false;
  }
  p.loaded = true;
  return true;
}

void probePlugin(Plugin& p) {
  flagosProbeInfo info{};
  info.struct_size = sizeof(info);
  flagosStatus_t st = p.device.probe(&info);
  info.reason[sizeof(info.reason) - 1] = '\0';
  p.probe = info;
  if (st == FLAGOS_SUCCESS) {
    // Probe knows the devices and may re-rank the plugin (device.h).
    if (info.priority != 0) p.tables.priority = p.report.priority = info.priority;
    p.usable = true;
    p.report.status = "usable";
    p.report.reason.clear();
    return;
  }
  std::string reason = boundedString(info.reason, sizeof(info.reason));
  if (reason.empty()) reason = lastError(p.tables);
  if (reason.empty()) reason = statusName(st);
  p.report.status = st == FLAGOS_ERROR_NO_DEVICE ? "skipped" : "failed";
  p.report.reason = "probe failed: " + reason;
}

Plugin* loadOne(const std::string& path, std::map<std::string, std::unique_ptr<Plugin>>& cache) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    auto p = std::make_unique<Plugin>();
    p->path = path;
    p->report = {baseName(path), path, "failed", "no such file or directory", 0};
    auto& slot = cache["?missing:" + path];
    slot = std::move(p);
    return slot.get();
  }
  auto& slot = cache[resolved];
  if (slot) return slot.get();
  slot = std::make_unique<Plugin>();
  Plugin& p = *slot;
  p.path = path;
  p.realpath = resolved;
  p.report = {baseName(path), path, "failed", "", 0};
  if (loadLibrary(p)) probePlugin(p);
  return &p;
}

}  // namespace

std::vector<Plugin*> discoverPlugins(const std::vector<std::string>& search_paths,
                                     std::map<std::string, std::unique_ptr<Plugin>>& cache,
                                     const std::string& named) {
  // Folder entries, and the named backend's own file name among them.
  std::vector<std::string> files, own;
  const std::string own_name = named.empty() ? "" : "libflagos_" + named + ".so";
  std::vector<Plugin*> out;
  for (const auto& entry : search_paths) {
    if (entry.empty()) continue;
    struct stat st {};
    if (stat(entry.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      std::vector<std::string> names;
      if (DIR* dir = opendir(entry.c_str())) {
        while (dirent* d = readdir(dir)) {
          if (!isPluginFileName(d->d_name)) continue;
          struct stat file {};
          const std::string path = entry + "/" + d->d_name;
          // Regular files only (a FIFO would block dlopen); not reported.
          if (stat(path.c_str(), &file) == 0 && S_ISREG(file.st_mode))
            names.emplace_back(d->d_name);
        }
        closedir(dir);
      }
      std::sort(names.begin(), names.end());
      for (const auto& n : names) {
        files.push_back(entry + "/" + n);
        if (n == own_name) own.push_back(files.back());
      }
    } else {
      files.push_back(entry);  // a file, or a missing path (reported as such)
      own.push_back(entry);    // named explicitly: always a candidate
    }
  }
  // Note [A named backend opens only its own plugin]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Another vendor's file (a broken one, one whose entry point crashes)
  // must not stop initialize("host"). When the named backend's
  // libflagos_<name>.so is in a folder, only it and the files listed one by
  // one are opened; otherwise (a plugin under another file name) every
  // candidate is.
  const bool found_own = std::any_of(own.begin(), own.end(), [&](const std::string& f) {
    return f.size() >= own_name.size() &&
           f.compare(f.size() - own_name.size(), own_name.size(), own_name) == 0;
  });
  if (!named.empty() && named != "auto" && found_own) files = own;
  std::set<Plugin*> seen;
  std::map<std::string, Plugin*> by_name;
  for (const auto& f : files) {
    Plugin* p = loadOne(f, cache);
    if (!seen.insert(p).second) continue;  // the same library listed twice
    if (p->loaded) {
      auto [it, fresh] = by_name.emplace(p->report.name, p);
      if (!fresh && p->usable) {
        // The first one found wins: search paths are in priority order.
        p->usable = false;
        p->report.status = "skipped";
        p->report.reason =
            "duplicate backend name '" + p->report.name + "' (using " + it->second->path + ")";
      }
    }
    out.push_back(p);
  }
  return out;
}

const char* statusName(flagosStatus_t status) {
  return flagosStatusString(status);
}

std::string lastError(const flagosVendorTables& tables) {
  if (tables.getLastError == nullptr) return "";
  const char* msg = tables.getLastError();
  return msg ? std::string(msg) : std::string();
}

std::string describeCandidates(const std::vector<CandidateReport>& reports) {
  std::ostringstream out;
  out << "candidates:";
  if (reports.empty()) out << " none";
  for (const auto& r : reports) {
    out << "\n  " << r.name << " (" << r.path << "): " << r.status;
    if (!r.reason.empty()) out << ": " << r.reason;
    if (r.status == "usable" || r.status == "selected") out << ", priority " << r.priority;
  }
  return out.str();
}

}  // namespace flagos::detail
