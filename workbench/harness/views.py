"""How harness results show themselves while the harness knows nothing of drawing them.

workbench.report renders a CheckReport or a BenchReport as text and Markdown; the front door
(workbench/__init__.py) registers those renderers here, so print(report) is a table and a
notebook shows Markdown, while nothing in the harness imports the report room.
"""
from __future__ import annotations

from collections.abc import Callable

_renderers: dict[tuple[str, str], Callable[[object], str]] = {}


def register(type_name: str, fmt: str, render: Callable[[object], str]) -> None:
    """render(obj) -> str for objects of the class named type_name; fmt: "text" or "markdown"."""
    _renderers[(type_name, fmt)] = render


class Rendered:
    """A result whose str() and notebook Markdown come from the registered renderers."""

    def _render(self, fmt: str) -> str | None:
        render = _renderers.get((type(self).__name__, fmt))
        return render(self) if render is not None else None

    def __str__(self) -> str:
        text = self._render("text")
        return text if text is not None else f"<{type(self).__name__}: no text renderer registered>"

    def _repr_markdown_(self) -> str | None:
        return self._render("markdown")
