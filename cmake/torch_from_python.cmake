# The installed torch as a C++ dependency, read from the Python that runs
# the build, the way torch.utils.cpp_extension builds a CPU extension.
#
# Why not find_package(Torch): the registry's wheels are CUDA builds, and
# TorchConfig then runs Caffe2's CUDA detection (toolkit, cudart, nvrtc, an
# nvcc that accepts the host compiler), which fails on a machine without a
# CUDA toolkit although the core never touches CUDA. We need four facts:
# the include folders, the library folder, the C++ ABI flag, and the C++
# standard the headers demand (torch >= 2.14's ATen.h #errors below C++20).
#
# Defines the imported target flagos::torch and FLAGOS_TORCH_VERSION,
# FLAGOS_TORCH_CXX_STANDARD.
#
# TORCH_DEVICE_BACKEND_AUTOLOAD=0: `import torch` loads every installed
# device backend's entry point, ours included; a stale one (an editable
# install whose folder is gone) would fail the import and so the build
# that replaces it.
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env TORCH_DEVICE_BACKEND_AUTOLOAD=0 ${Python3_EXECUTABLE} -c [=[
import os, torch
root = os.path.dirname(torch.__file__)
print(torch.__version__)
print(os.path.join(root, "include"))
print(os.path.join(root, "include", "torch", "csrc", "api", "include"))
print(os.path.join(root, "lib"))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
]=]
  OUTPUT_VARIABLE _flagos_torch_out
  ERROR_VARIABLE _flagos_torch_err
  RESULT_VARIABLE _flagos_torch_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _flagos_torch_rc EQUAL 0)
  message(FATAL_ERROR "flagos: cannot import torch with ${Python3_EXECUTABLE}:\n${_flagos_torch_err}")
endif()
string(REPLACE "\n" ";" _flagos_torch_out "${_flagos_torch_out}")
list(GET _flagos_torch_out 0 FLAGOS_TORCH_VERSION)
list(GET _flagos_torch_out 1 _flagos_torch_include)
list(GET _flagos_torch_out 2 _flagos_torch_api_include)
list(GET _flagos_torch_out 3 _flagos_torch_lib_dir)
list(GET _flagos_torch_out 4 _flagos_torch_cxx11_abi)

# For csrc/CMakeLists.txt's probes (Note [Kineto child profiler]).
set(FLAGOS_TORCH_INCLUDE_DIR "${_flagos_torch_include}")
set(FLAGOS_TORCH_LIB_DIR "${_flagos_torch_lib_dir}")
set(FLAGOS_TORCH_CXX11_ABI "${_flagos_torch_cxx11_abi}")

# The standard ATen's own guard asks for; never lower than the project's.
file(READ "${_flagos_torch_include}/ATen/ATen.h" _flagos_aten_h)
if(_flagos_aten_h MATCHES "__cplusplus < 202002L")
  set(FLAGOS_TORCH_CXX_STANDARD 20)
else()
  set(FLAGOS_TORCH_CXX_STANDARD 17)
endif()

set(_flagos_torch_libs)
foreach(_lib c10 torch_cpu torch torch_python)
  find_library(_flagos_torch_lib_${_lib} ${_lib} PATHS "${_flagos_torch_lib_dir}" NO_DEFAULT_PATH)
  if(NOT _flagos_torch_lib_${_lib})
    message(FATAL_ERROR "flagos: lib${_lib}.so not found in ${_flagos_torch_lib_dir}")
  endif()
  list(APPEND _flagos_torch_libs "${_flagos_torch_lib_${_lib}}")
endforeach()

add_library(flagos_torch INTERFACE)
add_library(flagos::torch ALIAS flagos_torch)
# SYSTEM: torch's headers are not ours to warn about.
target_include_directories(flagos_torch SYSTEM INTERFACE "${_flagos_torch_include}"
  "${_flagos_torch_api_include}")
target_compile_definitions(flagos_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${_flagos_torch_cxx11_abi})
target_compile_features(flagos_torch INTERFACE cxx_std_${FLAGOS_TORCH_CXX_STANDARD})
target_link_libraries(flagos_torch INTERFACE ${_flagos_torch_libs})
message(STATUS "flagos: torch ${FLAGOS_TORCH_VERSION} from ${_flagos_torch_lib_dir} "
  "(C++${FLAGOS_TORCH_CXX_STANDARD}, _GLIBCXX_USE_CXX11_ABI=${_flagos_torch_cxx11_abi})")
