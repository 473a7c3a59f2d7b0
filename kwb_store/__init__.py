"""The extensions cache's format: what kwb writes where and how (layout), the one Manifest type
(manifest), the build lock and its owner record (locks), atomic writes and file hashes (fsutil),
the compilers' versions (tool_versions), the running toolchain read without torch
(environment) and each compiled GPU function's resource record (resources).

The builder (workbench.jit) writes through this package and `kwb cache` (cache_tools) reads
through it. It imports neither workbench, cache_tools nor torch: the cache commands stay fast
and work with a broken torch install.
"""
