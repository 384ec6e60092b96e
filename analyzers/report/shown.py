"""What `tracer show` prints of one run, computed in one pass before a line is printed: the summary, the steady
step's parts, the repeats of its spec, its ranks' straggler, the verdicts that matter and what measuring cost.
The CLI renders the record; it asks the analyzers nothing more."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracer.core.errors import UserError

if TYPE_CHECKING:
    from analyzers.diagnosis.cost import Cost
    from analyzers.diagnosis.verdict import Verdict
    from analyzers.figures.run_summary import RunSummary
    from analyzers.figures.step_parts import Decomposition
    from analyzers.figures.straggler import Straggler
    from analyzers.run.run import Run
    from tracer.core.runfolder import RunFolder


@dataclass(frozen=True)
class Diagnosis:
    """The Diagnosis block of `tracer profile` and `tracer show`: the verdicts that matter most and what
    measuring cost, or why neither is available (a rule that breaks costs the block, not the run)."""

    verdicts: tuple[Verdict, ...] = ()
    cost: Cost | None = None
    unavailable: str = ""


@dataclass(frozen=True)
class Shown:
    """Everything `tracer show` prints of one run (its text form; `--format json` is the summary alone)."""

    run: Run
    summary: RunSummary
    step_parts: Decomposition | None  # None for a run with neither steps nor a trace
    repeats: tuple[Run, ...]  # the run and its repeats in its folder of runs, oldest first
    repeat_summaries: tuple[RunSummary, ...]  # theirs, where the run has repeats (none for a run alone)
    straggler: Straggler | None  # a run of several ranks: who arrived last at the collectives
    diagnosis: Diagnosis


def diagnosis(run: Run) -> Diagnosis:
    from analyzers.diagnosis import diagnose, top
    from analyzers.diagnosis.cost import measurement_cost

    try:
        return Diagnosis(tuple(top(diagnose(run))), measurement_cost(run))
    except Exception as e:  # noqa: BLE001 - the run is complete without its diagnosis
        return Diagnosis(unavailable=f"{type(e).__name__}: {e}")


def repeats_of(run: Run) -> list[RunFolder]:
    """The run and its repeats (runs of the same spec, analyzers.figures.repeats) in the same folder of runs."""
    from analyzers.figures.repeats import repeat_key
    from tracer.core.runfolder import list_runs

    key = repeat_key(run.read_record())
    out = []
    for other in list_runs(run.path.parent):
        try:
            if repeat_key(other.read_record()) == key:
                out.append(other)
        except UserError:
            continue
    return out


def shown(run: Run) -> Shown:
    """Everything `tracer show` prints of `run`, at the run's warm-up; its repeats opened at the same one."""
    from analyzers.figures.run_summary import summarise
    from analyzers.figures.step_parts import decompose
    from analyzers.figures.straggler import straggler
    from analyzers.run.run import Run

    summary = summarise(run)
    try:
        parts: Decomposition | None = decompose(run, run.warmup)
    except UserError:
        parts = None
    repeats = tuple(run if f.path == run.path else Run.open(f, run.warmup) for f in repeats_of(run))
    summaries = tuple(summarise(r) for r in repeats) if len(repeats) > 1 else ()
    found = straggler(run) if run.record.world_size > 1 else None
    # diagnosed at the default warm-up, as the Diagnosis block of `tracer profile` is (and as `show` always was)
    return Shown(run, summary, parts, repeats, summaries, found, diagnosis(Run.open(run)))
