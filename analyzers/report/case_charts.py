"""The figures that carry a case's comparison, drawn from what the page's tables and `tracer diff` computed:
the frameworks side by side on the same axes (speed, data wait, GPU busy, energy per image: one bar per
row of the case's table, the same numbers as its cells) and the step decomposition of `diff` (where each
framework's steady step goes, per image). Data in, a matplotlib `Figure` out, as in `charts`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from analyzers.figures.step_part_names import COMPUTE, DATA_WAIT, GPU_PREFIX, HOST, SYNC
from analyzers.figures.step_parts import Decomposition
from analyzers.render import palette
from analyzers.report import charts
from analyzers.report.headline import CaseTable, cell_text, spread_text, value_of
from analyzers.trace import kernel_classes as kc

# (field, axis label) of the side-by-side panels, in the order they read.
PANELS: tuple[tuple[str, str], ...] = (
    ("steady_images_per_s", "images/s (more is faster)"),
    ("data_wait_pct", "data wait (% of the step)"),
    ("gpu_util_pct_mean", "GPU busy (%)"),
    ("energy_j_per_image", "GPU energy (J per image)"),
    ("mfu_pct", "MFU (% of the device's peak FLOP/s)"),
)
PERCENT = ("data_wait_pct", "gpu_util_pct_mean")  # drawn on 0-100 %, so a small share looks small
PART_COLOURS = {DATA_WAIT: "#BBBBBB", COMPUTE: "#4477AA", SYNC: "#EE7733", HOST: "#DDCC77"}


@dataclass(frozen=True)
class Bar:
    label: str
    framework: str
    values: dict[str, str]  # field -> the table cell's text ('-' where none)
    spread: str  # the range of the repeats' images/s, '' for one run


def bars_of(table: CaseTable) -> list[Bar]:
    """One bar per row of the case's table that has a steady speed."""
    return [
        Bar(table.label(i), row.framework, {f: cell_text(row, f) for f, _ in PANELS}, spread_text(row))
        for i, row in enumerate(table.rows)
        if row.steady_images_per_s is not None
    ]


def frameworks_figure(title: str, bars: Sequence[Bar]) -> Figure:
    """One panel per PANELS entry, the rows on one shared vertical axis, each bar in its framework's colour
    with the table's number at its end (a panel with no number for a row leaves it empty: 'not measured')."""
    panels = [(f, label) for f, label in PANELS if any(b.values[f] != "-" for b in bars)]
    with charts._style():
        fig = charts._figure(min(12.0, 2.4 + 2.5 * len(panels)), max(2.4, 0.42 * len(bars) + 1.5))
        axes = fig.subplots(1, max(1, len(panels)), sharey=True, squeeze=False)[0]
        ys = np.arange(len(bars))[::-1]
        for ax, (field, label) in zip(axes, panels):
            shown = [value_of(b.values[field]) if b.values[field] != "-" else None for b in bars]
            top = max((v for v in shown if v is not None), default=1.0) or 1.0
            for y, bar, v in zip(ys, bars, shown):
                if v is None:
                    ax.text(0, y, " not measured", va="center", fontsize=7.5, color="0.45")
                    continue
                ax.barh(y, v, height=0.62, color=palette.colour(bar.framework))
                note = bar.values[field] + (f" ({bar.spread})" if field == PANELS[0][0] and bar.spread else "")
                ax.text(v + top * 0.02, y, note, va="center", fontsize=7.5)
            ax.set_xlim(0, 118 if field in PERCENT else top * 1.45)
            ax.set_xlabel(label)
            ax.grid(True, axis="x", alpha=0.3, lw=0.5)
        axes[0].set_yticks(ys, [charts._wrap(b.label, 24) for b in bars], fontsize=8)
        fig.suptitle(title, fontweight="bold")
    return fig


def step_parts_figure(title: str, parts: Mapping[str, Decomposition]) -> Figure:
    """Each framework's steady step per image as one stacked bar of `diff`'s parts (data wait, compute or
    host time, GPU kernel classes where traced), in ms per image; the parts' colours are the same for all."""
    frameworks = palette.order(list(parts))
    keys: list[str] = []
    for fw in frameworks:
        keys += [p.key for p in parts[fw].parts if p.key not in keys]
    labels = {p.key: p.label for fw in frameworks for p in parts[fw].parts}
    with charts._style():
        fig = charts._figure(9.5, 1.7 + 0.55 * len(frameworks) + 0.22 * (-(-len(keys) // 2)))
        ax = fig.subplots()
        y = np.arange(len(frameworks))
        left = np.zeros(len(frameworks))
        for key in keys:
            ms = np.array([parts[fw].part(key) * 1e3 for fw in frameworks])
            ax.barh(y, ms, left=left, height=0.55, color=_part_colour(key), label=_short(labels[key]),
                    edgecolor="white", lw=0.4)  # fmt: skip
            left += ms
        for i, total in enumerate(left):
            ax.text(total * 1.01, i, f"{total:.3g} ms", va="center", fontsize=8)
        ax.set_yticks(y, [palette.label(fw) for fw in frameworks])
        ax.invert_yaxis()
        ax.set_xlim(0, max(left.max(initial=0) * 1.18, 1e-6))
        ax.set_xlabel("steady step time per image (ms), split as tracer diff splits it")
        ax.grid(True, axis="x", alpha=0.3, lw=0.5)
        fig.suptitle(title, fontweight="bold")
        fig.legend(loc="outside lower center", ncols=2, frameon=False, fontsize=8)
    return fig


def _part_colour(key: str) -> str:
    if key.startswith(GPU_PREFIX):
        cls = key.removeprefix(GPU_PREFIX)
        return next((c.colour for c in kc.CLASSES if c.key == cls), "#7F7F7F")
    return PART_COLOURS.get(key, "#777777")


def _short(label: str) -> str:
    """A legend entry without its explanation in parentheses ('compute', 'waiting for data')."""
    return label.split(" (")[0] if len(label) > 40 else label
