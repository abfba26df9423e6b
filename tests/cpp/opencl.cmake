# Tests of the opencl plugin (backends/opencl), included by CMakeLists.txt;
# nothing when the plugin was not built (its SDK not found):
#   abi_conformance_opencl*       the ABI conformance suite against it, in a
#                                 default, a two-device and a small-memory
#                                 environment
#   opencl_plugin*                its own tests: the compiler table, priority,
#                                 virtual addresses (opencl_compiler_test.cpp)
#   opencl_plugin_exports         it exports only its entry symbol
# Exit code 77 (ctest: skipped) where no OpenCL device is found. PoCL's CPU
# device serves them all here; POCL_DEVICES="pthread pthread" makes two.
if(NOT TARGET flagos_opencl_plugin)
  return()  # the OpenCL SDK was not found: backends/opencl skipped itself
endif()
add_dependencies(abi_conformance_test flagos_opencl_plugin)

# A developer's FLAGOS_OPENCL_* must not leak into the entries.
set(_opencl_defaults
  "FLAGOS_OPENCL_DEVICE_TYPE=unset:" "FLAGOS_OPENCL_MEMORY_LIMIT=unset:" "POCL_DEVICES=unset:")
set(_opencl_conformance "")

add_test(NAME abi_conformance_opencl
  COMMAND abi_conformance_test ${_opencl_conformance} $<TARGET_FILE:flagos_opencl_plugin>)
set_tests_properties(abi_conformance_opencl PROPERTIES
  ENVIRONMENT_MODIFICATION "${_opencl_defaults}" SKIP_RETURN_CODE 77)

add_test(NAME abi_conformance_opencl_two_devices
  COMMAND abi_conformance_test ${_opencl_conformance} $<TARGET_FILE:flagos_opencl_plugin>)
set_tests_properties(abi_conformance_opencl_two_devices PROPERTIES
  ENVIRONMENT "POCL_DEVICES=pthread pthread"
  ENVIRONMENT_MODIFICATION "FLAGOS_OPENCL_DEVICE_TYPE=unset:;FLAGOS_OPENCL_MEMORY_LIMIT=unset:"
  SKIP_RETURN_CODE 77)

# A 4 MiB device: out-of-memory is distinct and accounted exactly.
add_test(NAME abi_conformance_opencl_oom
  COMMAND abi_conformance_test
    "--gtest_filter=Memory.GetInfo:Memory.OutOfMemoryIsDistinct:Memory.MallocFreeRejectBadArguments:Memory.MallocFreeAligned:Memory.AllocationsDoNotOverlap"
    $<TARGET_FILE:flagos_opencl_plugin>)
set_tests_properties(abi_conformance_opencl_oom PROPERTIES
  ENVIRONMENT "FLAGOS_OPENCL_MEMORY_LIMIT=4MiB"
  ENVIRONMENT_MODIFICATION "FLAGOS_OPENCL_DEVICE_TYPE=unset:;POCL_DEVICES=unset:"
  SKIP_RETURN_CODE 77)

# --- the plugin's own tests, on the conformance harness ---------------------
find_package(OpenCL REQUIRED)  # found already: the plugin target exists
add_executable(opencl_plugin_test conformance_main.cpp opencl_compiler_test.cpp)
target_include_directories(opencl_plugin_test PRIVATE ${CMAKE_SOURCE_DIR}/include)
target_compile_definitions(opencl_plugin_test PRIVATE
  FLAGOS_DEFAULT_CONFORMANCE_PLUGIN="$<TARGET_FILE:flagos_opencl_plugin>")
target_compile_options(opencl_plugin_test PRIVATE -Wall -Wextra)
# OpenCL itself only to ask whether the machine has a GPU (the priority rule).
target_link_libraries(opencl_plugin_test PRIVATE
  GTest::gtest Threads::Threads OpenCL::OpenCL ${CMAKE_DL_LIBS})
add_dependencies(opencl_plugin_test flagos_opencl_plugin)

add_test(NAME opencl_plugin COMMAND opencl_plugin_test)
set_tests_properties(opencl_plugin PROPERTIES
  ENVIRONMENT_MODIFICATION "${_opencl_defaults}" SKIP_RETURN_CODE 77 COST 50)

add_test(NAME opencl_plugin_two_devices COMMAND opencl_plugin_test
  "--gtest_filter=Opencl.CopiesAndWaitsAcrossDevices:Opencl.IdentityAndPriority")
set_tests_properties(opencl_plugin_two_devices PROPERTIES
  ENVIRONMENT "POCL_DEVICES=pthread pthread"
  ENVIRONMENT_MODIFICATION "FLAGOS_OPENCL_DEVICE_TYPE=unset:;FLAGOS_OPENCL_MEMORY_LIMIT=unset:"
  SKIP_RETURN_CODE 77)

add_test(NAME opencl_plugin_memory_limit COMMAND opencl_plugin_test
  "--gtest_filter=Opencl.MemoryLimitIsHonoured")
set_tests_properties(opencl_plugin_memory_limit PROPERTIES
  ENVIRONMENT "FLAGOS_OPENCL_MEMORY_LIMIT=4MiB"
  ENVIRONMENT_MODIFICATION "FLAGOS_OPENCL_DEVICE_TYPE=unset:;POCL_DEVICES=unset:"
  SKIP_RETURN_CODE 77)

add_test(NAME opencl_plugin_exports
  COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIBRARY=$<TARGET_FILE:flagos_opencl_plugin>
          -P ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.cmake)

# --- its CLBlast kernel table (backends/opencl/kernels/) --------------------
add_executable(opencl_kernels_test conformance_main.cpp opencl_kernels_test.cpp)
target_include_directories(opencl_kernels_test PRIVATE ${CMAKE_SOURCE_DIR}/include)
target_compile_definitions(opencl_kernels_test PRIVATE
  FLAGOS_DEFAULT_CONFORMANCE_PLUGIN="$<TARGET_FILE:flagos_opencl_plugin>")
target_compile_options(opencl_kernels_test PRIVATE -Wall -Wextra)
target_link_libraries(opencl_kernels_test PRIVATE GTest::gtest Threads::Threads ${CMAKE_DL_LIBS})
add_dependencies(opencl_kernels_test flagos_opencl_plugin)
add_test(NAME opencl_kernels COMMAND opencl_kernels_test)
set_tests_properties(opencl_kernels PROPERTIES
  ENVIRONMENT_MODIFICATION "${_opencl_defaults}" SKIP_RETURN_CODE 77 COST 50)
# The same cases with every GEMM on CLBlast (by default the small ones run on
# the plugin's own kernel, Note [Small GEMMs]).
add_test(NAME opencl_kernels_clblast COMMAND opencl_kernels_test)
set_tests_properties(opencl_kernels_clblast PROPERTIES
  ENVIRONMENT_MODIFICATION "${_opencl_defaults};FLAGOS_OPENCL_SMALL_GEMM=set:0"
  SKIP_RETURN_CODE 77)

# --- benchmarks/clblast_direct: CLBlast SGEMM without flagos ----------------
# The baseline of benchmarks/bench_gemm_opencl.py ("flagos vs direct CLBlast").
if(FLAGOS_CLBLAST_LIBRARY AND FLAGOS_CLBLAST_INCLUDE_DIR)
  add_executable(clblast_direct ${CMAKE_SOURCE_DIR}/benchmarks/clblast_direct.cpp)
  target_compile_definitions(clblast_direct PRIVATE CL_TARGET_OPENCL_VERSION=120)
  target_include_directories(clblast_direct PRIVATE ${FLAGOS_CLBLAST_INCLUDE_DIR})
  target_link_libraries(clblast_direct PRIVATE ${FLAGOS_CLBLAST_LIBRARY} OpenCL::OpenCL)
  set_target_properties(clblast_direct PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/benchmarks)
endif()
