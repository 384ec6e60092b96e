"""Arrow arrays and scalars built from buffers: the values they hold, and that neither they nor the sample
readers that use them import pandas (pyarrow's probe for it costs 0.2-0.4 s of every viewer open)."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracer.core import arrow_build, schema
from tracer.core.runfolder import RunFolder


def test_filled_holds_the_value_in_the_declared_type() -> None:
    assert arrow_build.filled(0, 3, pa.int64()).to_pylist() == [0, 0, 0]
    assert arrow_build.filled(7, 2, pa.int32()).type == pa.int32()
    worker = arrow_build.filled("worker", 4, pa.string())
    assert worker.type == pa.string() and worker.to_pylist() == ["worker"] * 4
    assert len(arrow_build.filled("worker", 0, pa.string())) == 0


def test_indices_and_scalars_work_in_compute_calls() -> None:
    table = pa.table({"x": [10, 20, 30, 40]})
    assert table.take(arrow_build.indices(np.array([3, 1]))).column("x").to_pylist() == [40, 20]
    filled = pc.fill_null(pa.array([1.5, None]), arrow_build.float_scalar(math.nan)).to_pylist()
    assert filled[0] == 1.5 and math.isnan(filled[1])


def test_building_and_reading_samples_does_not_import_pandas(tmp_path: Path) -> None:
    """In a fresh interpreter: the helpers, and a steps table without the columns an older run lacked
    (filled with their defaults) summed per epoch, as every viewer open does."""
    folder = RunFolder(tmp_path)
    folder.samples_dir.mkdir(parents=True)
    old = pa.table(
        {
            "t_ns": [0, 1, 2, 3],
            "epoch": [1, 1, 2, 2],
            "step": [0, 1, 0, 1],
            "images": [8, 8, 8, None],
            schema.DATA_WAIT_S: [0.5, 0.5, 0.5, 0.5],
            schema.COMPUTE_S: [1.0, 1.0, 1.0, 1.0],
            schema.SYNC_S: [0.25, None, 0.25, 0.25],
        }
    )
    pq.write_table(old, folder.sample_parquet_path(schema.STEPS_TABLE))
    code = textwrap.dedent(
        f"""
        import math, sys
        from pathlib import Path
        import numpy as np
        import pyarrow as pa
        from tracer.core import arrow_build, schema
        from tracer.core.runfolder import RunFolder
        from analyzers.figures import steps
        arrow_build.filled("worker", 3, pa.string()), arrow_build.indices(np.arange(3))
        arrow_build.float_scalar(math.nan)
        folder = RunFolder(Path({str(tmp_path)!r}))
        table = folder.samples(schema.STEPS_TABLE)
        assert table.column(schema.PROBE).to_pylist() == [schema.PROBE_WORKER] * 4
        assert table.column(schema.RANK).to_pylist() == [0] * 4
        splits = steps.epoch_splits(folder)
        assert [(s.epoch, s.steps, s.images, s.data_wait_s, s.sync_s) for s in splits] == [
            (1, 2, 16, 1.0, 0.25), (2, 2, 8, 1.0, 0.5)], splits
        steps.with_step_columns(table)
        print("pandas" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
