"""The steady step split per image: parts that add up to the step, from the steps table and the trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from analyzers.figures import step_parts as sp
from analyzers.figures.steady import epoch_stats
from analyzers.figures.steps import steps_table
from tracer.core import schema
from tracer.core.runfolder import RunFolder


def _folder(real_fixtures: Path, short: str) -> RunFolder:
    return RunFolder(next((real_fixtures / "gpu-h100").glob(f"*-{short}")))


def _steady_steps(folder: RunFolder) -> dict[str, np.ndarray]:
    table = steps_table(folder)
    assert table is not None
    steady = list(epoch_stats(folder.epochs()).steady_epoch_numbers)
    table = table.filter(pc.is_in(table["epoch"], value_set=pa.array(steady)))
    return {c: table[c].to_numpy() for c in table.column_names}


def test_untraced_parts_are_the_steps_sums(real_fixtures: Path) -> None:
    """PyTorch (85cf): data wait, compute and sync per image are the steady steps' sums over their images;
    JAX (a504) returns before its work is done: compute is the step minus data wait."""
    for short, keys in (("85cf", [sp.DATA_WAIT, sp.COMPUTE, sp.SYNC]), ("a504", [sp.DATA_WAIT, sp.COMPUTE])):
        folder = _folder(real_fixtures, short)
        d = sp.decompose(folder)
        steps = _steady_steps(folder)
        n = steps["images"].sum()
        assert [p.key for p in d.parts] == keys and d.basis == sp.BASIS_STEPS and d.images == n
        assert d.part(sp.DATA_WAIT) == pytest.approx(steps[schema.DATA_WAIT_S].sum() / n)
        rest = steps[schema.COMPUTE_S].sum() + steps[schema.SYNC_S].sum()
        assert d.step_s is not None
        assert d.step_s - d.part(sp.DATA_WAIT) == pytest.approx(rest / n)
        assert d.step_s is not None and d.asynchronous == (short == "a504")


def test_traced_parts_add_up_to_the_traced_steps(real_fixtures: Path) -> None:
    """nsys-traced AlexNet (cf98): the exclusive parts cover every traced step's time exactly once; the GPU
    classes and the host part take the time outside data wait; GPU idle + busy fill the steps."""
    folder = _folder(real_fixtures, "cf98")
    d = sp.decompose(folder)
    assert d.basis == sp.BASIS_TRACED_STEPS
    assert d.step_s is not None and d.gpu_idle_s is not None and d.gpu_during_wait_s is not None
    steps = _steady_steps(folder)
    durations = steps[schema.DATA_WAIT_S] + steps[schema.COMPUTE_S] + steps[schema.SYNC_S]
    assert d.steps == len(durations)  # every steady step began inside the trace
    assert d.step_s * d.images == pytest.approx(durations.sum(), rel=1e-6)
    assert d.part(sp.DATA_WAIT) * d.images == pytest.approx(steps[schema.DATA_WAIT_S].sum(), rel=1e-6)
    gpu_parts = sum(p.seconds for p in d.parts if p.key.startswith(sp.GPU_PREFIX))
    busy_in_steps = d.step_s - d.gpu_idle_s  # GPU busy inside the steps, data wait included
    assert gpu_parts + d.gpu_during_wait_s == pytest.approx(busy_in_steps, rel=1e-6)
    assert d.part(sp.HOST) + d.part(sp.DATA_WAIT) - d.gpu_during_wait_s == pytest.approx(d.gpu_idle_s, rel=1e-6)
    assert 0.0 < d.gpu_by_class["matmul"] and set(d.gpu_by_class) >= {"conv_fwd", "conv_bwd_data", "memory"}
    assert sum(v[2] for v in d.kernels.values()) == pytest.approx(sum(d.gpu_by_class.values()), rel=1e-9)
