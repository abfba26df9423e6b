// _C bindings of the communication plane (contract: README.md in this
// folder, "Python bindings"). The Python side (flagos_torchfl/distributed.py)
// registers the backend with torch.distributed and builds the inner gloo
// backend of the host route; everything else happens here.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>

#include "comm/backend.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace flagos::python {
namespace {

using comm::FcclBackend;

c10::intrusive_ptr<c10d::Backend> createBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                int rank, int size,
                                                std::chrono::milliseconds timeout,
                                                const std::string& route, py::object gloo,
                                                const std::string& group_name) {
  comm::GroupInfo group;
  group.store = store;
  group.rank = rank;
  group.size = size;
  group.timeout = timeout;
  group.name = group_name;
  std::unique_ptr<comm::Route> impl;
  if (route == "vendor") {
    impl = comm::makeVendorRoute(group);
  } else {
    TORCH_CHECK(route == "host", "fccl: unknown route '", route, "' (vendor or host)");
    TORCH_CHECK(!gloo.is_none(), "fccl: the host route needs a gloo backend");
    impl = comm::makeHostRoute(group, gloo.cast<c10::intrusive_ptr<c10d::Backend>>());
  }
  return c10::make_intrusive<FcclBackend>(std::move(group), std::move(impl));
}

py::object backendInfo(const c10::intrusive_ptr<c10d::Backend>& backend) {
  auto* fccl = dynamic_cast<FcclBackend*>(backend.get());
  if (fccl == nullptr) return py::none();
  py::dict info;
  info["route"] = comm::routeName(fccl->routeKind());
  info["library"] = fccl->library();
  info["rank"] = fccl->getRank();
  info["size"] = fccl->getSize();
  info["group"] = fccl->group().name;
  info["timeout_ms"] = fccl->group().timeout.count();
  return std::move(info);
}

}  // namespace

void bindComm(py::module_& m) {
  m.def("_comm_backend_name", [] { return std::string(comm::kBackendName); });
  m.def("_comm_mode", [] { return std::string(comm::modeName(comm::modeFromEnv())); });
  // mode: "auto", "vendor" or "host"; None reads FLAGOS_COMM.
  m.def(
      "_comm_choose_route",
      [](std::optional<std::string> mode) {
        comm::Mode m = comm::modeFromEnv();
        if (mode) {
          TORCH_CHECK_VALUE(*mode == "auto" || *mode == "vendor" || *mode == "host",
                            "fccl: route '", *mode, "' is not auto, vendor or host");
          m = *mode == "vendor" ? comm::Mode::kVendor
                                : (*mode == "host" ? comm::Mode::kHost : comm::Mode::kAuto);
        }
        return std::string(comm::routeName(comm::chooseRoute(m)));
      },
      py::arg("mode") = py::none());
  m.def("_comm_vendor_library", [] { return comm::vendorLibrary(); });
  m.def("_comm_create_backend", &createBackend, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), py::arg("route"), py::arg("gloo"), py::arg("group_name"));
  m.def("_comm_backend_info", &backendInfo, py::arg("backend"));
}

}  // namespace flagos::python
