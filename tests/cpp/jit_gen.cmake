# --- the kernel generator and kernel cache (csrc/jit/gen) -----------------
# Every tests/cpp/jit_gen/*_test.cpp goes into one executable. Tests that
# compile generated C call the system C compiler (FLAGOS_TEST_CC); those
# that need OpenCL skip when no OpenCL device is present.
file(GLOB _jit_gen_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/jit_gen/*.cpp)
if(_jit_gen_tests)
  add_executable(jit_gen_test ${_jit_gen_tests})
  target_compile_options(jit_gen_test PRIVATE -Wall -Wextra -Wno-unused-parameter)
  # FLAGOS_CATALOG_YAML: the catalog the row tests read (not found through
  # __FILE__, which ccache's base_dir makes relative).
  target_compile_definitions(jit_gen_test PRIVATE
    FLAGOS_CATALOG_YAML="${CMAKE_SOURCE_DIR}/ops/catalog.yaml"
    FLAGOS_TEST_CC="${CMAKE_C_COMPILER}"
    FLAGOS_HOST_PLUGIN="$<TARGET_FILE:flagos_host_plugin>")
  target_link_libraries(jit_gen_test PRIVATE flagos_jit_gen GTest::gtest_main ${CMAKE_DL_LIBS})
  add_dependencies(jit_gen_test flagos_host_plugin)
  if(TARGET flagos_opencl_plugin)
    target_compile_definitions(jit_gen_test PRIVATE
      FLAGOS_OPENCL_PLUGIN="$<TARGET_FILE:flagos_opencl_plugin>")
    add_dependencies(jit_gen_test flagos_opencl_plugin)
  endif()
  # The "cuda-c" kernels compile with NVRTC where cmake/cuda_sdk.cmake found it.
  if(FLAGOS_NVRTC_LIBRARY)
    target_compile_definitions(jit_gen_test PRIVATE
      FLAGOS_TEST_NVRTC_LIBRARY="${FLAGOS_NVRTC_LIBRARY}")
  endif()
  # Three ctest entries over one executable, so that ctest -j runs its
  # longest groups side by side: the CUDA C builds (NVRTC), the OpenCL C
  # builds (PoCL) and the rest. COST starts the long ones first on a machine
  # with no timings of an earlier run (docs/testing.md).
  add_test(NAME jit_gen COMMAND jit_gen_test --gtest_filter=-CudaGenerated.*:OpenCL*)
  add_test(NAME jit_gen_cuda_c COMMAND jit_gen_test --gtest_filter=CudaGenerated.*)
  add_test(NAME jit_gen_opencl_c COMMAND jit_gen_test --gtest_filter=OpenCL*)
  set_tests_properties(jit_gen jit_gen_cuda_c jit_gen_opencl_c PROPERTIES
    SKIP_RETURN_CODE 77 COST 100)
endif()
