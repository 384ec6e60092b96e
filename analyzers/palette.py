"""One colour per framework, the same in every chart, table and page the project draws.

Colours come from the Okabe-Ito palette (distinguishable with the common colour-vision deficiencies).
A framework not listed gets a colour from a fixed spare list chosen by a stable hash of its name, so
it too keeps its colour from one report to the next.
"""

from __future__ import annotations

import zlib

FRAMEWORK_COLOURS: dict[str, str] = {
    "pytorch": "#D55E00",  # vermillion
    "tensorflow": "#0072B2",  # blue
    "mxnet": "#009E73",  # bluish green
    "paddle": "#CC79A7",  # reddish purple
    "singa": "#E69F00",  # orange
    "jax": "#56B4E9",  # sky blue (Okabe-Ito; lighter than TensorFlow's blue), so no longer a spare
}
SPARE_COLOURS = ("#DDCC77", "#882255", "#44AA99", "#555555", "#999933", "#332288")

FRAMEWORK_LABELS: dict[str, str] = {
    "pytorch": "PyTorch",
    "tensorflow": "TensorFlow",
    "mxnet": "MXNet",
    "paddle": "PaddlePaddle",
    "singa": "SINGA",
    "jax": "JAX",
}


def colour(framework: str) -> str:
    """The framework's colour as '#RRGGBB'."""
    known = FRAMEWORK_COLOURS.get(framework.lower())
    if known is not None:
        return known
    return SPARE_COLOURS[zlib.crc32(framework.lower().encode()) % len(SPARE_COLOURS)]


def label(framework: str) -> str:
    """The framework's name as its authors write it."""
    return FRAMEWORK_LABELS.get(framework.lower(), framework)


def order(frameworks: list[str] | set[str] | tuple[str, ...]) -> list[str]:
    """Frameworks in one fixed order (the known ones first), so panels line up across figures."""
    known = list(FRAMEWORK_COLOURS)
    return sorted(set(frameworks), key=lambda f: (known.index(f) if f in known else len(known), f))
