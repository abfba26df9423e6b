# The operator catalog bridge: generated from ops/catalog.yaml at build time
# against the installed torch (codegen/gen_catalog.py); the hand-written
# bridge (csrc/dispatch/bridge/) is compiled by csrc/CMakeLists.txt. Included
# there when FLAGOS_ENABLE_CATALOG is ON. Nothing generated is committed.
set(FLAGOS_CATALOG_YAML ${CMAKE_SOURCE_DIR}/ops/catalog.yaml)
set(FLAGOS_CATALOG_GEN ${CMAKE_SOURCE_DIR}/codegen/gen_catalog.py)
set(FLAGOS_CATALOG_OUT ${CMAKE_BINARY_DIR}/generated/catalog)

add_custom_command(
  OUTPUT ${FLAGOS_CATALOG_OUT}/catalog_table.cpp
         ${FLAGOS_CATALOG_OUT}/include/flagos/ops.h
         ${FLAGOS_CATALOG_OUT}/catalog_report.txt
  # Without autoload: a stale flagos_torchfl entry point (an editable install
  # whose clone is gone) would make `import torch` fail before we are built.
  COMMAND ${CMAKE_COMMAND} -E env TORCH_DEVICE_BACKEND_AUTOLOAD=0
          ${Python3_EXECUTABLE} ${FLAGOS_CATALOG_GEN}
          --catalog ${FLAGOS_CATALOG_YAML} --out-dir ${FLAGOS_CATALOG_OUT}
  DEPENDS ${FLAGOS_CATALOG_YAML} ${FLAGOS_CATALOG_GEN}
  COMMENT "Generating the operator catalog tables and flagos/ops.h"
  VERBATIM)
add_custom_target(flagos_catalog_gen DEPENDS
  ${FLAGOS_CATALOG_OUT}/catalog_table.cpp ${FLAGOS_CATALOG_OUT}/include/flagos/ops.h)

target_sources(flagos_C PRIVATE ${FLAGOS_CATALOG_OUT}/catalog_table.cpp)
target_include_directories(flagos_C PRIVATE ${FLAGOS_CATALOG_OUT}/include)
target_compile_definitions(flagos_C PRIVATE FLAGOS_ENABLE_CATALOG=1)
add_dependencies(flagos_C flagos_catalog_gen)

# Plugins that want the generated FLAGOS_OP_* constants (include/flagos/ops.h)
# can use this interface target.
add_library(flagos_catalog_headers INTERFACE)
target_include_directories(flagos_catalog_headers INTERFACE ${FLAGOS_CATALOG_OUT}/include)
add_dependencies(flagos_catalog_headers flagos_catalog_gen)
