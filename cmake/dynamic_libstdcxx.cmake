# Note [Dynamic libstdc++]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# The core shares C++ objects with torch (streams, strings, exceptions, and
# the locale facets every std::ostringstream looks up by a process-wide id),
# so it must use the process's one libstdc++.so.6. A compiler whose library
# folder has libstdc++.a but no libstdc++.so development link (the GPU
# machine's image: Ubuntu 24.04's g++ 13 without libstdc++-13-dev's symlink)
# silently links the static library instead: the first `s << 42` in the core
# then indexed torch's locale with the static copy's facet id and called a
# codecvt where it meant num_put (a segfault in the first generated kernel's
# emit, seen on the H200). When the compiler cannot find libstdc++.so, this
# gives it one: a link in the build folder to the runtime library.
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
  OUTPUT_VARIABLE _flagos_libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT IS_ABSOLUTE "${_flagos_libstdcxx}" OR NOT EXISTS "${_flagos_libstdcxx}")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6
    OUTPUT_VARIABLE _flagos_libstdcxx6 OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT IS_ABSOLUTE "${_flagos_libstdcxx6}" OR NOT EXISTS "${_flagos_libstdcxx6}")
    find_library(_flagos_libstdcxx6 NAMES libstdc++.so.6)
  endif()
  if(NOT EXISTS "${_flagos_libstdcxx6}")
    message(FATAL_ERROR "flagos: ${CMAKE_CXX_COMPILER} finds no libstdc++.so and no "
      "libstdc++.so.6: it would link libstdc++ statically (Note [Dynamic libstdc++], "
      "cmake/dynamic_libstdcxx.cmake). Install the compiler's libstdc++ development package.")
  endif()
  set(_flagos_dir ${CMAKE_BINARY_DIR}/libstdcxx)
  file(MAKE_DIRECTORY ${_flagos_dir})
  file(CREATE_LINK ${_flagos_libstdcxx6} ${_flagos_dir}/libstdc++.so SYMBOLIC)
  string(APPEND CMAKE_SHARED_LINKER_FLAGS " -L${_flagos_dir}")
  string(APPEND CMAKE_EXE_LINKER_FLAGS " -L${_flagos_dir}")
  message(STATUS "flagos: ${CMAKE_CXX_COMPILER} has no libstdc++.so; linking ${_flagos_libstdcxx6}")
endif()
