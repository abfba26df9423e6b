# Checks that a plugin library exports exactly one symbol, the versioned
# entry point (Note [Plugin symbol isolation]: everything else is hidden).
#   cmake -DNM=<nm> -DLIBRARY=<lib.so> -P check_exports.cmake
execute_process(
  COMMAND ${NM} -D --defined-only ${LIBRARY}
  OUTPUT_VARIABLE symbols
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIBRARY}")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${symbols}")
set(exported "")
foreach(line IN LISTS lines)
  # "<address> <type> <name>"
  if(line MATCHES "^[0-9a-fA-F]+ [A-Za-z] (.+)$")
    list(APPEND exported "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(NOT exported STREQUAL "flagosVendorGetTables_v1")
  message(FATAL_ERROR "${LIBRARY} must export only flagosVendorGetTables_v1, exports: ${exported}")
endif()
message(STATUS "${LIBRARY}: exports only flagosVendorGetTables_v1")
