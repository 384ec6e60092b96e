"""Colours and pens shared by the panels: one colour per run, one per thread activity."""

from __future__ import annotations

import zlib

import pyqtgraph as pg
from PySide6 import QtGui

RUN_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")

ACTIVITY_COLOURS = {
    "busy": "#d62728",
    "active": "#ffbf00",
    "idle": "#d9d9d9",
    "running": "#2ca02c",
    "cpu": "#2ca02c",
    "cuda_api": "#1f77b4",
    "cuda": "#1f77b4",
    "gpu_wait": "#9467bd",
    "sync": "#9467bd",
    "io": "#8c564b",
    "sleeping": "#d9d9d9",
    "waiting": "#bdbdbd",
    "driver (ioctl)": "#17becf",
    "other OS call": "#7f7f7f",
    "python": "#e377c2",
    "kernel": "#2b8cbe",
    "memcpy": "#e6550d",
    "memset": "#fdae6b",
    "NVTX range": "#756bb1",
    "NVTX range, next": "#9e9ac8",
}
LINK_COLOUR = "#e7298a"  # the hovered launch, its GPU operation and the line between them
_EXTRA = ("#17becf", "#e377c2", "#7f7f7f", "#bcbd22", "#ff7f0e", "#393b79")


LEFT_AXIS_WIDTH = 150  # the same in every time panel and the thread lanes, so their x pixels line up
RIGHT_AXIS_WIDTH = 55


def run_colour(index: int) -> str:
    return RUN_COLOURS[index % len(RUN_COLOURS)]


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
