// vector_add's public function, k.vector_add: a builtin that calls the op through the dispatcher
// (autograd, fake tensors and dispatch modes all apply) with none of the Python layers of a
// torch.ops call, and no Python frame of its own. 2-core CPU, 2^20 fp32, caches flushed before
// each call, calls in turns: eager 717 us, this entry 723, torch.ops 778
// (benchmarks/cpu_call_overhead.py). What is left of the gap to eager lies below this entry: in
// one run of benchmarks/cpu_add_paths.py eager took 315 us, the same loop through load_inline 320,
// this entry 345 and the op below autograd 357.
// Anything but two plain tensors by position outside a torch function mode (a
// __torch_function__ subclass, an fx Proxy, a mode, keywords, a wrong type or count) takes
// torch.ops, which handles overrides and names the bad argument. torch.compile traces ops.py's polyfill instead (substitute_in_graph).
// A unit of its own: pybind11's headers take 13 s to compile on that machine.
#include <ATen/PythonTorchFunctionTLS.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "kwb_library.h"

namespace {

namespace py = pybind11;

// Two plain tensors, by position, outside any torch function mode.
bool plain_call(const py::args& args, const py::kwargs& kwargs) {
  return args.size() == 2 && kwargs.empty() && THPVariable_CheckExact(args[0].ptr()) &&
         THPVariable_CheckExact(args[1].ptr()) && !at::impl::torch_function_mode_enabled();
}

py::object vector_add(const py::args& args, const py::kwargs& kwargs) {
  if (!plain_call(args, kwargs)) {
    py::object op = py::module_::import("torch").attr("ops").attr(kwb::library_namespace().c_str()).attr("vector_add");
    return op(*args, **kwargs);
  }
  using VectorAddOp = at::Tensor(const at::Tensor&, const at::Tensor&);
  static const auto op = kwb::typed_op<VectorAddOp>("vector_add");
  const at::Tensor& a = THPVariable_Unpack(args[0].ptr());
  const at::Tensor& b = THPVariable_Unpack(args[1].ptr());
  at::Tensor out;
  {
    py::gil_scoped_release no_gil;  // as torch's own bindings: other threads run meanwhile
    out = op.call(a, b);
  }
  PyObject* wrapped = THPVariable_Wrap(std::move(out));
  if (wrapped == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(wrapped);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::options options;
  options.disable_function_signatures();  // written below: the typed one, and Python's for inspect
  m.def("vector_add", &vector_add,
        "vector_add(a, b)\n--\n\n"  // __text_signature__: inspect.signature reads (a, b)
        "vector_add(a: Tensor, b: Tensor) -> Tensor\n\n"
        "a + b, elementwise; a and b of one shape, dtype and device. Differentiable in both.");
}
