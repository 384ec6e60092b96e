"""The notebook API (issue 28 item 7): the worked example of docs/guide/notebooks.md, run as written on the
H100 fixtures, gives the numbers `tracer show` and the run folders give."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from analyzers.figures.run_summary import summarise
from analyzers.report.notebook import load_runs
from tracer.core.runfolder import RunFolder, list_runs

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "guide" / "notebooks.md"


def example() -> str:
    """The page's first python code block: the worked example."""
    block = re.search(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert block, f"{PAGE} has no python example"
    return block[1]


@pytest.fixture(scope="module")
def ran(real_fixtures: Path) -> dict[str, object]:
    """The example executed from the repository's folder, as the page says to run it."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        namespace: dict[str, object] = {}
        exec(compile(example(), str(PAGE), "exec"), namespace)  # noqa: S102 - the documented example itself
    finally:
        os.chdir(cwd)
    return namespace


def test_the_documented_example_runs_and_matches_tracer_show(ran: dict[str, object], real_fixtures: Path) -> None:
    folders = list_runs(real_fixtures / "gpu-h100")
    summary = ran["summary"]
    assert isinstance(summary, pd.DataFrame) and sorted(summary.index) == sorted(f.run_id for f in folders)
    for folder in folders:
        shown = summarise(folder)
        assert summary.loc[folder.run_id, "steady_images_per_s"] == pytest.approx(shown.steady_images_per_s)
        assert summary.loc[folder.run_id, "status"] == shown.status
    assert summary["trace"].value_counts().to_dict() == {"none": 8, "cupti": 2, "nsys": 1, "torch": 1}
    per_epoch = ran["per_epoch"]
    assert isinstance(per_epoch, pd.DataFrame)
    (jax_vgg,) = [f for f in folders if f.run_id.endswith("7a96")]
    epochs = jax_vgg.epochs()
    assert per_epoch.loc[jax_vgg.run_id, 1] == pytest.approx(epochs[0].images / epochs[0].duration_s)


def test_kernels_steps_and_samples_are_the_run_folders_own(ran: dict[str, object], real_fixtures: Path) -> None:
    (nsys_run,) = [f for f in list_runs(real_fixtures / "gpu-h100") if f.read_record().spec.trace == "nsys"]
    kernels = pq.read_table(nsys_run.table_path("kernels")).to_pandas()
    top = ran["top_kernels"]
    assert isinstance(top, pd.Series) and len(top) == 5
    assert top.iloc[0] == pytest.approx(kernels.groupby("name").dur_ns.sum().max() / 1e6)  # one label, one kernel
    step_split = ran["step_split"]
    assert isinstance(step_split, pd.DataFrame)
    steps = nsys_run.samples("steps")
    assert steps is not None
    later = steps.to_pandas().query("epoch > 1")
    assert step_split.loc[nsys_run.run_id, "data_wait_s"] == pytest.approx(later.data_wait_s.mean())
    cpu = ran["cpu"]
    assert isinstance(cpu, pd.DataFrame) and nsys_run.run_id in cpu.columns and cpu.index.min() >= -1


def test_a_damaged_run_is_skipped_with_a_warning(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(tiny_pytorch_run.path, tmp_path / tiny_pytorch_run.run_id)
    (tmp_path / "broken-run").mkdir()
    (tmp_path / "broken-run" / "run.json").write_text("{")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tables = load_runs(tmp_path)
    assert list(tables.runs.run_id) == [tiny_pytorch_run.run_id]
    assert len(tables.skipped) == 1 and "broken-run" in tables.skipped[0]
    assert any("broken-run" in str(w.message) for w in caught)
    assert set(tables.epochs.run_id) == {tiny_pytorch_run.run_id} and not tables.cuda


def test_a_damaged_table_is_a_problem_row_and_the_rest_is_read(real_fixtures: Path, tmp_path: Path) -> None:
    import shutil

    run = Path(shutil.copytree(real_fixtures / "gpu-h100" / "20261125-001043-pytorch-alexnet-big-gpu-b100-cf98",
                               tmp_path / "cf98"))  # fmt: skip
    gpu = run / "samples" / "gpu.parquet"
    gpu.write_bytes(os.urandom(4096))
    with pytest.warns(UserWarning, match="is damaged"):
        tables = load_runs(run)
    assert tables.problems[["run_id", "file"]].values.tolist() == [["cf98", str(gpu)]]
    assert "gpu" not in tables.samples and len(tables.samples["process"]) and len(tables.cuda["kernels"])
