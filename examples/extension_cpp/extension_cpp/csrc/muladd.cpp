// A TORCH_LIBRARY extension laid out for setup.py, as pytorch/extension-cpp lays it out:
// mymuladd(a, b, c) = a * b + c, its backward, and CPU kernels; the CUDA kernels are in
// cuda/muladd.cu. The schema is defined once here; each device registers its own kernels.
#include <Python.h>

#include <ATen/Operators.h>
#include <torch/all.h>
#include <torch/library.h>

extern "C" {
// An empty Python module, so that setup.py's build can be imported (`from . import _C`): the
// import loads the library, whose static initializers register the ops.
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
}

namespace extension_cpp {

at::Tensor mymuladd_cpu(const at::Tensor& a, const at::Tensor& b, double c) {
  TORCH_CHECK(a.sizes() == b.sizes(), "mymuladd: a and b must have the same shape, got ", a.sizes(), " and ", b.sizes());
  TORCH_CHECK(a.dtype() == at::kFloat && b.dtype() == at::kFloat, "mymuladd: a and b must be float32");
  TORCH_INTERNAL_ASSERT(a.device().type() == at::DeviceType::CPU);
  at::Tensor a_contig = a.contiguous();
  at::Tensor b_contig = b.contiguous();
  at::Tensor result = at::empty(a_contig.sizes(), a_contig.options());
  const float* a_ptr = a_contig.data_ptr<float>();
  const float* b_ptr = b_contig.data_ptr<float>();
  float* out = result.data_ptr<float>();
  for (int64_t i = 0; i < result.numel(); ++i) out[i] = a_ptr[i] * b_ptr[i] + static_cast<float>(c);
  return result;
}

// a * b written out, so the backward can use it for both gradients
at::Tensor mymul_cpu(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.sizes() == b.sizes(), "mymul: a and b must have the same shape");
  TORCH_CHECK(a.dtype() == at::kFloat && b.dtype() == at::kFloat, "mymul: a and b must be float32");
  at::Tensor a_contig = a.contiguous();
  at::Tensor b_contig = b.contiguous();
  at::Tensor result = at::empty(a_contig.sizes(), a_contig.options());
  const float* a_ptr = a_contig.data_ptr<float>();
  const float* b_ptr = b_contig.data_ptr<float>();
  float* out = result.data_ptr<float>();
  for (int64_t i = 0; i < result.numel(); ++i) out[i] = a_ptr[i] * b_ptr[i];
  return result;
}

TORCH_LIBRARY(extension_cpp, m) {
  m.def("mymuladd(Tensor a, Tensor b, float c) -> Tensor");
  m.def("mymul(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(extension_cpp, CPU, m) {
  m.impl("mymuladd", &mymuladd_cpu);
  m.impl("mymul", &mymul_cpu);
}

}  // namespace extension_cpp
