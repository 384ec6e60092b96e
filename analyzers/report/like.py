"""Which runs a figure that compares frameworks draws: one run per framework, all of one *kind* (like with like).

A tracer costs time and resources (CUPTI at batch 1 made the steady epoch 8.9x the untraced one), so a
figure must not draw a traced PyTorch run beside an untraced JAX run. The kind of a run is how it was
measured (`analyzers.figures.repeats.UNMEASURED`: trace backend, py-spy, nsys sampling). A figure takes untraced
runs wherever there are any; a traced run only beside traced runs of the same backend (a figure of traces,
the CUDA API one, takes the backend that covers most frameworks). Within the kind, a quiet run before a
contended one, then the newest. Every run left out is named with why, for the caption.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from analyzers.figures.contention import run_contention
from analyzers.render import palette
from analyzers.report.runs import LoadedRun
from tracer.core.records import RunRecord

UNTRACED = "untraced"


def run_kind(record: RunRecord) -> str:
    """'untraced', or how the run was measured: 'cupti', 'nsys', 'cupti + py-spy', 'nsys sampling'."""
    m, spec = record.measurement, record.spec
    parts: list[str] = [str(m.trace)] if m.trace != "none" else []
    if spec is not None and spec.trace_window:
        parts.append(f"window {spec.trace_window}")
    if m.pyspy:
        parts.append("py-spy")
    if m.nsys_sampling:
        parts.append("nsys sampling")
    return " + ".join(parts) or UNTRACED


@dataclass(frozen=True)
class Choice:
    """The runs a figure draws (framework -> run), their kind, and each run left out with why."""

    kind: str
    runs: dict[str, LoadedRun]
    left_out: tuple[tuple[str, str], ...]  # (run id, why)
    contended: frozenset[str] = frozenset()  # frameworks whose drawn run was contended

    def title(self, framework: str) -> str:
        """'PyTorch (untraced)', 'PyTorch (cupti)': the panel title names how its run was measured."""
        return f"{palette.label(framework)} ({self.kind})"

    def caption(self) -> str:
        """'Runs: A, B (untraced). Left out: C (cupti: the figure draws untraced runs).'"""
        text = f"Runs: {', '.join(r.run_id for r in self.runs.values())} ({self.kind})."
        if self.left_out:
            text += " Left out: " + "; ".join(f"{run_id} ({why})" for run_id, why in self.left_out) + "."
        return text


def choose(runs: Iterable[LoadedRun], usable: Callable[[LoadedRun], bool], traced_only: bool = False) -> Choice | None:
    """One run per framework of one kind, among the runs `usable` says the figure can draw; None: none is."""
    candidates = [r for r in runs if usable(r)]
    if traced_only:
        candidates = [r for r in candidates if run_kind(r.record) != UNTRACED]
    if not candidates:
        return None
    kinds: dict[str, set[str]] = {}
    for r in candidates:
        kinds.setdefault(run_kind(r.record), set()).add(r.framework)
    newest = {run_kind(r.record): r.record.wall_start_ns for r in candidates}  # candidates are oldest first
    kind = max(kinds, key=lambda k: (k == UNTRACED, len(kinds[k]), newest[k]))
    quiet = {r.run_id: not run_contention(r).contended for r in candidates}
    chosen: dict[str, LoadedRun] = {}
    for r in candidates:  # oldest first: a later run of equal standing replaces the one before
        if run_kind(r.record) != kind:
            continue
        current = chosen.get(r.framework)
        if current is None or _standing(r, quiet) >= _standing(current, quiet):
            chosen[r.framework] = r
    left = []
    for r in candidates:
        if chosen.get(r.framework) is r:
            continue
        mine = run_kind(r.record)
        if mine != kind:
            why = f"{mine}: the figure draws {kind} runs"
        elif not r.record.rankable:
            why = r.record.not_rankable_why or r.record.outcome.status.value
        elif not quiet[r.run_id] and quiet[chosen[r.framework].run_id]:
            why = "contended: a quiet run of the same kind is drawn"
        else:
            why = "an older run of the same kind"
        left.append((r.run_id, why))
    contended = frozenset(fw for fw, r in chosen.items() if not quiet[r.run_id])
    return Choice(kind, chosen, tuple(left), contended)


def _standing(run: LoadedRun, quiet: dict[str, bool]) -> tuple[bool, bool]:
    """Finished (and rankable: not diverged) before not; quiet before contended."""
    return (run.ok and run.record.rankable, quiet[run.run_id])
