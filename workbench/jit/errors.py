"""The errors kwb raises. Each says what went wrong and what to do, in plain words."""
from __future__ import annotations

from dataclasses import dataclass, field


class KwbError(Exception):
    """Base class of kwb's errors."""


class KernelNotFoundError(KwbError, LookupError):
    """A name that is neither a kernel folder nor one of the kernels kwb ships."""


class ToolchainError(KwbError, RuntimeError):
    """The machine cannot build what was asked (no nvcc, a CPU-only torch, no compiler)."""


class LoadError(KwbError, RuntimeError):
    """A build finished but its library could not be loaded or registered."""


class CacheError(KwbError, OSError):
    """The extensions cache cannot be used where kwb must write (a file where a folder goes, a
    full disk, no permission): the message names the path and what to do."""

    def __str__(self) -> str:
        return str(self.strerror)


def cache_error(e: OSError, path, what: str) -> CacheError:
    """One sentence: what kwb could not write, where, why, and what to do."""
    import errno

    fix = {errno.EEXIST: "a file is where that folder goes: move it away",
           errno.ENOTDIR: "a file is where a folder of that path goes: move it away, or set TORCH_EXTENSIONS_DIR",
           errno.EISDIR: "a folder is where that file goes: remove that folder",
           errno.ENOSPC: "the disk is full: free space (kwb cache prune --max-size 2G, say)",
           errno.EDQUOT: "the disk quota is used up: free space (kwb cache prune --max-size 2G, say)",
           errno.EACCES: "no permission: set TORCH_EXTENSIONS_DIR to a folder of yours",
           errno.EROFS: "the file system is read-only: set TORCH_EXTENSIONS_DIR to a writable folder"}
    hint = fix.get(e.errno, "see the error")
    return CacheError(e.errno, f"kwb: cannot write {what}, {path}: {e.strerror}; {hint}")


@dataclass
class Diagnostic:
    """One compiler or linker message, pointing into the user's file where it can."""

    severity: str  # "error", "fatal error", "warning"
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    source_line: str | None = None  # the offending line of the user's file

    def render(self, display: tuple[str, int] | None = None) -> str:
        """display: (what to call the file, the number its first line has there), for sources
        the user wrote somewhere else (a string, a notebook cell)."""
        where, first = display if display else (self.file, 1)
        if where and self.line:
            head = f"{where}:{self.line + first - 1}:{self.column or 1}: {self.severity}: {self.message}"
        elif where:
            head = f"{where}: {self.severity}: {self.message}"
        else:
            head = f"{self.severity}: {self.message}"
        if self.source_line is None:
            return head
        text = self.source_line.rstrip("\n").expandtabs(4)
        caret = " " * max((self.column or 1) - 1, 0) + "^"
        return f"{head}\n    {text}\n    {caret}"


@dataclass
class BuildError(KwbError, RuntimeError):
    """A failed compile or link: each diagnostic as file:line:col with the source line and a
    caret, and the path of the full log. Nothing about the failed build is recorded, so fixing
    the error and loading again rebuilds."""

    name: str
    device: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    log_path: str | None = None
    tail: str = ""  # the failing command's last lines, when no diagnostic could be parsed
    display_paths: dict[str, tuple[str, int]] = field(default_factory=dict)  # file -> (label, first line)
    max_shown: int = 10

    def __post_init__(self) -> None:
        RuntimeError.__init__(self, self._message())

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity != "warning"]

    def _message(self) -> str:
        errors = self.errors
        count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}" if errors else "see below"
        lines = [f"building {self.name} ({self.device}) failed: {count}"]
        for d in errors[: self.max_shown]:
            lines.append(d.render(self.display_paths.get(d.file or "", None)))
        if len(errors) > self.max_shown:
            lines.append(f"... and {len(errors) - self.max_shown} more errors")
        if not errors and self.tail:
            lines.append(self.tail.rstrip())
        if self.log_path:
            lines.append(f"full log: {self.log_path}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._message()
