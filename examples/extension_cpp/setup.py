"""How this project builds without kwb (pip install .): torch's CppExtension/CUDAExtension.
kwb does not run it; wb.load(<this folder>) compiles extension_cpp/csrc/ itself."""
import glob
import os

from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

here = os.path.dirname(os.path.abspath(__file__))
sources = glob.glob(os.path.join(here, "extension_cpp", "csrc", "*.cpp"))
cuda_sources = glob.glob(os.path.join(here, "extension_cpp", "csrc", "cuda", "*.cu"))
use_cuda = bool(cuda_sources) and os.environ.get("USE_CUDA", "1") == "1"
extension = CUDAExtension if use_cuda else CppExtension

setup(
    name="extension_cpp",
    packages=find_packages(),
    ext_modules=[extension("extension_cpp._C", sources + (cuda_sources if use_cuda else []),
                           py_limited_api=True)],
    cmdclass={"build_ext": BuildExtension},
)
