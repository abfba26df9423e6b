// ABI checks of a plugin's tables: sizes, required members, optional
// tables complete when present. See Note [Normalized vendor tables].
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>

#include <unordered_map>

#include "runtime/known_kernel_ids.h"
#include "runtime/plugin_loader.h"

namespace flagos::detail {
namespace {

// Copy a plugin table into our zero-filled struct: at most its struct_size
// bytes, at least `min_size` (the members of minor 0 that we require).
template <typename Table>
bool copyTable(const Table* src, Table& dst, size_t min_size, const char* what, std::string& why) {
  if (src->struct_size < min_size) {
    why = std::string(what) + " table too small (" + std::to_string(src->struct_size) +
          " bytes, ABI 1.0 needs " + std::to_string(min_size) + ")";
    return false;
  }
  std::memcpy(&dst, src, std::min<size_t>(sizeof(Table), src->struct_size));
  return true;
}

#define FLAGOS_END_OF(type, member) (offsetof(type, member) + sizeof(((type*)nullptr)->member))
// clang-format off
#define FLAGOS_MEMBER(table, member) Member{#member, (table).member != nullptr}
// clang-format on

struct Member {
  const char* name;
  bool present;
};

bool requireAll(const char* table, std::initializer_list<Member> members, std::string& why) {
  for (const Member& m : members) {
    if (!m.present) {
      why = std::string(table) + " table lacks required member '" + m.name + "'";
      return false;
    }
  }
  return true;
}

// An optional table: NULL is fine; a present one is copied (at least
// @p min_size bytes) and must pass @p complete, which reads the copy.
template <typename Table, typename Complete>
bool optionalTable(const Table* src, Table& dst, size_t min_size, const char* what,
                   std::string& why, Complete complete) {
  return src == nullptr || (copyTable(src, dst, min_size, what, why) && complete(dst));
}

// kernel.h: every entry names a catalog ID once. A typo would otherwise be
// a silent host fallback. IDs unknown to an older core are allowed from a
// plugin of a newer minor (its catalog may have grown).
bool checkKernels(const flagosKernelTable& k, const char* plugin, uint16_t plugin_minor,
                  std::string& why) {
  if (k.num_entries < 0 || (k.num_entries > 0 && k.entries == nullptr)) {
    why = "kernel table: bad num_entries/entries";
    return false;
  }
  const KernelIdCheck known = kernelIdCheck();
  const bool newer = plugin_minor > FLAGOS_ABI_VERSION_MINOR;
  std::unordered_map<std::string, int32_t> seen;
  for (int32_t i = 0; i < k.num_entries; ++i) {
    const flagosKernelEntry& e = k.entries[i];
    if (e.op_id == nullptr || e.fn == nullptr) {
      why = "kernel table: entry " + std::to_string(i) + " has a NULL op_id or fn";
      return false;
    }
    const std::string id = e.op_id;
    if (known != nullptr && !newer && !known(e.op_id)) {
      why = "kernel table of plugin '" + std::string(plugin) + "': entry " + std::to_string(i) +
            " names '" + id +
            "', which is not a semantic ID of the operator catalog (flagos/ops.h lists them)";
      return false;
    }
    const auto [it, fresh] = seen.emplace(id, i);
    if (!fresh) {
      why = "kernel table of plugin '" + std::string(plugin) + "': entries " +
            std::to_string(it->second) + " and " + std::to_string(i) + " both name '" + id +
            "' (each ID may appear once)";
      return false;
    }
  }
  return true;
}

}  // namespace

bool validBackendName(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* c = name; *c; ++c) {
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  }
  return true;
}

bool checkTables(Plugin& p, std::string& why) {
  const flagosVendorTables& t = p.tables;
  if (!validBackendName(t.name)) {
    why = "invalid backend name (need lower-case letters, digits and '_')";
    return false;
  }
  if (t.device == nullptr || t.memory == nullptr || t.stream == nullptr) {
    why = "missing a required table (device, memory or stream)";
    return false;
  }
  if (t.getLastError == nullptr) {
    why = "missing required member getLastError";
    return false;
  }
  const auto& d = p.device;
  const auto& m = p.memory;
  const auto& s = p.stream;
  if (!copyTable(t.device, p.device, FLAGOS_END_OF(flagosDeviceTable, synchronize), "device",
                 why) ||
      !requireAll("device",
                  {FLAGOS_MEMBER(d, probe), FLAGOS_MEMBER(d, init), FLAGOS_MEMBER(d, shutdown),
                   FLAGOS_MEMBER(d, getCount), FLAGOS_MEMBER(d, getProperties),
                   FLAGOS_MEMBER(d, setCurrent), FLAGOS_MEMBER(d, getCurrent),
                   FLAGOS_MEMBER(d, synchronize)},
                  why) ||
      !copyTable(t.memory, p.memory, FLAGOS_END_OF(flagosMemoryTable, hostFree), "memory", why) ||
      !requireAll(
          "memory",
          {FLAGOS_MEMBER(m, malloc), FLAGOS_MEMBER(m, free), FLAGOS_MEMBER(m, memcpy),
           FLAGOS_MEMBER(m, memcpyAsync), FLAGOS_MEMBER(m, memFill), FLAGOS_MEMBER(m, memGetInfo)},
          why) ||
      !copyTable(t.stream, p.stream, FLAGOS_END_OF(flagosStreamTable, eventElapsedTime), "stream",
                 why) ||
      !requireAll("stream",
                  {FLAGOS_MEMBER(s, streamCreate), FLAGOS_MEMBER(s, streamDestroy),
                   FLAGOS_MEMBER(s, streamSynchronize), FLAGOS_MEMBER(s, streamQuery),
                   FLAGOS_MEMBER(s, streamWaitEvent), FLAGOS_MEMBER(s, eventCreate),
                   FLAGOS_MEMBER(s, eventDestroy), FLAGOS_MEMBER(s, eventRecord),
                   FLAGOS_MEMBER(s, eventQuery), FLAGOS_MEMBER(s, eventSynchronize),
                   FLAGOS_MEMBER(s, eventElapsedTime)},
                  why)) {
    return false;
  }
  if ((m.hostAlloc == nullptr) != (m.hostFree == nullptr)) {
    why = "memory table: hostAlloc and hostFree must both be set or both be NULL";
    return false;
  }
  // Optional tables: when present they must be complete (their headers say
  // which members are required).
  if (t.kernels != nullptr &&
      (!copyTable(t.kernels, p.kernels, FLAGOS_END_OF(flagosKernelTable, entries), "kernel", why) ||
       !checkKernels(p.kernels, t.name, t.abi_minor, why))) {
    return false;
  }
  const bool ok =
      optionalTable(t.compiler, p.compiler, FLAGOS_END_OF(flagosCompilerTable, kernelLaunch),
                    "compiler", why,
                    [&](const flagosCompilerTable& c) {
                      return requireAll(
                          "compiler",
                          {FLAGOS_MEMBER(c, language), FLAGOS_MEMBER(c, programBuild),
                           FLAGOS_MEMBER(c, programGetBinary), FLAGOS_MEMBER(c, programLoadBinary),
                           FLAGOS_MEMBER(c, programDestroy), FLAGOS_MEMBER(c, kernelLaunch)},
                          why);
                    }) &&
      // allToAll is the one optional collective, so minor 0 ends at groupEnd.
      optionalTable(
          t.collectives, p.collectives, FLAGOS_END_OF(flagosCollectiveTable, groupEnd),
          "collectives", why,
          [&](const flagosCollectiveTable& x) {
            return requireAll(
                "collectives",
                {FLAGOS_MEMBER(x, library_name), FLAGOS_MEMBER(x, getUniqueId),
                 FLAGOS_MEMBER(x, commInitRank), FLAGOS_MEMBER(x, commDestroy),
                 FLAGOS_MEMBER(x, commAbort), FLAGOS_MEMBER(x, allReduce),
                 FLAGOS_MEMBER(x, broadcast), FLAGOS_MEMBER(x, reduce), FLAGOS_MEMBER(x, allGather),
                 FLAGOS_MEMBER(x, reduceScatter), FLAGOS_MEMBER(x, send), FLAGOS_MEMBER(x, recv),
                 FLAGOS_MEMBER(x, groupStart), FLAGOS_MEMBER(x, groupEnd)},
                why);
          }) &&
      // trace (ABI 1.2), fft (ABI 1.3) and linalg (ABI 1.4) read as NULL from an older plugin:
      // the loader zeroed what lies past its struct_size.
      optionalTable(t.trace, p.trace, FLAGOS_END_OF(flagosTraceTable, drain), "trace", why,
                    [&](const flagosTraceTable& r) {
                      return requireAll(
                          "trace",
                          {FLAGOS_MEMBER(r, enable), FLAGOS_MEMBER(r, disable),
                           FLAGOS_MEMBER(r, setCorrelationId), FLAGOS_MEMBER(r, drain)},
                          why);
                    }) &&
      optionalTable(t.fft, p.fft, FLAGOS_END_OF(flagosFftTable, planDestroy), "fft", why,
                    [&](const flagosFftTable& f) {
                      return requireAll("fft",
                                        {FLAGOS_MEMBER(f, library), FLAGOS_MEMBER(f, planCreate),
                                         FLAGOS_MEMBER(f, execute), FLAGOS_MEMBER(f, planDestroy)},
                                        why);
                    }) &&
      // Every linalg member but the name is optional (linalg.h).
      optionalTable(t.linalg, p.linalg, FLAGOS_END_OF(flagosLinalgTable, library), "linalg", why,
                    [&](const flagosLinalgTable& l) {
                      return requireAll("linalg", {FLAGOS_MEMBER(l, library)}, why);
                    });
  if (!ok) return false;
  // From here on the core only ever reads the normalized copies.
  p.tables.device = &p.device;
  p.tables.memory = &p.memory;
  p.tables.stream = &p.stream;
  p.tables.kernels = t.kernels ? &p.kernels : nullptr;
  p.tables.compiler = t.compiler ? &p.compiler : nullptr;
  p.tables.collectives = t.collectives ? &p.collectives : nullptr;
  p.tables.trace = t.trace ? &p.trace : nullptr;
  p.tables.fft = t.fft ? &p.fft : nullptr;
  p.tables.linalg = t.linalg ? &p.linalg : nullptr;
  return true;
}
#undef FLAGOS_MEMBER
#undef FLAGOS_END_OF

}  // namespace flagos::detail
