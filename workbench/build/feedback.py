"""What a build shows while it runs.

Cache hits print nothing. A build that passes about a second shows what compiles and the
elapsed time (a live line on a terminal or in Jupyter, one plain line in a log), then a summary
line; verbose=True also echoes every command.
"""
from __future__ import annotations

import functools
import sys
import time

SHOW_AFTER_SECONDS = 1.0

_console = None


def console():
    """rich's Console on stderr, imported on first use: importing rich costs ~17 ms, a third of
    a warm load, which never prints."""
    global _console
    if _console is None:
        from rich.console import Console

        _console = Console(stderr=True, highlight=False, soft_wrap=True)  # log lines stay whole in pipes
    return _console


@functools.cache
def _live_in_jupyter() -> bool:
    """rich's live line in Jupyter needs ipywidgets; without it rich warns ("install
    ipywidgets") and draws nothing, so a notebook gets the plain line instead."""
    import importlib.util

    return importlib.util.find_spec("ipywidgets") is not None


class BuildFeedback:
    def __init__(self, what: str, verbose: bool = False):
        self.what = what
        self.verbose = verbose
        self.start = time.monotonic()
        self.steps: list[str] = []
        self.current = "starting"
        self._status = None
        self._announced = False

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def line(self, text: str) -> None:
        """One line of ninja's output: '[2/3] NVCC relu_scale.cu', a command, or compiler text."""
        if self.verbose:
            console().print(text, markup=False, highlight=False)
        if text.startswith("[") and "] " in text:
            self.current = text.split("] ", 1)[1]
            label = self.current.split(" ", 1)[-1]
            if label not in self.steps:
                self.steps.append(label)
        self.tick()

    def tick(self) -> None:
        if self.elapsed < SHOW_AFTER_SECONDS or self.verbose:
            return
        c = console()
        text = f"kwb: building {self.what}: {self.current} ({self.elapsed:.1f} s)"
        if c.is_terminal or (c.is_jupyter and _live_in_jupyter()):
            if self._status is None:
                self._status = c.status(text, spinner="dots")
                self._status.start()
            else:
                self._status.update(text)
        elif not self._announced:
            self._announced = True
            c.print(f"kwb: building {self.what} ...", markup=False, highlight=False)

    def done(self, ok: bool, summary: str = "") -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        if ok and (self.elapsed >= SHOW_AFTER_SECONDS or self.verbose):
            steps = ", ".join(self.steps) if self.steps else "nothing to compile"
            console().print(f"kwb: built {self.what} in {self.elapsed:.1f} s ({steps}){summary}", markup=False, highlight=False)
        sys.stderr.flush()
