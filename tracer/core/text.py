"""Text a run recorded (its cause, the tail of its worker's output) as it is shown: without terminal
escape sequences or other control characters (a worker's coloured log, or a planted sequence, would
otherwise drive the user's terminal), and cut to a length a line can hold (one 100,000-character cause
made the viewer lay out text for 46 s). run.json keeps what was written; readers get the shown form."""

from __future__ import annotations

import re
from collections.abc import Sequence

CAUSE_MAX_CHARS = 2000
"""A cause is one sentence, or an error and its message; beyond this it is cut (run.json keeps it whole)."""
LINE_MAX_CHARS = 500
"""One line of the worker's output tail."""

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), other two-character escapes, then any C0/C1 control
# character but tab and newline.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def printable(text: str, limit: int = CAUSE_MAX_CHARS) -> str:
    """`text` without escape sequences and control characters, at most `limit` characters (then a note of
    how many more there were)."""
    clean = _ESCAPES.sub("", text[: limit * 4 + 64]) if text else text  # bounded work for a huge string
    extra = len(text) - min(len(text), limit * 4 + 64)
    if len(clean) <= limit and not extra:
        return clean
    more = len(clean) - limit + extra
    return f"{clean[:limit]}... ({more:,} characters more in run.json)"


def printable_argv(argv: Sequence[str]) -> list[str]:
    """A command's words as they are shown: escape sequences and control characters out, a newline or tab
    written as `\\n` or `\\t` (an argument holding one would otherwise break the line it is shown on)."""
    return [printable(a.replace("\n", "\\n").replace("\t", "\\t"), LINE_MAX_CHARS) for a in argv]
