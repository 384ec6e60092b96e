"""The report's kernel-class figure and its "why frameworks differ" section: per case, GPU time per image by
kernel class (one bar per framework) and `tracer diff` of each framework against the fastest one.

`analyzers.report.build` wraps both into report steps; they compute through `analyzers.figures.step_parts` and
`analyzers.comparison.diff` and draw through `analyzers.report.charts`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from analyzers.comparison.diff import diff_decompositions
from analyzers.figures.step_part_names import BASIS_TRACED_STEPS
from analyzers.figures.step_parts import Decomposition, decompose
from analyzers.render import palette
from analyzers.report import charts, like
from analyzers.report.runs import CaseKey, LoadedRun
from analyzers.trace import kernel_classes as kc
from analyzers.trace import tables as trace_tables
from tracer.core import output as out_file
from tracer.core.errors import UserError

DIFF_STEM, DIFF_TITLE = "why-frameworks-differ", "Why frameworks differ: each against the fastest in its case"


def has_classes(run: LoadedRun) -> bool:
    """A run whose GPU time splits by class per image: a kernels table and steps on its clock."""
    return trace_tables.present(run, trace_tables.KERNELS) and run.steps is not None


def class_figure(
    case: CaseKey, chosen: dict[str, LoadedRun], out: Path, formats: Sequence[str]
) -> tuple[list[Path], str] | None:
    """The figure's files and caption, or None where no chosen run splits its GPU time per image."""
    parts: dict[str, Decomposition] = {}
    for fw, r in chosen.items():
        try:
            parts[fw] = decompose(r, r.warmup)
        except UserError:  # a run whose steps hold no images has no per-image split; the others still do
            continue
    bars = {fw: d.gpu_by_class for fw, d in parts.items() if d.basis == BASIS_TRACED_STEPS and d.gpu_by_class}
    if not bars:
        return None
    fig = charts.kernel_class_figure(f"GPU time per image by kernel class\n{case.title}", bars)
    files = charts.save(fig, out / f"fig-kernel-classes-{case.slug}", formats)
    other = ", ".join(
        f"{palette.label(fw)} {100 * b.get(kc.OTHER, 0.0) / sum(b.values()):.1f} %" for fw, b in bars.items()
    )
    caption = (
        "Kernels and memory operations that start inside the traced steady steps, summed by class "
        "(analyzers.trace.kernel_classes) and divided by those steps' images; streams that overlap count each. "
        f"GPU time left in class 'other': {other}. Runs: " + ", ".join(chosen[fw].run_id for fw in bars) + "."
    )
    return files, caption


def diff_sections(cases: dict[CaseKey, list[LoadedRun]], out: Path) -> tuple[Path, list[tuple[str, list[str]]]] | None:
    """Per case with two frameworks or more, the diff lines (`case_diff_lines`), also written as Markdown."""
    sections = [(case.title, lines) for case, group in cases.items() if (lines := case_diff_lines(group))]
    if not sections:
        return None
    md = out / f"{DIFF_STEM}.md"
    text = f"### {DIFF_TITLE}\n\n" + "\n".join(
        f"#### {head}\n\n" + "\n".join(f"- {line}" for line in lines) + "\n" for head, lines in sections
    )
    out_file.write_text(md, text, "report --out")
    return md, sections


def case_parts(group: Sequence[LoadedRun]) -> dict[str, Decomposition]:
    """The steady step of each framework's newest finished run with steps, all of one kind (analyzers.report.like:
    untraced first, a traced run only beside traced runs of its backend): what `diff` and its figure compare."""
    choice = like.choose(group, lambda r: r.ok and r.steps is not None)
    chosen = choice.runs if choice is not None else {}
    parts: dict[str, Decomposition] = {}
    for fw, run in chosen.items():
        try:
            parts[fw] = decompose(run, run.warmup)
        except UserError:
            continue
    return parts


def case_diff_lines(group: Sequence[LoadedRun]) -> list[str]:
    """`tracer diff` of each framework's run (`case_parts`) against the fastest of them."""
    parts = case_parts(group)
    ranked = sorted((d.images_per_s, fw) for fw, d in parts.items() if d.images_per_s)
    if len(ranked) < 2:
        return []
    fastest = ranked[-1][1]
    lines = []
    for _, fw in reversed(ranked[:-1]):
        said = diff_decompositions(parts[fastest], parts[fw]).sentences
        lines.append(f"{palette.label(fw)} against {palette.label(fastest)}: " + " ".join(said))
    return lines
