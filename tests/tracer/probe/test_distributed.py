"""A user's data-parallel job under `tracer profile -- torchrun ...` (issue 52 items 4 and 5): a real
`torchrun --nproc-per-node 2` gloo job on the CPU whose rank 1 sleeps 30 ms before each step's forward
pass. The straggler is found from each rank's arrival at its step's backward() (where DDP's all-reduce
begins), the job's images/s is every rank's, and the step is split into forward, backward and optimizer;
all held to what the script prints of itself."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pyarrow.compute as pc
import pytest

from analyzers.figures.run_summary import summarise
from analyzers.figures.step_part_names import BACKWARD, FORWARD, OPTIMIZER, OTHER
from analyzers.figures.step_parts import decompose
from analyzers.figures.straggler import straggler
from tests.conftest import require_framework, run_tracer
from tracer.core import schema
from tracer.core.runfolder import RunFolder, list_runs
from tracer.measure.environments import status

SCRIPT = Path(__file__).resolve().parent / "scripts" / "ddp_slow_rank.py"
SKEW_WITHIN = 0.20  # the bound: the straggler's lateness within 20 % of what the script slept
PARTS_WITHIN = 0.25  # a per-step median beside the script's own: same steps, two clocks read microseconds apart


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunFolder, str]:
    require_framework("pytorch")
    torchrun = str(Path(status("pytorch").python).parent / "torchrun")
    out = tmp_path_factory.mktemp("runs")
    result = run_tracer("profile", "--out", str(out), "--", torchrun, "--nproc-per-node", "2", str(SCRIPT))
    assert result.returncode == 0, result.stderr[-3000:]
    (folder,) = list_runs(out)
    return folder, result.stdout


def test_the_slowed_rank_is_the_straggler_late_by_what_it_slept(ddp_run: tuple[RunFolder, str]) -> None:
    folder, said = ddp_run
    slept_ms = float(re.search(r"rank 1 slept ([0-9.]+) ms a step", said).group(1))  # type: ignore[union-attr]
    found = straggler(folder)
    assert found is not None and found.rank == 1, found
    assert found.late_by_s is not None
    assert abs(found.late_by_s * 1e3 - slept_ms) <= SKEW_WITHIN * slept_ms, (found.late_by_s, slept_ms)
    shown = run_tracer("diagnose", "--runs", str(folder.path.parent), folder.run_id)
    assert "straggler: fired" in shown.stdout and "rank 1 arrived last" in shown.stdout, shown.stdout


def test_the_jobs_images_per_s_counts_every_rank(ddp_run: tuple[RunFolder, str]) -> None:
    folder, said = ddp_run
    images = {int(r): int(n) for r, n in re.findall(r"rank (\d): (\d+) images", said)}
    assert set(images) == {0, 1}
    steps = folder.samples(schema.STEPS_TABLE)
    assert steps is not None
    for rank, n in images.items():  # each rank's steps, as many images as the rank says it trained
        mine = steps.filter(pc.equal(steps[schema.RANK], rank))
        assert pc.sum(mine["images"]).as_py() == n
    s = summarise(folder)
    assert s.steady_images_per_s is not None and len(s.rank_images_per_s) == 2
    assert s.rank_images_per_s[0] == pytest.approx(s.steady_images_per_s)
    assert sum(s.rank_images_per_s) == pytest.approx(s.steady_images_per_s * (images[0] + images[1]) / images[0])
    shown = run_tracer("show", "--runs", str(folder.path.parent), folder.run_id)
    assert f"{sum(s.rank_images_per_s):.1f}, 2 ranks" in shown.stdout, shown.stdout


def test_each_step_is_split_into_forward_backward_and_optimizer(ddp_run: tuple[RunFolder, str]) -> None:
    folder, said = ddp_run
    own = {
        int(r): tuple(float(v) / 1e3 for v in vs)
        for r, *vs in re.findall(r"rank (\d): \d+ images; median forward ([0-9.]+) ms, backward ([0-9.]+) ms, "
                                 r"optimizer ([0-9.]+) ms", said)
    }  # fmt: skip
    parts = folder.samples(schema.STEP_PARTS_TABLE)
    assert parts is not None
    for rank in (0, 1):
        mine = parts.filter(pc.equal(parts[schema.RANK], rank))
        seen = [statistics.median(mine[c].to_pylist()) for c in (schema.FORWARD_S, schema.BACKWARD_S)]
        forward, backward, _ = own[rank]
        # the script's forward starts after the batch is handed out, as the probe's does; its backward too
        assert seen[0] == pytest.approx(forward, rel=PARTS_WITHIN, abs=2e-3), (rank, seen, own[rank])
        assert seen[1] == pytest.approx(backward, rel=PARTS_WITHIN, abs=2e-3), (rank, seen, own[rank])
    # rank 0 waits for rank 1 inside backward() (DDP's all-reduce): its backward holds rank 1's sleep
    assert own[0][1] > 0.5 * own[1][0]
    d = decompose(folder)
    keys = [p.key for p in d.parts]
    assert {FORWARD, BACKWARD, OPTIMIZER, OTHER} <= set(keys)
    assert d.step_s == pytest.approx(sum(p.seconds for p in d.parts))
    shown = run_tracer("show", "--runs", str(folder.path.parent), folder.run_id)
    assert "backward (inside backward()" in shown.stdout and "optimizer step" in shown.stdout


def test_diff_puts_a_costlier_update_in_its_part(tmp_path: Path) -> None:
    """Two runs of one PyTorch loop, B sleeping 5 ms after each `optimizer.step()`: `diff` gives the gap to
    the rest of the step (not to the optimizer step, whose own time is unchanged), by the script's own clock."""
    require_framework("pytorch")
    python = status("pytorch").python
    script = SCRIPT.with_name("torch_parts.py")
    out = tmp_path / "runs"
    said = {}
    for ms in ("0", "5"):
        result = run_tracer("profile", "--out", str(out), "--", python, str(script), "--optimizer-sleep-ms", ms)
        assert result.returncode == 0, result.stderr[-3000:]
        said[ms] = float(re.search(r"optimizer and after ([0-9.]+) ms", result.stdout).group(1))  # type: ignore[union-attr]
    a, b = sorted(list_runs(out), key=lambda f: f.run_id)
    da, db = decompose(a), decompose(b)
    per_step = db.images / db.steps  # the loop's batch
    probe_gap = (db.part(OTHER) + db.part(OPTIMIZER) - da.part(OTHER) - da.part(OPTIMIZER)) * per_step
    script_gap = (said["5"] - said["0"]) / 1e3
    assert probe_gap == pytest.approx(script_gap, rel=0.3), (probe_gap, script_gap)
    assert abs(db.part(OPTIMIZER) - da.part(OPTIMIZER)) * per_step < 0.2 * script_gap  # the update itself: alike
    shown = run_tracer("diff", "--runs", str(out), a.run_id, b.run_id)
    assert shown.returncode == 0, shown.stderr
    assert "more per image in the rest of the step" in shown.stdout, shown.stdout
    for label in ("forward and loss", "backward (inside backward()", "optimizer step"):
        assert label in shown.stdout
    assert "--optimizer-sleep-ms 0" in shown.stdout and "--optimizer-sleep-ms 5" in shown.stdout  # told apart
