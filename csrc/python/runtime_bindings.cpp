// _C bindings of the runtime layer (contract: README.md in this folder).
// Calls that may block on the device release the GIL; all translate C++
// errors into Python ones (torch.OutOfMemoryError included).
#include <ATen/Context.h>
#include <ATen/core/CachingHostAllocator.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/device_lazy_init.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "python/autograd_exit.h"
#include "python/bindings.h"
#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/generator.h"
#include "runtime/host_allocator.h"
#include "runtime/lifecycle.h"
#include "runtime/profiler.h"

namespace py = pybind11;

namespace flagos::python {
namespace {

c10::DeviceIndex resolve(int device) {
  return device < 0 ? currentDevice() : static_cast<c10::DeviceIndex>(device);
}

py::dict backendInfo() {
  const Backend& b = backend();
  const flagosVendorTables& t = b.tables;
  py::dict info;
  info["name"] = b.name;
  info["path"] = b.path;
  info["version"] = t.version ? std::string(t.version) : std::string();
  info["abi"] = std::to_string(t.abi_major) + "." + std::to_string(t.abi_minor);
  info["sdk_name"] = std::string(b.probe.sdk_name, strnlen(b.probe.sdk_name, 64));
  info["sdk_version"] = std::string(b.probe.sdk_version, strnlen(b.probe.sdk_version, 64));
  info["driver_version"] = std::string(b.probe.driver_version, strnlen(b.probe.driver_version, 64));
  info["host_addressable"] = t.host_addressable != 0;
  std::vector<std::string> kernel_ids;
  if (t.kernels != nullptr)
    for (int32_t i = 0; i < t.kernels->num_entries; ++i)
      kernel_ids.emplace_back(t.kernels->entries[i].op_id);
  info["native_kernels"] = kernel_ids.size();
  info["kernel_ids"] = kernel_ids;
  info["compiler"] = t.compiler ? py::object(py::str(t.compiler->language)) : py::none();
  info["collectives"] =
      t.collectives ? py::object(py::str(t.collectives->library_name)) : py::none();
  info["fft"] = t.fft ? py::object(py::str(t.fft->library)) : py::none();
  info["linalg"] = py::none();
  if (t.linalg != nullptr) {
    // The library and the members it fills (linalg.h: each is optional).
    const flagosLinalgTable& l = *t.linalg;
    std::vector<std::string> members;
    const std::pair<const char*, bool> all[] = {
        {"getrf", l.getrf != nullptr}, {"getrs", l.getrs != nullptr},
        {"potrf", l.potrf != nullptr}, {"trsm", l.trsm != nullptr},
        {"geqrf", l.geqrf != nullptr}, {"orgqr", l.orgqr != nullptr},
        {"ormqr", l.ormqr != nullptr}, {"gesvd", l.gesvd != nullptr},
        {"syevd", l.syevd != nullptr}, {"geev", l.geev != nullptr},
        {"sytrf", l.sytrf != nullptr}, {"sytrs", l.sytrs != nullptr}};
    for (const auto& [name, filled] : all)
      if (filled) members.emplace_back(name);
    py::dict d;
    d["library"] = l.library;
    d["members"] = members;
    info["linalg"] = d;
  }
  info["device_activity"] = profilerDeviceActivity();
  info["kineto_profiler"] = kinetoProfilerBuilt();
  py::list devices;
  for (size_t i = 0; i < b.physical_ids.size(); ++i) {
    flagosDeviceProperties props{};
    props.struct_size = sizeof(props);
    check(t.device->getProperties(b.physical_ids[i], &props), "getProperties");
    py::dict d;
    d["index"] = i;
    d["physical"] = b.physical_ids[i];
    d["name"] = std::string(props.name, strnlen(props.name, sizeof(props.name)));
    d["arch"] = std::string(props.arch, strnlen(props.arch, sizeof(props.arch)));
    d["total_memory"] = props.total_memory;
    d["compute_units"] = props.compute_units;
    d["max_work_group_size"] = props.max_work_group_size;
    d["preferred_work_group_size"] = props.preferred_work_group_size;
    // ABI 1.1 members; a 1.0 plugin leaves them 0 ("unknown").
    d["fp64"] = props.fp64 == FLAGOS_FP64_NATIVE ? py::object(py::bool_(true))
                : props.fp64 == FLAGOS_FP64_NONE ? py::object(py::bool_(false))
                                                 : py::none();
    if (i == 0 && (props.autocast_dtype == FLAGOS_DTYPE_FLOAT16 ||
                   props.autocast_dtype == FLAGOS_DTYPE_BFLOAT16)) {
      info["amp_dtype"] = props.autocast_dtype == FLAGOS_DTYPE_FLOAT16 ? "float16" : "bfloat16";
    }
    devices.append(d);
  }
  info["devices"] = devices;
  return info;
}

py::list discoveryReportList() {
  py::list out;
  for (const auto& r : discoveryReport()) {
    py::dict d;
    d["name"] = r.name;
    d["path"] = r.path;
    d["status"] = r.status;
    d["reason"] = r.reason;
    d["priority"] = r.priority;
    out.append(d);
  }
  return out;
}

py::dict memoryStatsDict(int device) {
  const MemoryStats s = memoryStats(resolve(device));
  py::dict d;
  d["allocated"] = s.allocated;
  d["reserved"] = s.reserved;
  d["peak_allocated"] = s.peak_allocated;
  d["peak_reserved"] = s.peak_reserved;
  d["num_allocs"] = s.num_allocs;
  d["num_frees"] = s.num_frees;
  d["num_device_mallocs"] = s.num_device_mallocs;
  d["num_device_frees"] = s.num_device_frees;
  d["num_ooms"] = s.num_ooms;
  d["num_cache_flushes"] = s.num_cache_flushes;
  d["active_blocks"] = s.active_blocks;
  d["cached_blocks"] = s.cached_blocks;
  return d;
}

// One Python wrapper per default generator, created once and kept (as
// torch.cuda.default_generators does), so repeated calls return the same
// object.
py::object defaultGeneratorObject(int device) {
  static std::mutex mutex;
  static std::vector<PyObject*> objects;
  const c10::DeviceIndex index = resolve(device);
  const at::Generator& gen = defaultGenerator(index);  // validates the index
  std::lock_guard<std::mutex> lock(mutex);
  if (objects.size() <= static_cast<size_t>(index)) objects.resize(index + 1, nullptr);
  if (objects[index] == nullptr) {
    objects[index] = THPGenerator_initDefaultGenerator(gen);
    if (objects[index] == nullptr) throw py::error_already_set();
  }
  return py::reinterpret_borrow<py::object>(objects[index]);
}

// Note [A cheap synchronize]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch.flagos.synchronize() closes every timed repetition of a benchmark
// and many training loops' steps; with nothing queued it should cost what a
// function call costs. Through pybind11 (argument conversion, overload
// resolution, its function_call record) and the index parsing in Python it
// was ~7.7k instructions, as much as a native CPU `a + b` on (4, 4). This
// one takes the index as a plain int (-1: the current device), still waits
// without the GIL and translates errors as torch's own C functions do.
PyObject* synchronize(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  // torch's HANDLE_TH_ERRORS only once something throws: its warning
  // handler costs more than the synchronize of an idle device.
  try {
    TORCH_CHECK_TYPE(nargs <= 1, "_synchronize(device=-1) takes at most one argument");
    long device = -1;
    if (nargs == 1) {
      device = PyLong_AsLong(args[0]);
      if (device == -1 && PyErr_Occurred()) return nullptr;
    }
    const c10::DeviceIndex index = resolve(static_cast<int>(device));
    const Backend& b = backend();
    const int32_t physical = physicalDevice(index);
    flagosStatus_t status = FLAGOS_SUCCESS;
    Py_BEGIN_ALLOW_THREADS;  // no pybind11 guard: it looks its internals up each time
    status = b.tables.device->synchronize(physical);
    Py_END_ALLOW_THREADS;
    check(status, "synchronize");
    Py_RETURN_NONE;
  } catch (...) {
    HANDLE_TH_ERRORS
    throw;  // translated as torch's own C functions translate it
    END_HANDLE_TH_ERRORS
  }
}

}  // namespace

void bindRuntime(py::module_& m) {
  using torch::wrap_pybind_function;
  using torch::wrap_pybind_function_no_gil;
  m.def("_initialize",
        wrap_pybind_function_no_gil([](const std::string& backend_name,
                                       const std::vector<std::string>& search_paths,
                                       const std::string& visible_devices) {
          initialize(InitOptions{backend_name, search_paths, visible_devices});
        }),
        py::arg("backend"), py::arg("search_paths"), py::arg("visible_devices"));
  m.def("_is_initialized", []() { return isInitialized(); });
  // Note [Stopping background work]: Python's atexit calls this first thing
  // at interpreter exit. Without the GIL: a build being waited for must not
  // need it, and nothing else is blocked meanwhile. Autograd's device
  // threads first (Note [Autograd threads at exit]): what they release may
  // be tensors whose release needs the GIL and the kernel cache.
  m.def(
      "_stop_background_work",
      [](double seconds) {
        const py::gil_scoped_release no_gil;
        const auto bound = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1e3));
        const bool drained = drainAutogradDeviceThreads(bound);
        return stopBackgroundWork(bound) && drained;
      },
      py::arg("seconds"));
  m.def("_discovery_report", wrap_pybind_function(discoveryReportList));
  m.def("_backend_info", wrap_pybind_function(backendInfo));

  m.def("_device_count", []() { return static_cast<int>(deviceCount()); });
  m.def("_get_device", wrap_pybind_function([]() { return static_cast<int>(currentDevice()); }));
  m.def("_set_device", wrap_pybind_function([](int device) {
          setCurrentDevice(static_cast<c10::DeviceIndex>(device));
        }),
        py::arg("device"));
  // A plain C function, not pybind11's dispatcher (Note [A cheap synchronize]).
  static PyMethodDef synchronize_def = {
      "_synchronize", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&synchronize)),
      METH_FASTCALL, "_synchronize(device=-1): wait for every stream of a device (-1: current)"};
  m.add_object("_synchronize", py::reinterpret_steal<py::object>(PyCFunction_NewEx(
                                   &synchronize_def, nullptr, m.attr("__name__").ptr())));

  m.def("_memory_stats", wrap_pybind_function(memoryStatsDict), py::arg("device"));
  m.def("_empty_cache", wrap_pybind_function_no_gil([]() {
          deviceAllocator()->emptyCache();
          pinnedAllocator()->empty_cache();
        }));
  m.def("_reset_peak_memory_stats", wrap_pybind_function([](int device) {
          deviceAllocator()->resetPeakStats(resolve(device));
        }),
        py::arg("device"));
  m.def("_reset_accumulated_memory_stats", wrap_pybind_function([](int device) {
          deviceAllocator()->resetAccumulatedStats(resolve(device));
        }),
        py::arg("device"));
  m.def("_mem_get_info", wrap_pybind_function_no_gil([](int device) {
          return deviceAllocator()->getMemoryInfo(resolve(device));
        }),
        py::arg("device"));

  m.def("_get_default_generator", wrap_pybind_function(defaultGeneratorObject), py::arg("device"));
  m.def("_init_lazy", wrap_pybind_function([]() {
          torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
          at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
        }));
}

}  // namespace flagos::python
