"""Where builds go: the extensions cache root torch uses, made if missing."""
from __future__ import annotations

from pathlib import Path

from kwb_store import layout

from . import toolchain
from .errors import cache_error


def cache_root() -> Path:
    """TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions/<py>_<cu>/."""
    root = layout.default_root(toolchain.torch_info().cuda)
    try:  # a root under a file, or unwritable: one sentence, not a raw error from deep inside
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise cache_error(e, root, "the extensions cache root (TORCH_EXTENSIONS_DIR)") from None
    return root
