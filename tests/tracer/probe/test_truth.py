"""What an epoch and a step are in a user's own script (issue 52), held against the script's own truth:
each script of tests/tracer/probe/scripts prints its epochs, steps, samples and perf_counter seconds per
epoch (and, where it can, its own measure of the wait for data); the run folder must agree: steps, epochs
and samples equal, each epoch's time within 5 % (+ scheduler slack), the data wait within 3 points, and
where a figure cannot be measured it says so (never a quiet verdict, never 0 images/s)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from analyzers.diagnosis import diagnose
from analyzers.diagnosis import thresholds as th
from analyzers.diagnosis.knobs import command_input_knobs
from analyzers.figures import steps
from analyzers.figures.run_summary import summarise as run_summary
from analyzers.render.marker import marker_lines
from tests.conftest import require_framework, run_tracer
from tracer.core.runfolder import RunFolder, list_runs, partial_epochs
from tracer.core.schema import CLASSES, MODEL_FACTS, STEPS_TABLE, Probe
from tracer.measure.environments import status

SCRIPTS = Path(__file__).resolve().parent / "scripts"
SLACK_S = 0.015  # a loaded 2-core machine's scheduler slack beside the 5 %


class Profiled:
    def __init__(self, folder: RunFolder, said: str, returncode: int) -> None:
        """`said`: what the tracer printed of the run (its summary goes to stderr, beside the script's output)."""
        self.folder, self.said, self.returncode = folder, said, returncode

    @property
    def truth(self) -> dict:  # type: ignore[type-arg]
        """The script's last JSON line (its state when it ended)."""
        lines = (self.folder.path / "raw" / "stdout.log").read_text().splitlines()
        return json.loads([line for line in lines if line.startswith("{")][-1])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Profiled]:
    made: dict[tuple[str, ...], Profiled] = {}

    def run(framework: str, script: str, *args: str) -> Profiled:
        key = (framework, script, *args)
        if key not in made:
            require_framework(framework)
            out = tmp_path_factory.mktemp("runs")
            result = run_tracer(
                "profile", "--out", str(out), "--", status(framework).python, str(SCRIPTS / script), *args
            )
            (folder,) = list_runs(out)
            made[key] = Profiled(folder, result.stderr, result.returncode)
        return made[key]

    return run


def verdict(folder: RunFolder, rule: str):  # type: ignore[no-untyped-def]
    (found,) = [v for v in diagnose(folder) if v.rule == rule]
    return found


def assert_epochs_match(folder: RunFolder, epoch_s: list[float]) -> None:
    got = [e.duration_s for e in sorted(folder.epochs(), key=lambda e: e.epoch)]
    assert len(got) == len(epoch_s)
    for mine, theirs in zip(got, epoch_s):
        assert abs(mine - theirs) <= 0.05 * theirs + SLACK_S, (got, epoch_s)


def test_a_marked_tensor_slice_loop_gives_the_scripts_epochs_steps_and_samples(
    profile: Callable[..., Profiled],
) -> None:
    run = profile("pytorch", "torch_slices.py", "--marker")
    assert run.returncode == 0
    truth, table = run.truth, run.folder.samples(STEPS_TABLE)
    assert table is not None and set(table.column("probe").to_pylist()) == {Probe.MARKER}
    assert table.num_rows == truth["steps"] and sum(table.column("images").to_pylist()) == truth["samples"]
    assert_epochs_match(run.folder, truth["epoch_s"])
    # The script's 10 classes read from its cross-entropy: chance level is ln 10, not a default.
    chance = verdict(run.folder, "chance-level")
    assert chance.measured and any("ln(10 classes)" in e.name for e in chance.evidence)


def test_an_unmarked_tensor_slice_loop_counts_its_optimizer_updates_and_says_what_it_cannot(
    profile: Callable[..., Profiled],
) -> None:
    run = profile("pytorch", "torch_slices.py")
    assert run.returncode == 0
    truth, table = run.truth, run.folder.samples(STEPS_TABLE)
    assert table is not None and set(table.column("probe").to_pylist()) == {Probe.TORCH_OPTIMIZER}
    assert table.num_rows == truth["steps"]  # every update a step, the first one too
    assert table.column("images").null_count == table.num_rows  # samples not counted ...
    summary = run_summary(run.folder)
    assert summary.steady_images_per_s is None and summary.whole.images_per_s is None  # ... so no images/s
    wait = verdict(run.folder, "input-bound")
    assert wait.state == "not measured" and "optimizer updates" in wait.finding
    assert "not measured" in run.said.split("data wait (steady")[1].splitlines()[0]
    assert run.folder.read_record().knobs[f"{MODEL_FACTS}.{CLASSES}"] == 10  # from its first cross-entropy


def test_non_persistent_workers_start_up_and_shut_down_inside_their_epochs(profile: Callable[..., Profiled]) -> None:
    run = profile("pytorch", "torch_loader_truth.py", "--workers", "2", "--ms", "3")
    assert run.returncode == 0
    truth, table = run.truth, run.folder.samples(STEPS_TABLE)
    assert table is not None and table.num_rows == truth["steps"]
    assert sum(table.column("images").to_pylist()) == truth["samples"]
    assert_epochs_match(run.folder, truth["epoch_s"])
    # Its own measure of the wait (iter() and next()) over its steps' time, steady epochs (2 and 3).
    theirs = 100 * sum(truth["wait_s"][1:]) / sum(truth["steps_s"][1:])
    splits = [s for s in steps.epoch_splits(run.folder) if s.epoch > 1]
    mine = 100 * steps.run_share(splits)  # type: ignore[operator]
    assert abs(mine - theirs) <= 3, (mine, theirs)
    # Each epoch = its steps + what lies between them (the workers' shutdown at the pass's end).
    between = steps.between_steps(run.folder)
    for s in steps.epoch_splits(run.folder):
        epoch = next(e for e in run.folder.epochs() if e.epoch == s.epoch)
        assert abs(s.total_s + between[s.epoch] - epoch.duration_s) < 1e-6
    found = verdict(run.folder, "input-bound")
    if abs(theirs - th.INPUT_BOUND_PCT) > 5:  # the verdict of the loop as written, away from the threshold
        assert found.fired == (theirs > th.INPUT_BOUND_PCT), (found.finding, theirs)
    if found.fired:
        assert "persistent_workers=True" in found.knob and "num_workers=2" in found.knob


@pytest.mark.parametrize("how", ["raise", "interrupt"])
def test_an_epoch_left_by_a_failure_or_ctrl_c_is_partial_and_out_of_the_steady_state(
    how: str, profile: Callable[..., Profiled]
) -> None:
    run = profile("pytorch", "torch_loader_truth.py", "--stop-in", "3:2", "--how", how)
    assert run.returncode != 0
    truth = run.truth  # the last line it printed: epochs 1 and 2 done
    assert [e.epoch for e in run.folder.epochs()] == [1, 2] and truth["epochs"] == 2
    assert partial_epochs(run.folder.events()) == [(3, 2)]
    assert_epochs_match(run.folder, truth["epoch_s"])
    summary = run_summary(run.folder)
    assert summary.steady_epochs == 1 and summary.partial_epochs == ((3, 2),)
    assert "epoch 3 partial (2 steps, left out)" in run.said


def test_keras_fit_on_a_slow_map_counts_its_samples_and_measures_its_wait(
    profile: Callable[..., Profiled],
) -> None:
    run = profile("tensorflow", "keras_slow_map.py")
    assert run.returncode == 0
    truth, table = run.truth, run.folder.samples(STEPS_TABLE)
    assert table is not None and set(table.column("probe").to_pylist()) == {Probe.KERAS_FIT}
    assert table.num_rows == truth["steps"] and sum(table.column("images").to_pylist()) == truth["samples"]
    assert [e.images for e in run.folder.epochs()] == [68, 68, 68]  # the last batch of 4 counted as 4
    assert_epochs_match(run.folder, truth["epoch_s"])
    # The wait Keras's graph hides, measured: the pipeline alone takes longer than an epoch does, a step's
    # compute a few ms of it, so the steps wait for their batch most of each steady epoch.
    splits = steps.epoch_splits(run.folder)
    assert all(s.wait_measured for s in splits)
    last = splits[-1]
    theirs = 100 * (1 - truth["steps"] / 3 * truth["compute_s"] / truth["epoch_s"][-1])
    # The bound leaves room for a loaded machine (the map sleeps, the step computes: CPU load inflates only the
    # compute, and 75 % was seen under a load of 8 on two cores); the defect it guards against said 1 %.
    assert last.data_wait_share is not None and 100 * last.data_wait_share >= min(70.0, theirs - 15)
    wait = verdict(run.folder, "input-bound")
    assert wait.fired and "num_parallel_calls" in wait.knob, wait.finding
    assert run_summary(run.folder).steady_images_per_s  # not 0.0
    knobs = run.folder.read_record().knobs
    assert knobs[f"{MODEL_FACTS}.{CLASSES}"] == 10
    # The knob fits the pipeline as written: a map at num_parallel_calls=1, a prefetch already there.
    advice = command_input_knobs([Probe.KERAS_FIT], knobs)
    assert "num_parallel_calls" in advice and ".prefetch" not in advice


def test_a_tf_data_pass_holds_its_iterators_teardown(profile: Callable[..., Profiled]) -> None:
    """An eager loop over tf.data on a busy machine: the pipeline's iterator, torn down after its StopIteration
    (its threads joined), took 0.1-1.2 s before the loop's next line; the epoch holds it (it was outside,
    epochs 12 % short), as the time between the steps."""
    run = profile("tensorflow", "tf_data_teardown.py")
    assert run.returncode == 0, run.said[-2000:]
    truth, table = run.truth, run.folder.samples(STEPS_TABLE)
    assert table is not None and table.num_rows == truth["steps"] == 96
    assert sum(table.column("images").to_pylist()) == truth["samples"]
    assert_epochs_match(run.folder, truth["epoch_s"])
    between = steps.between_steps(run.folder)
    for s, tail in zip(steps.epoch_splits(run.folder), truth["tail_s"]):
        assert between[s.epoch] >= tail - (0.05 * tail + SLACK_S), (between, truth["tail_s"])


def test_a_script_with_no_step_seen_is_told_the_two_marker_lines(tmp_path: Path) -> None:
    require_framework("pytorch")
    script = tmp_path / "no_loop.py"
    script.write_text("import torch\nw = torch.zeros(3)\nfor _ in range(5):\n    w = w + torch.ones(3)\nprint(w)\n")
    out = tmp_path / "runs"
    result = run_tracer("profile", "--out", str(out), "--", status("pytorch").python, str(script))
    assert result.returncode == 0, result.stderr[-2000:]
    first, second = marker_lines("pytorch")
    assert first in result.stderr and second in result.stderr
    (folder,) = list_runs(out)
    found = verdict(folder, "input-bound")
    assert found.state == "not measured" and first in found.finding and "issue 18" not in found.finding
    shown = run_tracer("diagnose", "--runs", str(out), folder.run_id)
    assert second in shown.stdout.replace("\n  ", " ")


def test_an_asynchronous_jax_loop_ends_its_steps_and_epochs_when_their_work_is_done(
    profile: Callable[..., Profiled],
) -> None:
    run = profile("jax", "jax_async.py")
    assert run.returncode == 0
    truth, table = run.truth, run.folder.samples(STEPS_TABLE)
    assert table is not None and table.num_rows == truth["steps"]
    assert sum(table.column("images").to_pylist()) == truth["samples"]
    assert_epochs_match(run.folder, truth["epoch_s"])  # the drain at the loss read is the epoch's
    # The device waited for data only for each epoch's first batch: the host's own wait in next(),
    # hidden behind the device's work, is not a wait (a host-timed loop said 25-35 % here).
    for s in steps.epoch_splits(run.folder):
        assert s.data_wait_share is not None
        assert abs(100 * s.data_wait_share - truth["expected_wait_pct"][s.epoch - 1]) <= 3
    assert not verdict(run.folder, "input-bound").fired


def test_mxnet_steps_end_when_the_engine_has_done_their_work(profile: Callable[..., Profiled]) -> None:
    """MXNet's engine queues a step's work and returns: timed on the host, the epochs were 64 % short
    (0.43 s against 1.18 s) and the steps waited "91 %" for data that was in memory (the engine's backlog
    blocked the batch's copy); each update is now watched, and the drain at the loss read is the epoch's."""
    run = profile("mxnet", "mxnet_async.py")
    assert run.returncode == 0
    truth, table = run.truth, run.folder.samples(STEPS_TABLE)
    assert table is not None and table.num_rows == truth["steps"]
    assert sum(table.column("images").to_pylist()) == truth["samples"]
    assert sum(truth["host_loop_s"][1:]) < 0.8 * sum(truth["epoch_s"][1:])  # the engine does run behind
    assert_epochs_match(run.folder, truth["epoch_s"])
    for s in steps.epoch_splits(run.folder):
        assert s.data_wait_share is not None and 100 * s.data_wait_share <= 5, s
    assert not verdict(run.folder, "input-bound").fired
