/*
 * Deliberately broken vendor plugins for the core's loader tests. One source,
 * built once per breakage (tests/plugins/CMakeLists.txt defines exactly one
 * of these):
 *
 *   BROKEN_WRONG_ABI    entry succeeds but reports abi_major 99
 *   BROKEN_NO_ENTRY     the entry symbol is not exported (nothing is)
 *   BROKEN_PROBE_FAILS  probe: FLAGOS_ERROR_NO_DEVICE, "no test device present"
 *   BROKEN_INIT_FAILS   probe succeeds, init: FLAGOS_ERROR_DEVICE + last error
 *   BROKEN_UNKNOWN_KERNEL_ID    kernel table names "relu" and the typo "reluu"
 *   BROKEN_DUPLICATE_KERNEL_ID  kernel table names "relu" twice
 *
 * Apart from its one defect each plugin is well formed (valid tables, all
 * required members set, priority above the host plugin), so a loader that
 * rejects it can only be rejecting that defect. Members past init never run:
 * they answer FLAGOS_ERROR_NOT_SUPPORTED.
 */
#include <stdlib.h>
#include <string.h>

#include "flagos/vendor.h"

#define BROKEN_UNUSED(x) (void)(x)

static const char* g_last_error = "";

static const char* getLastError(void) {
  return g_last_error;
}

static flagosStatus_t probe(flagosProbeInfo* info) {
  if (info == NULL) return FLAGOS_ERROR_INVALID_ARGUMENT;
  strcpy(info->sdk_name, "test");
  strcpy(info->sdk_version, "0.0.0");
#ifdef BROKEN_PROBE_FAILS
  info->device_count = 0;
  strcpy(info->reason, "no test device present");
  g_last_error = "no test device present";
  return FLAGOS_ERROR_NO_DEVICE;
#else
  info->device_count = 1;
  return FLAGOS_SUCCESS;
#endif
}

static flagosStatus_t init(void) {
#ifdef BROKEN_INIT_FAILS
  g_last_error = "test plugin: init failed on purpose (device refused to start)";
  return FLAGOS_ERROR_DEVICE;
#else
  return FLAGOS_SUCCESS;
#endif
}

static flagosStatus_t shutdown(void) {
  return FLAGOS_SUCCESS;
}

static flagosStatus_t getCount(int32_t* count) {
  if (count == NULL) return FLAGOS_ERROR_INVALID_ARGUMENT;
  *count = 1;
  return FLAGOS_SUCCESS;
}

static flagosStatus_t getProperties(int32_t device, flagosDeviceProperties* props) {
  BROKEN_UNUSED(device);
  BROKEN_UNUSED(props);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}

static flagosStatus_t setCurrent(int32_t device) {
  return device == 0 ? FLAGOS_SUCCESS : FLAGOS_ERROR_INVALID_ARGUMENT;
}

static flagosStatus_t getCurrent(int32_t* device) {
  if (device == NULL) return FLAGOS_ERROR_INVALID_ARGUMENT;
  *device = 0;
  return FLAGOS_SUCCESS;
}

static flagosStatus_t synchronize(int32_t device) {
  BROKEN_UNUSED(device);
  return FLAGOS_SUCCESS;
}

static const flagosDeviceTable kDevice = {sizeof(flagosDeviceTable),
                                          probe,
                                          init,
                                          shutdown,
                                          getCount,
                                          getProperties,
                                          setCurrent,
                                          getCurrent,
                                          synchronize};

/* Memory and stream members: all unsupported (the loader never gets here). */
static flagosStatus_t memMalloc(int32_t d, uint64_t b, void** p) {
  BROKEN_UNUSED(d);
  BROKEN_UNUSED(b);
  BROKEN_UNUSED(p);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}
static flagosStatus_t memFree(int32_t d, void* p) {
  BROKEN_UNUSED(d);
  BROKEN_UNUSED(p);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}
static flagosStatus_t memCopy(void* d, const void* s, uint64_t b, flagosMemcpyKind_t k) {
  BROKEN_UNUSED(d);
  BROKEN_UNUSED(s);
  BROKEN_UNUSED(b);
  BROKEN_UNUSED(k);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}
static flagosStatus_t memCopyAsync(void* d, const void* s, uint64_t b, flagosMemcpyKind_t k,
                                   flagosStream_t st) {
  BROKEN_UNUSED(st);
  return memCopy(d, s, b, k);
}
static flagosStatus_t memFill(void* d, const void* p, uint32_t ps, uint64_t c, flagosStream_t st) {
  BROKEN_UNUSED(d);
  BROKEN_UNUSED(p);
  BROKEN_UNUSED(ps);
  BROKEN_UNUSED(c);
  BROKEN_UNUSED(st);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}
static flagosStatus_t memGetInfo(int32_t d, uint64_t* f, uint64_t* t) {
  BROKEN_UNUSED(d);
  BROKEN_UNUSED(f);
  BROKEN_UNUSED(t);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}

static const flagosMemoryTable kMemory = {sizeof(flagosMemoryTable),
                                          memMalloc,
                                          memFree,
                                          memCopy,
                                          memCopyAsync,
                                          memFill,
                                          memGetInfo,
                                          NULL,
                                          NULL};

static flagosStatus_t streamCreate(int32_t d, int32_t p, flagosStream_t* s) {
  BROKEN_UNUSED(d);
  BROKEN_UNUSED(p);
  BROKEN_UNUSED(s);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}
static flagosStatus_t streamOp(flagosStream_t s) {
  BROKEN_UNUSED(s);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}
static flagosStatus_t streamWaitEvent(flagosStream_t s, flagosEvent_t e) {
  BROKEN_UNUSED(s);
  BROKEN_UNUSED(e);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}
static flagosStatus_t eventCreate(int32_t d, uint32_t f, flagosEvent_t* e) {
  BROKEN_UNUSED(d);
  BROKEN_UNUSED(f);
  BROKEN_UNUSED(e);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}
static flagosStatus_t eventOp(flagosEvent_t e) {
  BROKEN_UNUSED(e);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}
static flagosStatus_t eventRecord(flagosEvent_t e, flagosStream_t s) {
  BROKEN_UNUSED(e);
  BROKEN_UNUSED(s);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}
static flagosStatus_t eventElapsedTime(float* ms, flagosEvent_t a, flagosEvent_t b) {
  BROKEN_UNUSED(ms);
  BROKEN_UNUSED(a);
  BROKEN_UNUSED(b);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}

static const flagosStreamTable kStream = {sizeof(flagosStreamTable),
                                          streamCreate,
                                          streamOp,
                                          streamOp,
                                          streamOp,
                                          streamWaitEvent,
                                          eventCreate,
                                          eventOp,
                                          eventRecord,
                                          eventOp,
                                          eventOp,
                                          eventElapsedTime};

/* A kernel table whose one defect is its ids (kernel.h: checked at load). */
static flagosStatus_t anyKernel(flagosStream_t s, const flagosTensor* o, int32_t no,
                                const flagosTensor* i, int32_t ni, const flagosScalar* sc,
                                int32_t ns) {
  BROKEN_UNUSED(s);
  BROKEN_UNUSED(o);
  BROKEN_UNUSED(no);
  BROKEN_UNUSED(i);
  BROKEN_UNUSED(ni);
  BROKEN_UNUSED(sc);
  BROKEN_UNUSED(ns);
  return FLAGOS_ERROR_NOT_SUPPORTED;
}
#if defined(BROKEN_UNKNOWN_KERNEL_ID) || defined(BROKEN_DUPLICATE_KERNEL_ID)
static const flagosKernelEntry kEntries[] = {
    {"relu", anyKernel},
#ifdef BROKEN_UNKNOWN_KERNEL_ID
    {"reluu", anyKernel},
#else
    {"relu", anyKernel},
#endif
};
static const flagosKernelTable kKernels = {sizeof(flagosKernelTable), 2, kEntries};
#endif

#ifdef BROKEN_WRONG_ABI
#define BROKEN_ABI_MAJOR 99
#define BROKEN_NAME "test_wrong_abi"
#elif defined(BROKEN_NO_ENTRY)
#define BROKEN_ABI_MAJOR FLAGOS_ABI_VERSION_MAJOR
#define BROKEN_NAME "test_no_entry"
#elif defined(BROKEN_PROBE_FAILS)
#define BROKEN_ABI_MAJOR FLAGOS_ABI_VERSION_MAJOR
#define BROKEN_NAME "test_probe_fails"
#elif defined(BROKEN_INIT_FAILS)
#define BROKEN_ABI_MAJOR FLAGOS_ABI_VERSION_MAJOR
#define BROKEN_NAME "test_init_fails"
#elif defined(BROKEN_UNKNOWN_KERNEL_ID)
#define BROKEN_ABI_MAJOR FLAGOS_ABI_VERSION_MAJOR
#define BROKEN_NAME "test_unknown_kernel_id"
#elif defined(BROKEN_DUPLICATE_KERNEL_ID)
#define BROKEN_ABI_MAJOR FLAGOS_ABI_VERSION_MAJOR
#define BROKEN_NAME "test_duplicate_kernel_id"
#elif defined(BROKEN_ENTRY_CRASHES)
#define BROKEN_ABI_MAJOR FLAGOS_ABI_VERSION_MAJOR
#define BROKEN_NAME "test_entry_crashes"
#else
#error "define one BROKEN_* macro"
#endif

/* BROKEN_NO_ENTRY: the same function under another name, hidden (the
 * library is built with -fvisibility=hidden), so dlsym finds no entry symbol
 * and the library exports nothing at all. */
#ifdef BROKEN_NO_ENTRY
#define BROKEN_ENTRY static __attribute__((unused)) flagosStatus_t brokenNotAnEntry
#else
#define BROKEN_ENTRY FLAGOS_EXPORT flagosStatus_t flagosVendorGetTables_v1
#endif

BROKEN_ENTRY(uint16_t core_abi_major, uint16_t core_abi_minor, flagosVendorTables* tables) {
  flagosVendorTables t;
  BROKEN_UNUSED(core_abi_major);
  BROKEN_UNUSED(core_abi_minor);
  if (tables == NULL) return FLAGOS_ERROR_INVALID_ARGUMENT;
#ifdef BROKEN_ENTRY_CRASHES
  /* A vendor library that takes the process down when asked for its tables:
   * a named other backend must never open it. */
  abort();
#endif
  memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  t.abi_major = BROKEN_ABI_MAJOR;
  t.abi_minor = 0;
  t.name = BROKEN_NAME;
  t.version = "0.0.0";
  t.priority = FLAGOS_PRIORITY_ACCELERATOR;
  t.host_addressable = 0;
  t.device = &kDevice;
  t.memory = &kMemory;
  t.stream = &kStream;
  t.getLastError = getLastError;
#if defined(BROKEN_UNKNOWN_KERNEL_ID) || defined(BROKEN_DUPLICATE_KERNEL_ID)
  t.kernels = &kKernels;
#else
  (void)anyKernel;
#endif
  memcpy(tables, &t, tables->struct_size < sizeof(t) ? tables->struct_size : sizeof(t));
  return FLAGOS_SUCCESS;
}
