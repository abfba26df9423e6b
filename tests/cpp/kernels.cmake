# --- the kernel generator and kernel cache (csrc/kernels) -----------------
# Every tests/cpp/kernels/*_test.cpp goes into one executable. Tests that
# compile generated C call the system C compiler (FLAGOS_TEST_CC); those
# that need OpenCL skip when no OpenCL device is present.
file(GLOB _kernels_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/*.cpp)
if(_kernels_tests)
  add_executable(kernels_test ${_kernels_tests})
  target_compile_options(kernels_test PRIVATE -Wall -Wextra -Wno-unused-parameter)
  # FLAGOS_CATALOG_YAML: the catalog the row tests read (not found through
  # __FILE__, which ccache's base_dir makes relative).
  target_compile_definitions(kernels_test PRIVATE
    FLAGOS_CATALOG_YAML="${CMAKE_SOURCE_DIR}/ops/catalog.yaml"
    FLAGOS_TEST_CC="${CMAKE_C_COMPILER}"
    FLAGOS_HOST_PLUGIN="$<TARGET_FILE:flagos_host_plugin>")
  target_link_libraries(kernels_test PRIVATE flagos_kernels GTest::gtest_main ${CMAKE_DL_LIBS})
  add_dependencies(kernels_test flagos_host_plugin)
  if(TARGET flagos_opencl_plugin)
    target_compile_definitions(kernels_test PRIVATE
      FLAGOS_OPENCL_PLUGIN="$<TARGET_FILE:flagos_opencl_plugin>")
    add_dependencies(kernels_test flagos_opencl_plugin)
  endif()
  # The "cuda-c" kernels compile with NVRTC where cmake/cuda_sdk.cmake found it.
  if(FLAGOS_NVRTC_LIBRARY)
    target_compile_definitions(kernels_test PRIVATE
      FLAGOS_TEST_NVRTC_LIBRARY="${FLAGOS_NVRTC_LIBRARY}")
  endif()
  add_test(NAME kernels COMMAND kernels_test)
  set_tests_properties(kernels PROPERTIES SKIP_RETURN_CODE 77)
endif()
