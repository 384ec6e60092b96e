"""Colours and pens shared by the panels: one colour per run (its framework's), one per lane activity."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyqtgraph as pg
from PySide6 import QtGui, QtWidgets

from analyzers.render import palette
from analyzers.summaries.threads import OSRT_KINDS, OTHER_OSRT, PYTHON
from analyzers.timeline.gpu_timeline import GPU_ACTIVITIES, NVTX_ACTIVITIES
from analyzers.trace import tables as t

if TYPE_CHECKING:
    from viewer.data import RunData

# What a pan does not change (plot titles, y axes) is painted from a pixmap of it, redrawn only when the item
# itself changes: every item of a panel is painted again on each pan or zoom otherwise.
CACHED = QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache

SHADES = ((0, 100), (0, 175), (-35, 120), (30, 150), (-20, 230))  # (hue shift in degrees, QColor.darker factor)
"""How a framework's 2nd, 3rd ... run in the viewer differs from its first, still of its colour's family."""

# What analyzers.timeline.lanes draws: the sampler's levels, the OS-runtime call kinds, py-spy, GPU items, NVTX rows
ACTIVITY_COLOURS = {
    t.ACTIVITY_BUSY: "#d62728",
    t.ACTIVITY_ACTIVE: "#ffbf00",
    t.ACTIVITY_IDLE: "#d9d9d9",
    **dict(zip(OSRT_KINDS, ("#bdbdbd", "#8c564b", "#17becf"))),  # waiting, io, driver (ioctl)
    OTHER_OSRT: "#7f7f7f",
    PYTHON: "#e377c2",
    **dict(zip(GPU_ACTIVITIES, ("#fdae6b", "#e6550d", "#2b8cbe"))),  # memset, memcpy, kernel
    **dict(zip(NVTX_ACTIVITIES, ("#756bb1", "#9e9ac8"))),
}
LINK_COLOUR = "#e7298a"  # the hovered launch, its GPU operation and the line between them
_EXTRA = ("#17becf", "#e377c2", "#7f7f7f", "#bcbd22", "#ff7f0e", "#393b79")


LEFT_AXIS_WIDTH = 200  # the same in every time panel and the thread lanes, so their x pixels line up
RIGHT_AXIS_WIDTH = 55


def run_colour(runs: Sequence[RunData], index: int) -> str:
    """A run's colour: its framework's, as in the report (`analyzers.render.palette`); a second run of the same
    framework among `runs` a darker shade, a third a neighbouring hue, and so on (`SHADES`)."""
    framework = _framework(runs[index])
    repeat = sum(_framework(r) == framework for r in runs[:index])
    shift, darker = SHADES[repeat % len(SHADES)]
    colour = QtGui.QColor(palette.colour(framework))
    hue = (colour.hue() + shift) % 360
    return QtGui.QColor.fromHsv(hue, colour.saturation(), colour.value()).darker(darker).name()


def _framework(run: RunData) -> str:
    return run.record.measurement.framework if run.record is not None else run.path.name


def activity_colour(activity: str) -> str:
    """Known activities have fixed colours; others a stable one from their name."""
    return ACTIVITY_COLOURS.get(activity) or _EXTRA[zlib.crc32(activity.encode()) % len(_EXTRA)]


def use_light_theme() -> None:
    """White plots with black text: readable in screenshots, on paper and in READMEs."""
    pg.setConfigOptions(background="w", foreground="k", antialias=False)


def label_font(point_size: int = 10, bold: bool = False) -> QtGui.QFont:
    font = QtGui.QFont()
    font.setPointSize(point_size)
    font.setBold(bold)
    return font
