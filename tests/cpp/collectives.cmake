# The host plugin's collectives (host-shm) across forked processes, and a
# bandwidth benchmark (built, not run by ctest):
#   collectives_bench [nranks] [max bytes] [dtype]
add_executable(collectives_test collectives_test.cpp)
add_executable(collectives_bench collectives_bench.cpp)
foreach(target collectives_test collectives_bench)
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/include)
  target_compile_definitions(${target} PRIVATE
    FLAGOS_DEFAULT_COLLECTIVES_PLUGIN="$<TARGET_FILE:flagos_host_plugin>")
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS})
  add_dependencies(${target} flagos_host_plugin)
endforeach()
target_link_libraries(collectives_test PRIVATE GTest::gtest)

# Every rank is a child process with one host device; a small arena each.
add_test(NAME collectives COMMAND collectives_test)
set_tests_properties(collectives PROPERTIES
  ENVIRONMENT "FLAGOS_HOST_MEMORY_LIMIT=256MiB"
  ENVIRONMENT_MODIFICATION "FLAGOS_HOST_DEVICES=unset:;FLAGOS_HOST_COMM_TIMEOUT_MS=unset:"
  TIMEOUT 180)
