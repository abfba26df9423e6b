# The vendor-facing headers, shipped inside the package so that a plugin
# built outside this tree finds them with flagos_torchfl.get_include(): the
# ABI (include/flagos/), the plugin kit (flagos_kit/) and, when the catalog
# is built, its generated constants (flagos/ops.h). Included by
# csrc/CMakeLists.txt after codegen/catalog.cmake.
set(FLAGOS_PY_INCLUDE_DIR ${FLAGOS_PY_OUTPUT_DIR}/include)
file(GLOB _abi_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/flagos/*.h)
file(GLOB _kit_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kit/flagos_kit/*.h)
set(_generated_headers)
if(FLAGOS_ENABLE_CATALOG)
  set(_generated_headers ${FLAGOS_CATALOG_OUT}/include/flagos/ops.h)
endif()
set(_stamp ${CMAKE_CURRENT_BINARY_DIR}/package_headers.stamp)
add_custom_command(
  OUTPUT ${_stamp}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FLAGOS_PY_INCLUDE_DIR}/flagos
          ${FLAGOS_PY_INCLUDE_DIR}/flagos_kit
  COMMAND ${CMAKE_COMMAND} -E copy_if_different ${_abi_headers} ${_generated_headers}
          ${FLAGOS_PY_INCLUDE_DIR}/flagos
  COMMAND ${CMAKE_COMMAND} -E copy_if_different ${_kit_headers} ${FLAGOS_PY_INCLUDE_DIR}/flagos_kit
  COMMAND ${CMAKE_COMMAND} -E touch ${_stamp}
  DEPENDS ${_abi_headers} ${_kit_headers} ${_generated_headers}
  COMMENT "Copying the vendor headers into the package (get_include())"
  VERBATIM)
add_custom_target(flagos_package_headers ALL DEPENDS ${_stamp})
