/*
 * The public headers are C99: this file includes them all and is compiled
 * with -std=c99 -Wall -Wextra -pedantic -Werror (tests/cpp/CMakeLists.txt
 * also compiles each header alone, to prove every header is self-contained).
 * At run time it checks the layout facts the ABI promises: fixed-width
 * fields and tables that start with their size.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "flagos/vendor.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

int main(void) {
  CHECK(sizeof(flagosStatus_t) == 4);
  CHECK(sizeof(flagosDtype_t) == 4);
  CHECK(sizeof(flagosMemcpyKind_t) == 4);
  CHECK(FLAGOS_DTYPE_SIZE(FLAGOS_DTYPE_FLOAT32) == 4);
  CHECK(FLAGOS_DTYPE_SIZE(FLAGOS_DTYPE_COMPLEX128) == 16);
  CHECK(FLAGOS_DTYPE_SIZE(FLAGOS_DTYPE_BOOL) == 1);

  /* Every table and every struct the core presizes starts with struct_size. */
  CHECK(offsetof(flagosVendorTables, struct_size) == 0);
  CHECK(offsetof(flagosDeviceTable, struct_size) == 0);
  CHECK(offsetof(flagosMemoryTable, struct_size) == 0);
  CHECK(offsetof(flagosStreamTable, struct_size) == 0);
  CHECK(offsetof(flagosKernelTable, struct_size) == 0);
  CHECK(offsetof(flagosCompilerTable, struct_size) == 0);
  CHECK(offsetof(flagosCollectiveTable, struct_size) == 0);
  CHECK(offsetof(flagosProbeInfo, struct_size) == 0);
  CHECK(offsetof(flagosDeviceProperties, struct_size) == 0);

  /* Versions sit right after the size, as fixed-width fields. */
  CHECK(offsetof(flagosVendorTables, abi_major) == 4);
  CHECK(offsetof(flagosVendorTables, abi_minor) == 6);
  CHECK(sizeof(((flagosScalar*)0)->i) == 8);
  CHECK(offsetof(flagosScalar, i) == 8);
  CHECK(sizeof(flagosUniqueId) == FLAGOS_UNIQUE_ID_BYTES);

  /* ABI 1.1: appended members sit after every 1.0 member (a 1.0 plugin's
   * smaller struct ends exactly before them), and flagosStatusString names
   * every code. */
  CHECK(offsetof(flagosDeviceProperties, fp64) >=
        offsetof(flagosDeviceProperties, preferred_work_group_size) + sizeof(uint32_t));
  CHECK(offsetof(flagosDeviceProperties, autocast_dtype) > offsetof(flagosDeviceProperties, fp64));
  CHECK(strcmp(flagosStatusString(FLAGOS_ERROR_NOT_READY), "FLAGOS_ERROR_NOT_READY") == 0);
  CHECK(strcmp(flagosStatusString(FLAGOS_ERROR_INTERNAL), "FLAGOS_ERROR_INTERNAL") == 0);
  CHECK(strcmp(flagosStatusString((flagosStatus_t)999), "unknown flagos status") == 0);

  if (failures == 0) printf("public headers: C99 and layout checks passed\n");
  return failures == 0 ? 0 : 1;
}
