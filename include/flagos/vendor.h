/*
 * flagos vendor ABI v1 — the contract between the flagos core and a vendor
 * plugin.
 *
 * A plugin is one shared library, loaded with RTLD_LOCAL, that exports one
 * symbol, FLAGOS_VENDOR_ENTRY_SYMBOL ("flagosVendorGetTables_v1"). The core
 * calls it once; the plugin fills a flagosVendorTables with pointers to its
 * static function tables. No PyTorch and no C++ type crosses this boundary:
 * the headers are C99 with fixed-width fields.
 *
 * Versioning (after DLPack and NCCL's plugin headers):
 *  - MAJOR changes when an existing struct layout or a call's meaning
 *    changes. The core refuses a plugin whose major differs from its own,
 *    and says so by name.
 *  - MINOR changes when members are appended to the END of a table. Tables
 *    are append-only: nothing is removed, reordered or retyped within a
 *    major. Each table starts with struct_size, so the core reads only the
 *    members a plugin built against an older minor knows and treats the
 *    rest as NULL. A plugin with a newer minor than the core works too (the
 *    core ignores what it does not know).
 *
 * History (each minor only appends; a core loads plugins of every minor):
 *  1.0  the tables below.
 *  1.1  flagosStatusString (status.h, header-only); flagosDeviceProperties
 *       .fp64 and .autocast_dtype (device.h); kernel-table ids are checked
 *       at load (kernel.h); FLAGOS_ERROR_FALLBACK goes straight to the host
 *       tier, as status.h always said.
 *  1.2  flagosVendorTables.trace, the optional tracing table (trace.h):
 *       device activity for torch.profiler.
 *  1.3  flagosVendorTables.fft, the optional FFT library slot (fft.h):
 *       torch.fft on the device through the vendor's FFT library.
 *  1.4  flagosVendorTables.linalg, the optional linear-algebra library slot
 *       (linalg.h): torch.linalg on the device through the vendor's LAPACK.
 *
 * Rules for every call in every table:
 *  - returns a flagosStatus_t (status.h) and writes results through
 *    out-parameters; never throws, never aborts the process;
 *  - on failure leaves a human-readable message for the calling thread,
 *    returned by flagosVendorTables.getLastError (a successful call may
 *    leave the previous message in place: read it only after a failure);
 *  - before device.init() succeeded, every call except probe (and
 *    shutdown, which may then do nothing) returns
 *    FLAGOS_ERROR_INVALID_ARGUMENT ("plugin not initialized");
 *  - an error in asynchronous work is reported once, by the next
 *    synchronize or query on that stream/device, then cleared;
 *  - is thread-safe unless its comment says otherwise.
 *
 * The split into files follows the tables:
 *   status.h       status codes, dtypes
 *   device.h       probe, count, properties, current device, synchronize
 *   memory.h       malloc/free, copies, fill, memory info, pinned host memory
 *   stream.h       streams and events
 *   kernel.h       native kernels by operator semantic ID
 *   compiler.h     optional runtime compiler (generated kernels)
 *   collectives.h  optional collective-communication library
 *   trace.h        optional device-activity tracing (torch.profiler)
 *   fft.h          optional FFT library slot (torch.fft)
 *   linalg.h       optional linear-algebra library slot (torch.linalg)
 */
#ifndef FLAGOS_VENDOR_H_
#define FLAGOS_VENDOR_H_

#include "flagos/collectives.h"
#include "flagos/compiler.h"
#include "flagos/device.h"
#include "flagos/fft.h"
#include "flagos/kernel.h"
#include "flagos/linalg.h"
#include "flagos/memory.h"
#include "flagos/status.h"
#include "flagos/stream.h"
#include "flagos/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/** ABI major version of these headers. */
#define FLAGOS_ABI_VERSION_MAJOR 1
/** ABI minor version of these headers. */
#define FLAGOS_ABI_VERSION_MINOR 4

/** Name of the one symbol a plugin exports (the major is in the name, so a
 * library built for another major is found to lack it). */
#define FLAGOS_VENDOR_ENTRY_SYMBOL "flagosVendorGetTables_v1"

/** Ranks of plugins under backend "auto": the highest usable one wins.
 * Real accelerators rank above CPU-hosted devices. */
#define FLAGOS_PRIORITY_ACCELERATOR 100
#define FLAGOS_PRIORITY_CPU_HOSTED 10

/** Everything a plugin provides. */
typedef struct flagosVendorTables {
  uint32_t struct_size; /**< sizeof(flagosVendorTables) as the plugin was built. */
  uint16_t abi_major;   /**< FLAGOS_ABI_VERSION_MAJOR the plugin was built with. */
  uint16_t abi_minor;   /**< FLAGOS_ABI_VERSION_MINOR the plugin was built with. */

  /** Backend name users select with FLAGOS_BACKEND ("host", "opencl",
   * "cuda"): lower-case letters, digits and '_'; static lifetime. */
  const char* name;
  /** Plugin version string for reports ("1.0.0"); static lifetime. */
  const char* version;
  /** Rank under "auto": FLAGOS_PRIORITY_ACCELERATOR for real accelerators,
   * FLAGOS_PRIORITY_CPU_HOSTED for devices that run on the host CPU. The
   * entry point cannot look at devices (it must not touch the SDK), so
   * probe may refine this through flagosProbeInfo.priority. Values between
   * 1 and FLAGOS_PRIORITY_CPU_HOSTED rank a CPU-hosted plugin below the host
   * plugin (the skeleton uses 1: "auto" picks it only when nothing else
   * works). */
  int32_t priority;
  /** Non-zero when device addresses are also valid host addresses (a
   * CPU-hosted device). The core still never relies on it for correctness;
   * tools may use it for zero-copy inspection. */
  int32_t host_addressable;

  const flagosDeviceTable* device; /**< Required. */
  const flagosMemoryTable* memory; /**< Required. */
  const flagosStreamTable* stream; /**< Required. */
  /** Optional (NULL: no native kernels; every operator takes the generated,
   * decomposition or host tier). */
  const flagosKernelTable* kernels;
  /** Optional (NULL: no runtime compiler; the generated tier is skipped). */
  const flagosCompilerTable* compiler;
  /** Optional (NULL: collectives are staged through the host over gloo). */
  const flagosCollectiveTable* collectives;

  /** The calling thread's last error message ("" if none; never NULL). Required; the
   * string is owned by the plugin and stays valid until the thread's next call into the
   * plugin (the kit keeps it until the thread's next failing call). Works at any time,
   * also before init() and after a failed probe (the core reads it then). Returns at once;
   * each thread sees only its own message. */
  const char* (*getLastError)(void);

  /** Optional, ABI 1.2 (NULL, or absent from an older plugin's struct_size: torch.profiler
   * shows no device activity, CPU rows only). Device-activity tracing (trace.h). */
  const flagosTraceTable* trace;

  /** Optional, ABI 1.3 (NULL, or absent from an older plugin's struct_size: torch.fft takes
   * the host tier). The vendor's FFT library (fft.h). */
  const flagosFftTable* fft;

  /** Optional, ABI 1.4 (NULL, or absent from an older plugin's struct_size: torch.linalg
   * takes the host tier). The vendor's dense linear algebra (linalg.h). */
  const flagosLinalgTable* linalg;
} flagosVendorTables;

/** Type of the entry point. The core passes the ABI version it speaks and a
 * zero-filled @p tables with struct_size set; the plugin fills it.
 * @param core_abi_major, @p core_abi_minor in: the core's FLAGOS_ABI_VERSION_MAJOR/MINOR.
 * @param tables in/out: the plugin writes at most the caller's struct_size bytes, its own
 *        struct_size included (which tells the core how much it filled). The pointers it
 *        stores have static lifetime and are the same on every call.
 * @returns FLAGOS_SUCCESS for any @p core_abi_minor; FLAGOS_ERROR_ABI_MISMATCH (with a
 *          message) if the plugin cannot serve @p core_abi_major; an error (the kit:
 *          FLAGOS_ERROR_INVALID_ARGUMENT) for a NULL @p tables or a struct_size < 4.
 * Returns at once; may be called more than once. Must not touch the SDK (probe does) nor
 * start threads (the collectives suite forks after loading). */
typedef flagosStatus_t (*flagosVendorGetTablesFn)(uint16_t core_abi_major, uint16_t core_abi_minor,
                                                  flagosVendorTables* tables);

/** Declaration of the entry point a plugin defines (C linkage, exported). */
FLAGOS_EXPORT flagosStatus_t flagosVendorGetTables_v1(uint16_t core_abi_major,
                                                      uint16_t core_abi_minor,
                                                      flagosVendorTables* tables);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLAGOS_VENDOR_H_ */
