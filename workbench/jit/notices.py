"""One-line notices to stderr (never on stdout, which belongs to the user's program)."""
from __future__ import annotations

import sys

_shown: set[str] = set()


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def once(key: str, message: str) -> None:
    """Show `message` the first time `key` comes up in this process."""
    if key not in _shown:
        _shown.add(key)
        say(message)
