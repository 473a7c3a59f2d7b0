"""Reading and cleaning the extensions cache that kwb (and torch.utils.cpp_extension) write.

Nothing here imports torch: the cache commands stay fast and work with a broken torch install.
`layout` is the single description of what kwb writes where; the builder writes by it and the
cache commands read by it.
"""
