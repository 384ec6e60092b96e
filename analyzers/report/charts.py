"""Matplotlib renderers for the report's figures: data in (from `analyzers.report.series`), a
`Figure` out. No analysis happens here and no pyplot state is used, so renderers are safe to call
from any thread and never open a window (the Agg canvas does all drawing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from analyzers.render import palette
from analyzers.report.series import OTHER, EpochEnergy, ResourceSeries, ThroughputBar
from tracer.core import output as out_file

FORMATS = ("png", "svg", "pdf")  # every figure in each: PNG for the page, SVG and PDF for a paper
DPI = 110
_RC: dict[str, Any] = {
    "svg.hashsalt": "dl-tracer",
    "font.size": 9.5,
    "axes.titlesize": 10.5,
    "axes.labelsize": 9.5,
    "legend.fontsize": 9,
}


def _label(fw: str, marks: Mapping[str, str] | None, sep: str = " ", titles: Mapping[str, str] | None = None) -> str:
    """The framework's name (its title where given: 'PyTorch (untraced)'), with its mark ("contended",
    "2 of 3 contended") where it has one."""
    mark = (marks or {}).get(fw, "")
    return (titles or {}).get(fw, palette.label(fw)) + (f"{sep}({mark})" if mark else "")


def _style() -> Any:
    """Our fonts and a fixed SVG id salt (byte-identical SVGs), for drawing and for saving."""
    import matplotlib

    return matplotlib.rc_context(_RC)  # type: ignore[arg-type]


def _figure(width_in: float, height_in: float) -> Figure:
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    return fig


def save(fig: Figure, base: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Writes `base.<fmt>` for each format; SVG and PDF carry no timestamp, so reruns compare equal."""

    out = []
    for fmt in formats:
        path = base.with_suffix(f".{fmt}")
        metadata = {"Date": None} if fmt in ("svg", "pdf") else None
        with _style(), out_file.replacing(path, "report --out") as tmp:
            fig.savefig(tmp, format=fmt, dpi=DPI if fmt == "png" else "figure", metadata=metadata)
        out.append(path)
    return out


def resource_figure(
    title: str,
    series: Mapping[str, ResourceSeries],
    notes: Mapping[str, str],
    cores: Mapping[str, int],
    ram_gib: Mapping[str, float],
    titles: Mapping[str, str] | None = None,
) -> Figure:
    """Figures 1-2: CPU %, RSS (MiB, with % of RAM on the right) and threads over time, one column per
    framework, rows sharing their y axis and all columns one time axis (seconds since each run's start),
    so both the levels and the lengths compare at a glance: a run ten times shorter is a tenth as wide.
    Every epoch band is labelled; `notes` (failed, contended) go under the framework's name."""

    frameworks = palette.order(list(series))
    ncols = max(1, len(frameworks))
    with _style():
        fig = _figure(max(6.0, 3.3 * ncols + 1.2), 7.2)
        axes = fig.subplots(3, ncols, sharex=True, sharey="row", squeeze=False)
        for col, fw in enumerate(frameworks):
            s = series[fw]
            c = palette.colour(fw)
            top, mid, bottom = axes[0][col], axes[1][col], axes[2][col]
            t = _break_gaps(s.t_s)
            top.plot(t, s.cpu_pct, color=c, lw=1.1)
            mid.plot(t, s.rss_mib, color=c, lw=1.1)
            bottom.step(t, s.threads, where="post", color=c, lw=1.1)
            head = _label(fw, None, titles=titles) + (f"\n{notes[fw]}" if notes.get(fw) else "")
            top.set_title(head, color=c, fontweight="bold")
            for ax in (top, mid, bottom):
                _epoch_bands(ax, s)
                ax.grid(True, alpha=0.3, lw=0.5)
            bottom.set_xlabel("time since run start (s)")
            if not s.t_s.size:
                mid.text(0.5, 0.5, "no samples", transform=mid.transAxes, ha="center", va="center")
        for col, fw in enumerate(frameworks):
            lo, hi = axes[0][col].get_xlim()
            _epoch_labels(axes[0][col], series[fw], hi - lo)
        first = frameworks[0] if frameworks else ""
        axes[0][0].set_ylabel(f"CPU %\n(100 = all {cores.get(first, '?')} cores)")
        axes[1][0].set_ylabel("RSS (MiB)")
        ram_mib = ram_gib.get(first, 0) * 1024
        if ram_mib > 0 and len({round(v) for v in ram_gib.values()}) == 1:  # one machine: % of its RAM
            right = axes[1][-1].secondary_yaxis(
                "right", functions=(lambda m: m * 100 / ram_mib, lambda p: p * ram_mib / 100)
            )
            right.set_ylabel(f"% of RAM ({ram_gib[first]:.0f} GiB)")
        axes[2][0].set_ylabel("threads")
        axes[0][0].set_ylim(bottom=0)
        axes[1][0].set_ylim(bottom=0)
        axes[2][0].set_ylim(bottom=0)
        axes[2][0].yaxis.get_major_locator().set_params(integer=True)
        fig.suptitle(title, fontweight="bold")
        fig.legend(
            handles=[Patch(facecolor="0.90", edgecolor="0.75", label="training epochs (shaded alternately)")],
            loc="outside lower center",
            frameon=False,
        )
    return fig


def _epoch_bands(ax: Axes, s: ResourceSeries) -> None:
    for i, (start, end) in enumerate(zip(s.epoch_starts_s, s.epoch_ends_s)):
        ax.axvspan(start, end, color="0.90" if i % 2 == 0 else "0.95", lw=0, zorder=0)


def _break_gaps(t_s: np.ndarray) -> np.ndarray:
    """Times with NaN where the sampler missed more than 5 periods, so no line is drawn across a gap."""
    if t_s.size < 3:
        return t_s
    dt = np.diff(t_s)
    gap = np.concatenate(([False], dt > 5 * np.median(dt)))
    return np.where(gap, np.nan, t_s)


def _epoch_labels(ax: Axes, s: ResourceSeries, span: float) -> None:
    """Every band labelled: 'epoch N' where it fits, 'EN' where not; labels of narrow neighbouring bands
    alternate between two heights so they do not run into each other."""
    last_row_end = [-np.inf, -np.inf]
    for i, (start, end) in enumerate(zip(s.epoch_starts_s, s.epoch_ends_s), start=1):
        width = (end - start) / span if span > 0 else 0.0
        text = f"epoch {i}" if width >= 0.17 else f"E{i}"
        centre = (start + end) / 2
        half = (0.03 if width < 0.17 else 0.06) * span
        row = 0 if centre - half > last_row_end[0] else 1
        last_row_end[row] = centre + half
        ax.text(
            centre,
            0.98 - 0.08 * row,
            text,
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="top",
            fontsize=8,
            color="0.35",
        )


def throughput_figure(title: str, bars: Sequence[ThroughputBar], warmup: int) -> Figure:
    """The figure users look for first: steady-state images/s per pool of repeats (median bar, the range
    of the repeats as a whisker, n beside it; the same pools as Tables 1-2), and each epoch's time in the
    newest run of each pool (warm-up epochs visible on the left). A pool with contended runs has its bar
    hatched and its mark under its name; the legend sits below the panels, where it hides no point."""
    styles = ("-", "--", ":", "-.")
    with _style():
        fig = _figure(11.0, max(3.2, 0.55 * len(bars) + 1.8))
        left, right = fig.subplots(1, 2, width_ratios=(1.0, 1.2))
        ys = np.arange(len(bars))[::-1]
        for y, bar in zip(ys, bars):
            rate = bar.throughput.images_per_s
            if rate is None:
                left.text(0, y, f"  not ranked{': ' + bar.note if bar.note else ''}", va="center", fontsize=8,
                          color="0.4", clip_on=True)  # fmt: skip
                continue
            hatch = "///" if bar.mark else None
            left.barh(y, rate.median, color=palette.colour(bar.framework), height=0.6, hatch=hatch)
            if rate.n > 1:
                err = [[rate.median - rate.low], [rate.high - rate.median]]
                left.errorbar(rate.median, y, xerr=err, color="0.15", capsize=4, lw=1)
            note = f"{rate.median:.1f}" + (f"  (n={rate.n}, {rate.low:.1f}-{rate.high:.1f})" if rate.n > 1 else "")
            left.text(rate.high * 1.02, y, note, va="center", fontsize=8)
        left.set_yticks(ys, [_wrap(bar.label) + (f"\n({bar.mark})" if bar.mark else "") for bar in bars], fontsize=8)
        left.set_ylim(-0.6, len(bars) - 0.4)  # a row without a bar keeps its room
        left.set_xlabel(f"images/s, steady state (epochs after the first {warmup})")
        highs = [b.throughput.images_per_s.high for b in bars if b.throughput.images_per_s]
        left.set_xlim(0, max(highs, default=1) * 1.35)
        left.grid(True, axis="x", alpha=0.3, lw=0.5)
        seen: dict[str, int] = {}
        for bar in bars:
            if bar.epoch_s:
                k = seen[bar.framework] = seen.get(bar.framework, -1) + 1
                label = bar.label + (f" ({bar.mark})" if bar.mark else "")
                right.plot(range(1, len(bar.epoch_s) + 1), list(bar.epoch_s), marker="o", ls=styles[k % len(styles)],
                           color=palette.colour(bar.framework), label=label)  # fmt: skip
        if warmup > 0:
            right.axvspan(0.5, warmup + 0.5, color="0.92", lw=0, zorder=0, label="warm-up")
        right.set_xlabel("epoch")
        right.set_ylabel("epoch time (s)")
        right.set_ylim(bottom=0)
        right.xaxis.get_major_locator().set_params(integer=True)
        right.grid(True, alpha=0.3, lw=0.5)
        right.set_xlim(0.5, max((len(b.epoch_s) for b in bars), default=1) + 0.5)
        fig.suptitle(title, fontweight="bold")
        handles, labels = right.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(6, max(1, len(labels))), frameon=False)
    return fig


def _wrap(text: str, width: int = 28) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text


def cuda_api_figure(
    title: str,
    panels: Sequence[tuple[str, list[str], Mapping[str, list[float]]]],
    api: str = "CUDA API",
    marks: Mapping[str, str] | None = None,
    titles: Mapping[str, str] | None = None,
) -> Figure:
    """Figure 3: per panel (e.g. whole run, steady state), the share of CUDA API time of each
    function as horizontal bars, one bar per framework in its colour, functions largest first;
    `api` names the API (HIP API for a ROCm trace)."""

    frameworks = palette.order({fw for _, _, shares in panels for fw in shares})
    longest = max((len(n) for _, names, _ in panels for n in names), default=10)
    nbars = max((len(names) for _, names, _ in panels), default=1)
    height = min(14.0, 1.6 + nbars * (0.22 * len(frameworks) + 0.18))
    with _style():
        fig = _figure(min(16.0, 2.5 + len(panels) * (3.2 + 0.055 * longest)), max(3.6, height))
        axes = fig.subplots(1, max(1, len(panels)), squeeze=False)[0]
        for ax, (panel_title, names, shares) in zip(axes, panels):
            _hbars(ax, names, {fw: shares[fw] for fw in frameworks if fw in shares}, api)
            ax.set_title(panel_title)
            ax.set_xlabel(f"share of {api} time (%)")
        fig.suptitle(title, fontweight="bold")
        fig.legend(
            handles=[Patch(facecolor=palette.colour(fw), label=_label(fw, marks, titles=titles)) for fw in frameworks],
            loc="outside lower center",
            ncols=min(5, max(1, len(frameworks))),
            frameon=False,
        )
    return fig


def _hbars(ax: Axes, names: list[str], shares: Mapping[str, list[float]], api: str = "CUDA API") -> None:
    if not names:
        ax.text(0.5, 0.5, f"no {api} calls in this phase", transform=ax.transAxes, ha="center", va="center")
        ax.set_yticks([])
        return
    n = len(shares)
    height = 0.8 / max(1, n)
    y = np.arange(len(names))
    xmax = max((v for vals in shares.values() for v in vals), default=1.0)
    for i, (fw, values) in enumerate(shares.items()):
        offs = y - 0.4 + height * (i + 0.5)
        bars = ax.barh(offs, values, height=height * 0.92, color=palette.colour(fw))
        for bar, v in zip(bars, values):
            if v > 0:
                text = f"{v:.1f}" if v >= 0.05 else "<0.1"
                ax.text(v + xmax * 0.01, bar.get_y() + bar.get_height() / 2, text, va="center", fontsize=7.5)
        if OTHER in names:
            bars[names.index(OTHER)].set_hatch("///")
    ax.set_yticks(y, [f"{OTHER} (< 1 % each)" if n_ == OTHER else n_ for n_ in names])
    ax.invert_yaxis()
    ax.set_xlim(0, xmax * 1.15 + 1)
    ax.grid(True, axis="x", alpha=0.3, lw=0.5)


def energy_figure(
    title: str,
    energy: Mapping[str, list[EpochEnergy]],
    marks: Mapping[str, str] | None = None,
    titles: Mapping[str, str] | None = None,
) -> Figure:
    """Per-epoch GPU energy (J) and mean power (W), one bar per framework in each epoch."""

    frameworks = palette.order(list(energy))
    epochs = sorted({e.epoch for rows in energy.values() for e in rows})
    with _style():
        fig = _figure(max(7.0, 2.0 + 0.5 * len(epochs) * max(1, len(frameworks))), 4.0)
        left, right = fig.subplots(1, 2, squeeze=True)
        width = 0.8 / max(1, len(frameworks))
        for i, fw in enumerate(frameworks):
            by_epoch = {e.epoch: e for e in energy[fw]}
            xs = [epochs.index(k) - 0.4 + width * (i + 0.5) for k in by_epoch]
            c = palette.colour(fw)
            label = _label(fw, marks, titles=titles)
            left.bar(xs, [e.energy_j for e in by_epoch.values()], width=width * 0.92, color=c, label=label)
            right.bar(xs, [e.mean_power_w for e in by_epoch.values()], width=width * 0.92, color=c)
        for ax, ylabel, head in (
            (left, "energy per epoch (J)", "GPU energy per epoch"),
            (right, "mean power (W)", "GPU mean power per epoch"),
        ):
            ax.set_xticks(range(len(epochs)), [str(k) for k in epochs])
            ax.set_xlabel("epoch")
            ax.set_ylabel(ylabel)
            ax.set_title(head)
            ax.grid(True, axis="y", alpha=0.3, lw=0.5)
        sources = sorted({e.source for rows in energy.values() for e in rows})
        fig.suptitle(f"{title}\n(NVML; from {' and '.join(sources)})", fontweight="bold")
        fig.legend(loc="outside lower center", ncols=min(5, max(1, len(frameworks))), frameon=False)
    return fig


def kernel_class_figure(
    title: str, bars: Mapping[str, Mapping[str, float]], marks: Mapping[str, str] | None = None
) -> Figure:
    """GPU time per image by kernel class: one horizontal bar per framework (`bars`: framework ->
    class key -> seconds per image), its classes stacked in the taxonomy's order and colours, the total
    at the bar's end; classes no framework has are left out of the legend."""
    from analyzers.trace import kernel_classes as kc

    frameworks = palette.order(list(bars))
    present = [c for c in kc.CLASSES if any(bars[fw].get(c.key, 0) > 0 for fw in frameworks)]
    largest = max((sum(bars[fw].values()) for fw in frameworks), default=0.0)
    unit, per = ("ms", 1e-3) if largest >= 1e-3 else ("µs", 1e-6)
    with _style():
        rows = -(-len(present) // 3)  # legend rows, three classes a row
        fig = _figure(9.0, 1.5 + 0.5 * len(frameworks) + 0.2 * rows)
        ax = fig.subplots()
        y = np.arange(len(frameworks))
        left = np.zeros(len(frameworks))
        for c in present:
            values = np.array([bars[fw].get(c.key, 0.0) / per for fw in frameworks])
            ax.barh(y, values, left=left, height=0.55, color=c.colour, label=c.label, edgecolor="white", lw=0.4)
            left += values
        for i, total in enumerate(left):
            ax.text(total + largest / per * 0.01, i, f"{total:.3g} {unit}", va="center", fontsize=8)
        ax.set_yticks(y, [_label(fw, marks, "\n") for fw in frameworks])
        ax.invert_yaxis()
        ax.set_xlim(0, max(largest / per * 1.15, 1e-9))
        ax.set_xlabel(f"GPU time per image ({unit}), kernels and memory operations in the traced steady steps")
        ax.grid(True, axis="x", alpha=0.3, lw=0.5)
        fig.suptitle(title, fontweight="bold")
        fig.legend(loc="outside lower center", ncols=min(3, max(1, len(present))), frameon=False, fontsize=8)
    return fig
