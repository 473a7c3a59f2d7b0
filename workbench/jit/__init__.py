"""The jit room: a kernel's sources in, loaded ops out.

    sources -> toolchain, device -> builder (ninja, compile_cache, diagnostics, feedback) -> kernel
    loader.load() and inline.load_inline() are its entry points; errors and notices serve all.

Imports: jit writes and reads the cache through kwb_store (the on-disk format), and it
never imports workbench.harness, workbench.report or the faces (cli, magics, doctor,
runner); tests/test_layers.py checks it.
"""
