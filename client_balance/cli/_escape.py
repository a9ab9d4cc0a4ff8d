"""Control characters made visible, for everything ``client-balance`` shows (``_render``)."""

from __future__ import annotations

import unicodedata

__all__ = ["lines", "visible"]


_ESCAPED = frozenset({"Cc", "Cf", "Cs"})
"""Control and format characters (a terminal acts on them), and lone surrogates (no UTF-8
output takes one: the command crashed on a record that held one)."""


def visible(text: str) -> str:
    """``text`` with every control character escaped as Python writes it (ESC as backslash x1b)."""
    # Rich strips only some control characters; ESC passes, and with it any terminal sequence.
    if text.isprintable():
        return text
    return "".join(
        repr(char)[1:-1] if unicodedata.category(char) in _ESCAPED else char for char in text
    )


def lines(text: str) -> str:
    """:func:`visible` line by line: multi-line output (JSON, a view) keeps its line breaks."""
    return "\n".join(map(visible, text.split("\n")))
