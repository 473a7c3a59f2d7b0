"""kwb's kernel library, installed as the package `kwb_kernels` (the name `kernels` is taken on
PyPI). Each folder is a kernel: <name>.cu, <name>.cpp, ops.py, spec.py. The loader reads these
folders by path; nothing here is imported as Python except through workbench.load()."""
