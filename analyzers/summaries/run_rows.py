"""One row per run, built once for every list of runs: `tracer runs` prints the cells, the viewer's run
browser shows a few of its columns, both from the run's summary (`analyzers.figures.run_summary.summarise`), so the
two never word a run differently."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracer.core import cases
from tracer.core.workload import BuiltinWorkload, CommandWorkload, ImportedWorkload

if TYPE_CHECKING:  # imported when a row is built: the command line reads the columns without pyarrow
    from analyzers.figures.run_summary import RunSummary
    from analyzers.run.run import Run


@dataclass(frozen=True)
class Column:
    """One column of a run list: its header, and the word for a value the run does not have."""

    header: str
    none: str = "-"


# The columns users filter by, in order (`tracer runs` puts a column every listed run shares on one line).
RUN_COLUMNS = (
    Column("id"),
    Column("started"),
    Column("framework"),
    Column("model"),
    Column("dataset"),
    Column("device"),
    Column("batch"),
    Column("trace", "none"),
    Column("data"),
    Column("limit", "all"),
    Column("image px"),
    Column("status"),
    Column("diverged", "no"),
    Column("epochs"),
    Column("img/s"),
    Column("load"),
    Column("GPU", "none"),
)
RUNS_HEADERS = tuple(c.header for c in RUN_COLUMNS)
STATUS = RUNS_HEADERS.index("status")
NOT_RANKED = "†"  # after a speed the run's end makes unrankable (diverged, failed, cut short)
WARMUP_COUNTED = "*"  # after a steady speed that had to count the warm-up epochs
DAMAGED_RECORD = "damaged: run.json"
LEGEND = {
    "img/s": "img/s: the steady state, the epochs after the warm-up (`tracer show ID` says which)",
    WARMUP_COUNTED: f"{WARMUP_COUNTED} counts every epoch: the run has none after the warm-up (`--warmup`)",
    NOT_RANKED: f"{NOT_RANKED} not ranked beside other runs: the run did not end ok (`tracer show ID` says why)",
    "load": "load: CPU % other processes held during the run (100 = all cores); contended times do not compare",
}
"""What the marks and the two figures of a run list mean, printed under `tracer runs`."""


def run_row(run: Run) -> tuple[str, ...]:
    """The run's cells in RUN_COLUMNS order; a run whose run.json cannot be read raises `UserError`
    (`damaged_row` is its row)."""
    from analyzers.figures.run_summary import summarise

    s, record = summarise(run), run.record
    divergence = record.outcome.divergence
    started = time.strftime("%m-%d %H:%M", time.localtime(record.wall_start_ns / 1e9)) if record.wall_start_ns else "-"
    # A command's model, data and batch are its script's own: its name stands for them; an import records
    # no data mode, limit nor image size.
    match record.workload:
        case CommandWorkload() as command:
            workload = (command.label, "-", "-", "-", "-", "-")
        case ImportedWorkload() as imported:
            batch = "-" if imported.batch is None else str(imported.batch)
            workload = (imported.model, cases.dataset_label(s.dataset), batch, "-", "-", "-")
        case BuiltinWorkload(spec=spec):
            limit = "all" if spec.limit is None else str(spec.limit)
            workload = (s.model, cases.dataset_label(s.dataset), str(s.batch), spec.data, limit, str(spec.image_size))
    epochs = "-" if s.epochs_planned is None and not s.command else str(s.epochs_done)
    if s.epochs_planned is not None:
        epochs = f"{s.epochs_done}/{s.epochs_planned}"
    return (
        run.run_id,
        started,
        s.framework,
        workload[0],
        workload[1],
        s.device,
        workload[2],
        record.measurement.trace,
        *workload[3:],
        s.status,
        "no" if divergence is None else f"epoch {divergence.epoch}",
        epochs,
        rate_text(s),
        load_text(s),
        s.gpu.removeprefix("NVIDIA ").replace("driver ", "") or "none",
    )


def damaged_row(run_id: str, status: str = DAMAGED_RECORD) -> tuple[str, ...]:
    """The row of a run whose record cannot be read: its id and `status`, nothing else."""
    return tuple(run_id if i == 0 else status if i == STATUS else "" for i in range(len(RUN_COLUMNS)))


def rate_text(s: RunSummary) -> str:
    """Steady images/s, WARMUP_COUNTED where it counts the warm-up, NOT_RANKED where the run's speed is not
    rankable."""
    text = ("-" if s.steady_images_per_s is None else f"{s.steady_images_per_s:.1f}") + (
        WARMUP_COUNTED if s.steady_includes_warmup else ""
    )
    return text if s.rankable or s.steady_images_per_s is None else f"{text}{NOT_RANKED}"


def load_text(s: RunSummary) -> str:
    from analyzers.figures.contention import Contention

    return Contention(s.other_cpu_pct, None, s.contended).load_text()
