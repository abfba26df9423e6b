# The CUDA SDK's headers and NVRTC, for the cuda plugin (backends/cuda) and
# the tests that compile the generator's CUDA C (tests/cpp/jit_gen). Nothing
# here is linked: the plugin opens libcuda.so.1, NVRTC, cuBLASLt, cuDNN and
# NCCL at run time, so it builds on a machine without a GPU or driver.
#
# Where the headers come from, first match wins: FLAGOS_CUDA_INCLUDE_DIRS
# (a list), the build Python's `nvidia` packages (torch's CUDA wheels and
# nvidia-cuda-nvrtc install them: nvidia/cu13/include, nvidia/cudnn/include,
# nvidia/nccl/include, ...), then CUDA_HOME and /usr/local/cuda.
#
# Included once, by the top-level CMakeLists.txt; sets:
#   FLAGOS_CUDA_FOUND           cuda.h and nvrtc.h were found (the plugin builds)
#   FLAGOS_CUDA_INCLUDE_DIRS    the folders holding them and the optional ones
#   FLAGOS_CUDA_HAVE_CUBLASLT   cublasLt.h (and crt/host_defines.h): native GEMMs
#   FLAGOS_CUDA_HAVE_CUDNN      cudnn.h: native convolutions
#   FLAGOS_CUDA_HAVE_NCCL       nccl.h: the collectives table
#   FLAGOS_NVRTC_LIBRARY        libnvrtc.so.* beside nvrtc.h ("" if none): the
#                               tests that compile CUDA C load it
#   FLAGOS_CUDA_LIBRARY_DIRS    the `nvidia` packages' lib folders (tests' run-time path)
set(_roots "")
if(Python3_EXECUTABLE)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c
      "import importlib.util as u, os; s = u.find_spec('nvidia'); print(';'.join(s.submodule_search_locations) if s and s.submodule_search_locations else '')"
    OUTPUT_VARIABLE _nvidia_roots OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  list(APPEND _roots ${_nvidia_roots})
endif()
set(_include_hints ${FLAGOS_CUDA_INCLUDE_DIRS})
set(FLAGOS_CUDA_LIBRARY_DIRS "")
foreach(root IN LISTS _roots)
  file(GLOB _incs LIST_DIRECTORIES true "${root}/*/include")
  file(GLOB _libs LIST_DIRECTORIES true "${root}/*/lib")
  list(APPEND _include_hints ${_incs})
  list(APPEND FLAGOS_CUDA_LIBRARY_DIRS ${_libs})
endforeach()
if(DEFINED ENV{CUDA_HOME})
  list(APPEND _include_hints "$ENV{CUDA_HOME}/include")
endif()
list(APPEND _include_hints /usr/local/cuda/include)

function(_flagos_cuda_header var header)
  find_path(${var} ${header} HINTS ${_include_hints} NO_DEFAULT_PATH)
endfunction()
_flagos_cuda_header(FLAGOS_CUDA_H_DIR cuda.h)
_flagos_cuda_header(FLAGOS_NVRTC_H_DIR nvrtc.h)
_flagos_cuda_header(FLAGOS_CUBLASLT_H_DIR cublasLt.h)
_flagos_cuda_header(FLAGOS_CUDNN_H_DIR cudnn.h)
_flagos_cuda_header(FLAGOS_NCCL_H_DIR nccl.h)
# cuBLASLt's and cuDNN's headers include the runtime API's, which need the
# compiler's crt/ folder: the toolkit has it, the cu13 wheel does not.
_flagos_cuda_header(FLAGOS_CUDA_CRT_DIR crt/host_defines.h)

set(FLAGOS_CUDA_FOUND OFF)
set(FLAGOS_CUDA_INCLUDE_DIRS "")
set(FLAGOS_NVRTC_LIBRARY "")
if(FLAGOS_CUDA_H_DIR AND FLAGOS_NVRTC_H_DIR)
  set(FLAGOS_CUDA_FOUND ON)
  list(APPEND FLAGOS_CUDA_INCLUDE_DIRS ${FLAGOS_CUDA_H_DIR} ${FLAGOS_NVRTC_H_DIR})
  file(GLOB _nvrtc "${FLAGOS_NVRTC_H_DIR}/../lib/libnvrtc.so.*"
    "${FLAGOS_NVRTC_H_DIR}/../lib64/libnvrtc.so.*")
  list(FILTER _nvrtc EXCLUDE REGEX "alt|builtins")
  if(_nvrtc)
    list(GET _nvrtc 0 _nvrtc)
    get_filename_component(FLAGOS_NVRTC_LIBRARY ${_nvrtc} REALPATH)
  endif()
endif()
foreach(part CUBLASLT CUDNN NCCL)
  set(FLAGOS_CUDA_HAVE_${part} OFF)
  if(FLAGOS_CUDA_FOUND AND FLAGOS_${part}_H_DIR AND FLAGOS_CUDA_CRT_DIR)
    set(FLAGOS_CUDA_HAVE_${part} ON)
    list(APPEND FLAGOS_CUDA_INCLUDE_DIRS ${FLAGOS_${part}_H_DIR})
  endif()
endforeach()
if(FLAGOS_CUDA_CRT_DIR)
  list(APPEND FLAGOS_CUDA_INCLUDE_DIRS ${FLAGOS_CUDA_CRT_DIR})
endif()
list(REMOVE_DUPLICATES FLAGOS_CUDA_INCLUDE_DIRS)
