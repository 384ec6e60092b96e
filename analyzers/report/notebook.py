"""Runs as pandas DataFrames for a notebook, in one call: `load_runs("runs/")`.

Holistic Trace Analysis' users work in Jupyter; this is the same entry for our run folders. Nothing is
computed here that the analyzers do not already compute: `runs` holds `analyzers.figures.run_summary.summarise`
per run beside the options it was run with, the other frames are the run folder's own tables with a
`run_id` column, so they concatenate across runs and `groupby` as they are; `problems` names the
damaged files that were skipped (`analyzers.run.Run.problems`). Every frame is read when
`load_runs` is called (a dozen GPU runs: about 100 MB of DataFrames, most of it the trace tables).
Documented with a worked example in docs/guide/notebooks.md, which a test runs.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from analyzers.figures.basis import FIGURES, WHOLE_RUN_PREFIX
from analyzers.figures.run_summary import summarise
from analyzers.figures.steady import WARMUP_EPOCHS
from analyzers.figures.steps import with_step_columns
from analyzers.report.runs import collect_runs
from analyzers.run.run import Run
from analyzers.trace import tables as trace_tables
from analyzers.trace.kernel_classes import with_classes
from analyzers.trace.kernel_names import short_names
from tracer.core.schema import SAMPLE_TABLES, STEPS_TABLE

RUN_ID = "run_id"
# RunSummary's all-epochs speed fields: the frame names them whole_run_images_per_s and whole_run_epoch_s.
ALL_EPOCHS_FIELDS = ("images_per_s", "mean_epoch_s")
TRACE_TABLES = (
    trace_tables.CUDA_API,
    trace_tables.KERNELS,
    trace_tables.MEMCPY,
    trace_tables.NVTX,
    trace_tables.OSRT,
    trace_tables.OPERATORS,
)
"""The trace tables `cuda` may hold, each present where some run has it (`tracer profile --trace`, `import`)."""


@dataclass(frozen=True)
class RunFrames:
    """A folder of runs as DataFrames; every frame but `runs` has one row per event, sample or epoch and
    a `run_id` column naming its run (the key of `runs`)."""

    runs: pd.DataFrame  # one row per run: its summary (steady images/s, data wait, peak RSS...: the steady state;
    # whole_run_*: the same over the whole run) and options
    epochs: pd.DataFrame  # one row per epoch: duration_s, images, images_per_s, loss, accuracy
    # one row per training step: data wait, compute and sync seconds as the worker timed them, and step_s and
    # compute_total_s (the step minus its data wait: what compares across synchronous and asynchronous frameworks)
    steps: pd.DataFrame
    samples: dict[str, pd.DataFrame] = field(default_factory=dict)  # "process", "gpu", "threads", ...; t_s added
    # TRACE_TABLES present; kernels get `label` and `kernel_class` (analyzers.trace.kernel_classes)
    cuda: dict[str, pd.DataFrame] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()  # damaged run folders that were left out, and why
    problems: pd.DataFrame = field(default_factory=pd.DataFrame)  # damaged files skipped: run_id, file, what


def load_runs(*paths: str | Path, warmup: int = WARMUP_EPOCHS) -> RunFrames:
    """Every run under `paths` (run folders, or folders of runs) as DataFrames. `warmup` is the number of
    leading epochs left out of the steady-state numbers in `runs` (as `--warmup` everywhere). A damaged
    run inside a folder of runs is skipped with a warning (listed in `skipped`); no runs at all raises."""
    loaded, skipped = collect_runs([Path(p) for p in paths])
    for why in skipped:
        warnings.warn(why, stacklevel=2)
    samples: dict[str, list[pd.DataFrame]] = {}
    cuda: dict[str, list[pd.DataFrame]] = {}
    runs: list[dict[str, Any]] = []
    epochs: list[pd.DataFrame] = []
    steps: list[pd.DataFrame] = []
    for run in (Run.open(r, warmup) for r in loaded):
        runs.append(_run_row(run))
        epochs.append(_epochs(run))
        for name in SAMPLE_TABLES:
            table = run.samples(name)
            if table is not None and table.num_rows:
                if name == STEPS_TABLE:  # step_s and compute_total_s (the step minus its data wait) added
                    table = with_step_columns(table)
                frame = _with_run_id(table, run.run_id)
                if "t_ns" in frame:
                    frame["t_s"] = (frame["t_ns"] - run.record.wall_start_ns) / 1e9  # since the run's start
                (steps if name == STEPS_TABLE else samples.setdefault(name, [])).append(frame)
        for name in TRACE_TABLES:
            trace = run.table(name)
            if trace is not None:
                if name == trace_tables.KERNELS:  # what each kernel does (analyzers.trace.kernel_classes)
                    trace = with_classes(trace)
                frame = _with_run_id(trace, run.run_id)
                if name == trace_tables.KERNELS:  # the label `analyze` and the viewer show, unique in the run
                    frame["label"] = frame["name"].map(short_names(frame["name"].unique()))
                cuda.setdefault(name, []).append(frame)
    problems = [{RUN_ID: run.run_id, "file": p.file, "what": p.what} for run in loaded for p in run.problems]
    for p in problems:
        warnings.warn(f"{p['file']} is damaged ({p['what']}); what it holds is skipped", stacklevel=2)
    return RunFrames(
        runs=pd.DataFrame(runs),
        epochs=_concat(epochs),
        steps=_concat(steps),
        samples={name: _concat(frames) for name, frames in samples.items()},
        cuda={name: _concat(frames) for name, frames in cuda.items()},
        skipped=tuple(skipped),
        problems=pd.DataFrame(problems, columns=[RUN_ID, "file", "what"]),
    )


def _run_row(run: Run) -> dict[str, Any]:
    """The run's summary fields, its figures (analyzers.figures.basis: the steady state's under their own names,
    the whole run's prefixed `whole_run_`), then the options it was run with that the summary does not name."""
    s = summarise(run)
    summary = dataclasses.asdict(s)
    row = {key: value for key, value in summary.items() if _scalar(value) and key not in ALL_EPOCHS_FIELDS}
    for figure in FIGURES:
        row[figure.name] = getattr(s.steady, figure.name)
        row[WHOLE_RUN_PREFIX + figure.name] = getattr(s.whole, figure.name)
    spec = run.record.spec  # an import's or a command's settings are not recorded: none added
    for key, value in (dataclasses.asdict(spec) if spec is not None else {}).items():
        if key not in row and _scalar(value):
            row[key] = value
    return row


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _epochs(run: Run) -> pd.DataFrame:
    rows = [
        {
            RUN_ID: run.run_id,
            "framework": run.framework,
            "epoch": e.epoch,
            "duration_s": e.duration_s,
            "images": e.images,
            "images_per_s": e.images / e.duration_s if e.duration_s > 0 else None,
            "loss": e.loss,
            "accuracy": e.accuracy,
        }
        for e in run.epochs()
    ]
    return pd.DataFrame(rows)


def _with_run_id(table: pa.Table, run_id: str) -> pd.DataFrame:
    frame = table.to_pandas()
    frame.insert(0, RUN_ID, run_id)
    return frame


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
