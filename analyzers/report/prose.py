"""The findings in sentences: per case, two or three sentences that set the frameworks side by side with
numbers and their noise, then the diagnosis' verdicts as a short list with their knob and the figures that
show them.

A sentence compares rows of one case's table that differ only in their framework (same settings, same
trace backend: `headline.CaseTable.tags`), in the steady state, as the table does. A ratio is said only
where `analyzers.figures.noise.why_not_ordered` finds the gap beyond noise; otherwise the sentence says
"within noise" and why. Every number is one of the table's cells (`headline.cell_text`) and is kept as
a `Cite` (row and field), so the page can tie it to its cell and a test can check that it is the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence, Union

from analyzers.diagnosis import top
from analyzers.diagnosis.verdict import Evidence, Verdict
from analyzers.figures.noise import MIN_DIFFERENCE, WITHIN_NOISE, why_not_ordered
from analyzers.figures.steady import Spread
from analyzers.render import palette, sentences
from analyzers.report.headline import CaseTable, cell_text, row_id, value_of
from analyzers.report.tables import TableRow, rate_spread


@dataclass(frozen=True)
class Cite:
    """A number of the table, as its cell shows it."""

    row: str  # headline.row_id
    field: str
    text: str


@dataclass(frozen=True)
class Ratio:
    """b / a of one field of two rows ('0.72x'), computed from the cells as shown."""

    a: str
    b: str
    field: str
    text: str


Fragment = Union[str, Cite, Ratio]
Sentence = tuple[Fragment, ...]

# The figures (by their file stem's start, the case's slug follows) that show what a rule found.
FIGURES_OF_RULE: dict[str, tuple[str, ...]] = {
    "input-bound": ("fig-frameworks", "fig-step-parts", "fig-resources"),
    "gpu-under-used": ("fig-frameworks", "fig-step-parts", "fig-kernel-classes"),
    "host-bound": ("fig-frameworks", "fig-step-parts", "fig-cuda-api"),
    "launch-bound": ("fig-cuda-api", "fig-step-parts"),
    "sync-dominated": ("fig-cuda-api", "fig-step-parts"),
    "allocator-churn": ("fig-cuda-api",),
    "cpu-oversubscription": ("fig-resources",),
    "cpu-under-used": ("fig-resources",),
    "memory-growth": ("fig-resources",),
    "thread-per-image": ("fig-resources",),
    "startup-heavy": ("fig-throughput",),
    "chance-level": ("fig-throughput",),
}


@dataclass(frozen=True)
class VerdictItem:
    """One rule that fired in a case: the rows it fired for with their number, the knob to try, the figures."""

    title: str
    where: tuple[tuple[str, str], ...]  # (row label, its number)
    unit: str  # the numbers' unit
    knob: str
    figures: tuple[str, ...]  # file stems


@dataclass(frozen=True)
class CaseFindings:
    table: CaseTable
    sentences: tuple[Sentence, ...]
    verdicts: tuple[VerdictItem, ...]

    @property
    def title(self) -> str:
        return self.table.key.title


def plain(sentence: Sentence) -> str:
    return "".join(f if isinstance(f, str) else f.text for f in sentence)


def case_sentences(table: CaseTable) -> list[Sentence]:
    """The opening sentences of a case (see the module docstring)."""
    rows = list(table.rows)
    ranked = [i for i, r in enumerate(rows) if r.steady_images_per_s is not None and not r.imported]
    out: list[Sentence] = []
    groups: dict[str, list[int]] = {}
    for i in ranked:
        groups.setdefault(rows[i].settings, []).append(i)
    best = max(groups.values(), key=lambda g: len({rows[i].framework for i in g}), default=[])
    if len({rows[i].framework for i in best}) >= 2:
        ref = next((i for i in best if rows[i].framework == "pytorch"), best[0])
        for i in best:
            if i != ref:
                out.append(_against(table, i, ref))
        out.append(_noise_sentence([rows[i] for i in best]))
    elif ranked:
        out.append(_alone(table, ranked))
    for i, r in enumerate(rows):
        if r.status != "ok" and not r.imported:
            cause = f": {r.cause}" if r.cause else ""
            out.append((f"{table.label(i)} {r.status}{cause}; its row has no steady figures.",))
    others = sorted({table.tags[i] for i in ranked if i not in best and table.tags[i]})
    if len({rows[i].framework for i in best}) >= 2 and others:
        out.append((f"The other rows ({'; '.join(others)}) ran with other settings and are compared with none here.",))
    return out


def _spread(row: TableRow, field: str) -> Spread | None:
    if field == "steady_images_per_s":
        return rate_spread(row)
    value = getattr(row, field)
    return None if value is None else Spread(value, value, value, 1)


def _cite(row: TableRow, field: str) -> Cite:
    return Cite(row_id(row), field, cell_text(row, field))


def _ratio(a: TableRow, b: TableRow, field: str) -> Ratio | None:
    va, vb = value_of(cell_text(a, field)), value_of(cell_text(b, field))
    if va == 0:
        return None
    text = f"{vb / va:.2f}x" if vb / va < 10 else sentences.ratio(va, vb)  # '0.72x', as the study wrote it
    return Ratio(row_id(a), row_id(b), field, str(text))


def _against(table: CaseTable, i: int, ref: int) -> Sentence:
    """'JAX trains at 0.72x PyTorch's images/s (467 against 652) with 5 % less energy per image (0.592 against
    0.623 J); it waits for data 91 % of the step against PyTorch's 53 %.'"""
    me, them = table.rows[i], table.rows[ref]
    name, other = palette.label(me.framework), palette.label(them.framework)
    busy = (me.runs_contended > 0, them.runs_contended > 0)
    rate = "steady_images_per_s"
    why = why_not_ordered(_spread(them, rate), _spread(me, rate), busy)
    ratio = _ratio(them, me, rate)
    s: list[Fragment] = [f"{name} trains "]
    if why or ratio is None:
        s += [f"{WITHIN_NOISE} of {other} ({why or 'no ratio'}: ", _cite(me, rate), " against ", _cite(them, rate)]
        s.append(" images/s)")
    else:
        s += ["at ", ratio, f" {other}'s images/s (", _cite(me, rate), " against ", _cite(them, rate), ")"]
    energy = "energy_j_per_image"
    if me.energy_j_per_image is not None and them.energy_j_per_image is not None:
        e_why = why_not_ordered(_spread(them, energy), _spread(me, energy), busy)
        a, b = value_of(cell_text(them, energy)), value_of(cell_text(me, energy))
        if e_why:
            s += [" and about the same energy per image (", _cite(me, energy), " against ", _cite(them, energy), " J)"]
        elif a > 0 and 0.5 <= b / a <= 2:
            pct = sentences.percent(abs(b - a) / a)
            s += [f" with {pct} {sentences.more_or_less(b - a)} energy per image (", _cite(me, energy), " against "]
            s += [_cite(them, energy), " J)"]
        elif (e_ratio := _ratio(them, me, energy)) is not None:
            s += [" with ", e_ratio, " its energy per image (", _cite(me, energy), " against ", _cite(them, energy)]
            s.append(" J)")
    wait = "data_wait_pct"
    if me.data_wait_pct is not None and them.data_wait_pct is not None:
        s += ["; it waits for data ", _cite(me, wait), f" % of the step against {other}'s ", _cite(them, wait), " %"]
    s.append(".")
    return tuple(s)


def _noise_sentence(rows: Sequence[TableRow]) -> Sentence:
    runs = [r.runs_ok for r in rows]
    floor = f"{100 * MIN_DIFFERENCE:.0f} %"
    if max(runs) < 2:
        return (f"Each row is one run, so no repeats measure the noise: only gaps beyond {floor} are called.",)
    contended = " Contended runs are ranked against none." if any(r.runs_contended for r in rows) else ""
    return (
        f"Each row is the median of {min(runs)}-{max(runs)} runs; overlapping ranges and gaps under {floor} are "
        f"called {WITHIN_NOISE}.{contended}",
    )


def _alone(table: CaseTable, ranked: list[int]) -> Sentence:
    """A case that one framework ran: its rows' speeds and data wait, nothing compared."""
    frameworks = sorted({palette.label(table.rows[i].framework) for i in ranked})
    s: list[Fragment] = [f"Only {' and '.join(frameworks)} ran this case, so no framework is compared. "]
    for n, i in enumerate(ranked[:4]):
        row = table.rows[i]
        s += ["; " if n else "", f"{table.label(i)} trains at ", _cite(row, "steady_images_per_s"), " images/s"]
        if row.data_wait_pct is not None:
            s += [", waiting for data ", _cite(row, "data_wait_pct"), " % of the step"]
    s.append(".")
    return tuple(s)


def short_knob(knob: str) -> str:
    """The first thing to try, in a few words: 'more loader workers (tracer --workers)', 'a larger --batch'."""
    first = knob.split(";")[0].strip()
    head = first.split(":")[0].split(" (")[0].strip()
    flag = re.search(r"\(tracer (--[\w-]+)\)", first)
    return head + (f" (tracer {flag[1]})" if flag and flag[1] not in head else "")


def verdict_items(labelled: Sequence[tuple[str, Sequence[Verdict]]], slug: str) -> list[VerdictItem]:
    """The fired verdicts of a case's runs (label, verdicts), one item per rule, in the order they first rank."""
    by_rule: dict[str, list[tuple[str, Verdict]]] = {}
    for label, verdicts in labelled:
        for v in top(list(verdicts)):
            by_rule.setdefault(v.rule, []).append((label, v))
    items = []
    for rule, found in by_rule.items():
        first = found[0][1]
        where = tuple((label, _number(v)) for label, v in found)
        knobs = tuple(dict.fromkeys(short_knob(v.knob) for _, v in found if v.knob))
        figures = tuple(f"{stem}-{slug}" for stem in FIGURES_OF_RULE.get(rule, ()))
        items.append(VerdictItem(first.title, where, first.unit, " / ".join(knobs), figures))
    return items


def _number(v: Verdict) -> str:
    """The verdict's number as the diagnosis prints it, without its unit (the item says it once)."""
    return "" if v.value is None else Evidence("", v.value, "").text().strip()


def where_text(item: VerdictItem) -> str:
    """'PyTorch 53.1, JAX 91.1 % of step time'."""
    text = ", ".join(f"{label} {number}".strip() for label, number in item.where)
    return text + (f" {item.unit}" if item.unit and any(n for _, n in item.where) else "")


def markdown(found: Sequence[CaseFindings]) -> str:
    """The sentences and verdicts as Markdown (summary.md)."""
    lines = ["# Findings, case by case", ""]
    for case in found:
        lines += [f"## {case.title}", "", " ".join(plain(s) for s in case.sentences), ""]
        for item in case.verdicts:
            lines.append(f"- **{item.title}** ({where_text(item)})" + (f": try {item.knob}" if item.knob else ""))
        lines.append("")
    return "\n".join(lines)
