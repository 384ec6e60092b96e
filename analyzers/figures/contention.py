"""Was the machine busy with something else while the run trained? Judged from the samples at read time.

The sampler records the whole machine's CPU (`sys_cpu_pct`) beside the training's own (`cpu_pct`), both
with 100 = every core busy. Their difference is what other processes used. A run during which the
median of that difference reached `CONTENDED_OTHER_CPU_PCT` is *contended*: its times are not
comparable with a run on a quiet machine. Computed from the samples once per opened run (`run_contention`,
never stored), so the threshold can change without rewriting run folders, and imported or older runs get it too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers.run.memo import per_run
from analyzers.run.run import Run
from analyzers.trace.arrays import as_array
from tracer.core import schema

CONTENDED_OTHER_CPU_PCT = 25.0  # share of the machine's CPU (100 = all cores) held by other processes
MACHINE_CPU_COLUMN = schema.SYS_CPU_PCT
OWN_CPU_COLUMN = schema.CPU_PCT


@dataclass(frozen=True)
class Contention:
    other_cpu_pct: float | None  # median over samples of the machine's CPU % minus the training's
    machine_cpu_pct: float | None  # median of the machine's CPU %
    contended: bool

    def load_text(self) -> str:
        """The `load` column: what other processes held, '3 % other' or '80 % other, contended'; '-' unsampled."""
        if self.other_cpu_pct is None:
            return "-"
        return f"{self.other_cpu_pct:.0f} % other" + (", contended" if self.contended else "")

    def warning(self) -> str:
        """One line for `show`, `compare` and the report; empty when the machine was quiet."""
        if not self.contended or self.other_cpu_pct is None:
            return ""
        return (
            f"contended: other processes held {self.other_cpu_pct:.0f} % of the CPU (median; threshold "
            f"{CONTENDED_OTHER_CPU_PCT:.0f} %): times are not comparable with a quiet machine's"
        )


@per_run
def run_contention(run: Run) -> Contention:
    """The run's contention, judged once per run from its process samples (the summary, the data pairs, the
    report, the diagnosis's cost and every list of runs read this one)."""
    return contention(run.samples("process"))


def contention(process: pa.Table | None, threshold: float = CONTENDED_OTHER_CPU_PCT) -> Contention:
    if process is None or MACHINE_CPU_COLUMN not in process.column_names or OWN_CPU_COLUMN not in process.column_names:
        return Contention(None, None, False)
    # NumPy, not Python lists: a 1 M-sample run is summarised in the viewer's run browser, holding the GIL
    machine = as_array(pc.fill_null(process.column(MACHINE_CPU_COLUMN), 0.0), np.float64)
    own = as_array(pc.fill_null(process.column(OWN_CPU_COLUMN), 0.0), np.float64)
    if not len(machine):
        return Contention(None, None, False)
    median_other = float(np.median(np.fmax(0.0, machine - own)))  # the mean of the two middle ones, as statistics
    return Contention(median_other, float(np.median(machine)), median_other >= threshold)
