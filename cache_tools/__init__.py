"""`kwb cache`: reading and cleaning the extensions cache that kwb (and
torch.utils.cpp_extension) write, over kwb_store, the cache's format.

    entries   what is in a cache root: kwb's entries and torch's build folders, their versions
    states    each build's state against today's sources and toolchain (fresh, stale, ...)
    removal   unlock, prune and clean, safely against running builds
    api       the commands as functions (notebooks: `from cache_tools import api`)
    commands  the click group that `kwb cache` runs; resource_rows its table of GPU functions

It imports neither workbench nor torch (only kwb_store): the cache commands stay fast and work
with a broken torch install.
"""
