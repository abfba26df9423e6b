# The ABI conformance suite and the exports check on every other plugin
# under backends/ (the skeleton, a vendor's new folder), with no edit here:
# backends/CMakeLists.txt lists each plugin target in FLAGOS_PLUGIN_TARGETS.
# The host and opencl plugins have their own entries (several environments).
get_property(_plugins GLOBAL PROPERTY FLAGOS_PLUGIN_TARGETS)
foreach(target IN LISTS _plugins)
  if(target STREQUAL "flagos_host_plugin" OR target STREQUAL "flagos_opencl_plugin")
    continue()
  endif()
  string(REGEX REPLACE "^flagos_(.*)_plugin$" "\\1" name ${target})
  add_dependencies(abi_conformance_test ${target})
  add_test(NAME abi_conformance_${name} COMMAND abi_conformance_test $<TARGET_FILE:${target}>)
  set_tests_properties(abi_conformance_${name} PROPERTIES SKIP_RETURN_CODE 77)
  add_test(NAME ${name}_plugin_exports
    COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIBRARY=$<TARGET_FILE:${target}>
            -P ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.cmake)
endforeach()

# A plugin as built against ABI 1.0 (tests/plugins/abi_1_0_plugin.cpp) still
# conforms under a 1.1 suite.
add_dependencies(abi_conformance_test flagos_test_abi_1_0)
add_test(NAME abi_conformance_abi_1_0
  COMMAND abi_conformance_test $<TARGET_FILE:flagos_test_abi_1_0>)
set_tests_properties(abi_conformance_abi_1_0 PROPERTIES SKIP_RETURN_CODE 77)
