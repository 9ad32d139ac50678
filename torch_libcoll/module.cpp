// The Python module torch_libcoll._C: the process group's class, made by
// torch_libcoll/__init__.py's creator for torch.distributed.
#include <torch/python.h>

#include "process_group.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  // c10d's ProcessGroup and Store types, which the class below derives
  // from and takes, are registered by torch.distributed.
  py::module::import("torch.distributed");

  py::class_<torch_libcoll::ProcessGroupLibcoll,
             c10::intrusive_ptr<torch_libcoll::ProcessGroupLibcoll>, c10d::ProcessGroup>(
      m, "ProcessGroupLibcoll")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       double timeout_s, bool default_group) {
             return c10::make_intrusive<torch_libcoll::ProcessGroupLibcoll>(
                 store, rank, size,
                 std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0)),
                 default_group);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"),
           py::arg("default_group") = false,
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("transport", [](const torch_libcoll::ProcessGroupLibcoll& pg) {
        return std::string(coll_comm_transport_name(pg.comm()));
      })
      .def_property_readonly("bootstrap", [](const torch_libcoll::ProcessGroupLibcoll& pg) {
        return std::string(coll_comm_bootstrap_name(pg.comm()));
      });

  m.def("_shutdown", &torch_libcoll::shutdown, py::call_guard<py::gil_scoped_release>(),
        "Completes the operations in flight and finalizes libcoll (run at exit).");
}
