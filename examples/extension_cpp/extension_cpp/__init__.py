"""extension_cpp as setup.py builds it: `import extension_cpp` loads the compiled _C library,
which registers the ops, then the Python side. kwb loads the same sources without setup.py."""
from . import _C, ops  # noqa: F401
