// Plugin discovery: find candidate libraries, dlopen them, check their ABI
// and tables, probe them. Selection and init live in backend.cpp.
//
// Internal to the runtime; the rest of the core uses backend.h.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flagos/vendor.h"
#include "runtime/backend.h"

namespace flagos::detail {

// One candidate library. Objects live for the whole process (the active
// Backend points into them), so discovery hands out stable pointers.
//
// Note [Normalized vendor tables]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A plugin built against an older minor fills fewer members than we know;
// one built against a newer minor has members we do not know. We copy each
// table into a zero-filled struct of our own size, reading at most the
// plugin's struct_size bytes, and point `tables` at the copies. Unknown
// members are therefore NULL, and nothing past the plugin's struct is read.
struct Plugin {
  std::string path;      // as found (folder entry or explicit file)
  std::string realpath;  // dedup key
  void* handle = nullptr;
  bool loaded = false;       // entry point called, tables valid
  bool usable = false;       // probe succeeded
  bool initialized = false;  // init() succeeded (never called twice)
  std::string init_error;    // set when init() failed once; not retried
  flagosVendorTables tables{};
  flagosDeviceTable device{};
  flagosMemoryTable memory{};
  flagosStreamTable stream{};
  flagosKernelTable kernels{};
  flagosCompilerTable compiler{};
  flagosCollectiveTable collectives{};
  flagosTraceTable trace{};
  flagosFftTable fft{};
  flagosLinalgTable linalg{};
  flagosProbeInfo probe{};
  CandidateReport report;
};

// Load every candidate named by `search_paths` (a folder contributes every
// regular lib*.so file in it, sorted; a file path is taken as is). With a
// backend @p named (not "auto") whose libflagos_<name>.so is in a folder,
// only that file and the paths listed one by one are loaded (Note [A named
// backend opens only its own plugin]). Libraries already in `cache` (by
// real path) are reused, not reloaded or re-probed. Returns the candidates
// in discovery order; never throws for a bad plugin (the reason lands in
// its report).
std::vector<Plugin*> discoverPlugins(const std::vector<std::string>& search_paths,
                                     std::map<std::string, std::unique_ptr<Plugin>>& cache,
                                     const std::string& named = "");

// Check p.tables (filled by the entry point) and normalize them into p's
// copies; on failure `why` says what is wrong. table_checks.cpp.
bool checkTables(Plugin& p, std::string& why);
// Lower-case letters, digits and '_' (vendor.h).
bool validBackendName(const char* name);

// "FLAGOS_ERROR_DEVICE" etc.
const char* statusName(flagosStatus_t status);
// The plugin's last-error string for this thread, never NULL.
std::string lastError(const flagosVendorTables& tables);
// A multi-line "candidates:" listing for error messages.
std::string describeCandidates(const std::vector<CandidateReport>& reports);

}  // namespace flagos::detail
