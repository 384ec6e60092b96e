"""One colour and one name per framework, the same in every chart, table and page the project draws.

Both come from the framework's declaration (`tracer.core.frameworks`). A run whose framework is not
declared there (an imported trace labelled by hand, a folder from another tool) gets a colour from a
fixed spare list chosen by a stable hash of its name, so it too keeps its colour from one report to
the next, and its own name as its label.
"""

from __future__ import annotations

import zlib

from tracer.core.frameworks import FRAMEWORKS

SPARE_COLOURS = ("#DDCC77", "#882255", "#44AA99", "#555555", "#999933", "#332288")


def colour(framework: str) -> str:
    """The framework's colour as '#RRGGBB'."""
    known = FRAMEWORKS.get(framework.lower())
    if known is not None:
        return known.colour
    return SPARE_COLOURS[zlib.crc32(framework.lower().encode()) % len(SPARE_COLOURS)]


def label(framework: str) -> str:
    """The framework's name as its authors write it."""
    known = FRAMEWORKS.get(framework.lower())
    return known.label if known is not None else framework


def order(frameworks: list[str] | set[str] | tuple[str, ...]) -> list[str]:
    """Frameworks in one fixed order (the declared ones first), so panels line up across figures."""
    known = list(FRAMEWORKS)
    return sorted(set(frameworks), key=lambda f: (known.index(f) if f in known else len(known), f))
