"""The report room: results as people read them.

    render (tables: text, Markdown, rich) and plots (figures from CSV rows) -> folder (the
    report folder `kwb run` writes) and notebook (what the walkthrough notebooks show).

Imports: report may use workbench.harness and workbench.jit, and never imports the faces
(cli, magics, doctor, runner); tests/test_layers.py checks it.
"""
