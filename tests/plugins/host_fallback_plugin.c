/*
 * A test plugin that is the host plugin, except that its native kernels for
 * "relu" and "mse_loss" return FLAGOS_ERROR_FALLBACK: the plugin asks the
 * core to run those calls on the host (status.h). Without its own kernel a
 * relu would take the generated tier and an mse_loss the composite, so a
 * test sees whether the core honours the request.
 *
 * It loads the host plugin from FLAGOS_TEST_HOST_PLUGIN (its build path,
 * fixed at configure time) and hands out its tables with the kernel table
 * and the name replaced.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "flagos/vendor.h"

#ifndef FLAGOS_TEST_HOST_PLUGIN
#error "FLAGOS_TEST_HOST_PLUGIN: the path of libflagos_host.so"
#endif

static const char* const kAskHost[] = {"relu", "mse_loss"};
#define NUM_ASK_HOST ((int32_t)(sizeof(kAskHost) / sizeof(kAskHost[0])))

static const char kReason[] = "test plugin: this call is for the host";

static flagosVendorTables g_host;
static flagosKernelTable g_kernels;
static _Thread_local int t_asked;

static flagosStatus_t askHost(flagosStream_t stream, const flagosTensor* outputs,
                              int32_t num_outputs, const flagosTensor* inputs, int32_t num_inputs,
                              const flagosScalar* scalars, int32_t num_scalars) {
  (void)stream;
  (void)outputs;
  (void)num_outputs;
  (void)inputs;
  (void)num_inputs;
  (void)scalars;
  (void)num_scalars;
  t_asked = 1;
  return FLAGOS_ERROR_FALLBACK;
}

/* Our reason right after askHost, else the host plugin's message. */
static const char* getLastError(void) {
  if (t_asked) {
    t_asked = 0;
    return kReason;
  }
  return g_host.getLastError();
}

static int asksHost(const char* id) {
  for (int32_t i = 0; i < NUM_ASK_HOST; ++i)
    if (strcmp(id, kAskHost[i]) == 0) return 1;
  return 0;
}

/* kAskHost first, then the host's other kernels (IDs stay unique). */
static int buildKernelTable(const flagosKernelTable* host) {
  const int32_t n = host ? host->num_entries : 0;
  flagosKernelEntry* entries = calloc((size_t)(n + NUM_ASK_HOST), sizeof(flagosKernelEntry));
  if (entries == NULL) return 0;
  int32_t k = 0;
  for (int32_t i = 0; i < NUM_ASK_HOST; ++i)
    entries[k++] = (flagosKernelEntry){kAskHost[i], askHost};
  for (int32_t i = 0; i < n; ++i)
    if (!asksHost(host->entries[i].op_id)) entries[k++] = host->entries[i];
  g_kernels.struct_size = sizeof(g_kernels);
  g_kernels.num_entries = k;
  g_kernels.entries = entries;
  return 1;
}

FLAGOS_EXPORT flagosStatus_t flagosVendorGetTables_v1(uint16_t core_abi_major,
                                                      uint16_t core_abi_minor,
                                                      flagosVendorTables* tables) {
  if (tables == NULL) return FLAGOS_ERROR_INVALID_ARGUMENT;
  void* lib = dlopen(FLAGOS_TEST_HOST_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return FLAGOS_ERROR_INTERNAL;
  flagosVendorGetTablesFn entry = (flagosVendorGetTablesFn)dlsym(lib, FLAGOS_VENDOR_ENTRY_SYMBOL);
  if (entry == NULL) return FLAGOS_ERROR_INTERNAL;
  memset(&g_host, 0, sizeof(g_host));
  g_host.struct_size = sizeof(g_host);
  const flagosStatus_t status = entry(core_abi_major, core_abi_minor, &g_host);
  if (status != FLAGOS_SUCCESS) return status;
  if (!buildKernelTable(g_host.kernels)) return FLAGOS_ERROR_OUT_OF_MEMORY;
  const uint32_t size =
      tables->struct_size < sizeof(g_host) ? tables->struct_size : (uint32_t)sizeof(g_host);
  memcpy(tables, &g_host, size);
  tables->struct_size = size;
  tables->name = "test_host_fallback";
  tables->priority = 1; /* below the host plugin: "auto" never picks it */
  tables->kernels = &g_kernels;
  tables->getLastError = getLastError;
  return FLAGOS_SUCCESS;
}
