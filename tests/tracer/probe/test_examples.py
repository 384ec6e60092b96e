"""Each example of examples/ under `tracer profile --` on the CPU, asserting on its run folder: steps
found with the probe named, an input-bound DataLoader read as such with its own knobs, the Keras and
grain scripts' steps, a failing script's traceback, Ctrl-C on torchrun, PyTorch beside JAX."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from analyzers.diagnosis import diagnose
from tests.conftest import ctrl_c_reaches_python, require_framework, run_tracer
from tracer.core.records import RunStatus
from tracer.core.runfolder import RunFolder, list_runs
from tracer.core.schema import PROBE, RANK, STEPS_TABLE, Probe
from tracer.measure.environments import status

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def python_of(framework: str) -> str:
    require_framework(framework)
    return status(framework).python


@pytest.fixture(scope="session")
def profile_example(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., RunFolder]:
    """`tracer profile -- <framework's python> examples/SCRIPT ARGS` once per distinct call; its folder."""
    made: dict[tuple[str, ...], RunFolder] = {}

    def run(framework: str, script: str, *args: str, expect: int = 0) -> RunFolder:
        key = (framework, script, *args)
        if key not in made:
            out = tmp_path_factory.mktemp("runs")
            result = run_tracer("profile", "--out", str(out), "--", python_of(framework), str(EXAMPLES / script), *args)
            assert result.returncode == expect, result.stderr[-3000:]
            (made[key],) = list_runs(out)
        return made[key]

    return run


def probes(folder: RunFolder) -> set[str]:
    steps = folder.samples(STEPS_TABLE)
    assert steps is not None and steps.num_rows > 0, f"no steps in {folder.path}"
    return set(steps.column(PROBE).to_pylist())


def input_bound(folder: RunFolder):  # type: ignore[no-untyped-def]
    (verdict,) = [v for v in diagnose(folder) if v.rule == "input-bound"]
    return verdict


LOADER = ("pytorch_dataloader.py", "--items", "64", "--batch", "16", "--epochs", "2")
# 60 ms an item: ten times the plain loop's whole step per image, so a busy machine (the plain run's 4 steady
# steps once took as long as the slowed ones' at 20 ms) never hides the slowed loader's wait
SLOWED = (*LOADER, "--slow-ms", "60")


def test_a_slowed_dataloader_is_input_bound_with_its_own_knobs(profile_example: Callable[..., RunFolder]) -> None:
    folder = profile_example("pytorch", *SLOWED)
    assert probes(folder) == {Probe.TORCH_DATALOADER}
    steps = folder.samples(STEPS_TABLE)
    assert steps is not None and steps.num_rows == 2 * 4  # two epochs of 64 / 16 batches
    verdict = input_bound(folder)
    assert verdict.fired, verdict.finding
    assert "DataLoader(num_workers=N" in verdict.knob and "(now num_workers=0," in verdict.knob
    assert "--workers" not in verdict.knob and "--image-size" not in verdict.knob  # the script's knobs, not ours
    record = folder.read_record()
    assert record.command is not None and record.command.frameworks_imported == ("pytorch",)
    assert record.measurement.framework == "pytorch"


def test_the_same_loader_without_the_sleep_is_not_input_bound(profile_example: Callable[..., RunFolder]) -> None:
    folder = profile_example("pytorch", *LOADER)
    verdict = input_bound(folder)
    assert verdict.measured and not verdict.fired, verdict.finding


def test_diff_of_two_runs_of_a_script_says_the_slowed_loader_waits(profile_example: Callable[..., RunFolder]) -> None:
    """`tracer diff` of the plain and the slowed loader (two runs of one command): the gap is data wait."""
    import json

    plain, slowed = profile_example("pytorch", *LOADER), profile_example("pytorch", *SLOWED)
    result = run_tracer("diff", str(plain.path), str(slowed.path), "--format", "json")
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    assert out["gap_s"] > 0 and out["parts"][0]["key"] == "data_wait" and out["parts"][0]["delta_s"] > 0
    # each side named by its script and arguments (two runs of one script told apart), its batch the script's own
    assert out["a"]["model"].startswith("pytorch_dataloader.py") and out["b"]["model"].endswith("--slow-ms 60")
    assert out["b"]["batch"] is None
    assert any("more per image waiting for data" in line for line in out["sentences"])


def test_keras_fit_has_steps(profile_example: Callable[..., RunFolder]) -> None:
    folder = profile_example("tensorflow", "gpt_keras.py", "--samples", "32", "--epochs", "2")
    assert probes(folder) == {Probe.KERAS_FIT}
    assert [e.epoch for e in folder.epochs()] == [1, 2]
    assert all(e.loss == e.loss for e in folder.epochs())  # Keras's logs give the loss for free


# Loops of training libraries that are not a plain `for`: Lightning takes `len(loader)` batches and
# keeps the iterator until the next epoch (persistent loader workers here), with a validation sanity
# check before the first epoch and a validation after each; transformers' Trainer reads one batch ahead
# through accelerate, and all the batches of an update under gradient accumulation. 128 samples in batches
# of 16: 8 trained batches an epoch.
TRAINING_LIBRARIES = [
    ("gpt_lightning.py", "--workers", "1"),
    ("gpt_hf_trainer.py",),
    ("gpt_hf_trainer.py", "--accumulate", "4"),  # four batches taken, then trained: one step per update
]


@pytest.mark.parametrize("script", TRAINING_LIBRARIES, ids=[" ".join(s) for s in TRAINING_LIBRARIES])
def test_a_training_librarys_epochs_hold_every_trained_batch(
    script: tuple[str, ...], profile_example: Callable[..., RunFolder]
) -> None:
    folder = profile_example("pytorch", *script, "--samples", "128", "--epochs", "3")
    assert probes(folder) == {Probe.TORCH_DATALOADER}
    epochs = folder.epochs()
    assert [e.epoch for e in epochs] == [1, 2, 3] and [e.images for e in epochs] == [128] * 3
    steps = folder.samples(STEPS_TABLE)
    assert steps is not None
    per_epoch = {e: 0 for e in (1, 2, 3)}
    for epoch, images in zip(steps.column("epoch").to_pylist(), steps.column("images").to_pylist()):
        per_epoch[epoch] += images
    assert per_epoch == {1: 128, 2: 128, 3: 128}  # validation batches are not steps
    updates = 128 // 16 // (int(script[script.index("--accumulate") + 1]) if "--accumulate" in script else 1)
    assert steps.num_rows == 3 * updates  # one step per optimizer update, the first one too
    for e in epochs:  # an epoch ends with its last step, not where the library's epoch end finished
        ends = [
            s + 1e9 * (w + c)
            for ep, s, w, c in zip(
                *(steps.column(n).to_pylist() for n in ("epoch", "start_ns", "data_wait_s", "compute_s"))
            )
            if ep == e.epoch
        ]
        assert abs(e.end_ns - max(ends)) < 2e6
    assert all(e.loss == e.loss for e in epochs)  # the loss given to backward(), read at each epoch's end


def test_a_failing_script_ends_failed_with_its_traceback(profile_example: Callable[..., RunFolder]) -> None:
    folder = profile_example("pytorch", "raises_in_epoch2.py", expect=1)
    record = folder.read_record()
    assert record.outcome.status is RunStatus.FAILED and record.outcome.exit_code == 1
    last = "ValueError: bad batch in epoch 2: a transform returned the wrong shape"
    assert record.outcome.stderr_tail[-1] == last
    shown = run_tracer("show", "--runs", str(folder.path.parent), folder.run_id)
    assert last in shown.stdout


def test_pytorch_beside_jax_compares_steps_cpu_memory_and_threads(
    profile_example: Callable[..., RunFolder],
) -> None:
    # A steady epoch must outlast the sampler's 100 ms for its rows to hold a sample. PyTorch's epoch of 64
    # samples (4 steps) took about 50 ms on an idle machine: one run in two had none; 512 samples take
    # 0.4 s. JAX's steady epoch of 64 samples takes 33 ms: every window of its text (about 540, 0.1 s an
    # epoch) and seven steady epochs give those rows several samples.
    torch_run = profile_example("pytorch", "gpt_pytorch.py", "--samples", "512", "--epochs", "2")
    jax_run = profile_example("jax", "gpt_jax.py", "--samples", "1024", "--epochs", "8")
    assert probes(torch_run) == {Probe.TORCH_DATALOADER} and probes(jax_run) == {Probe.GRAIN}
    result = run_tracer("compare", str(torch_run.path), str(jax_run.path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "pytorch: " in out and "gpt_pytorch.py" in out and "jax: " in out and "gpt_jax.py" in out
    for row in ("step time (steady", "data wait (steady", "CPU % mean", "peak RSS", "threads median"):
        line = next(line for line in out.splitlines() if row in line)
        cells = [c.strip() for c in line.split("│") if c.strip()]
        assert len(cells) >= 3 and cells[1] != "-" and cells[2] != "-", line


def test_ctrl_c_on_torchrun_leaves_no_process_and_the_run_interrupted(tmp_path: Path) -> None:
    python = python_of("pytorch")
    torchrun = str(Path(python).parent / "torchrun")
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "tracer", "profile", "--out", str(out), "--", torchrun, "--nproc-per-node", "2"]
    cmd += [str(EXAMPLES / "torchrun_gloo.py"), "--epochs", "100000"]
    tracer = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=ctrl_c_reaches_python)
    seen: set[psutil.Process] = set()
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:  # until both ranks have stepped
            seen |= set(psutil.Process(tracer.pid).children(recursive=True))
            ranks = {f.name for f in out.glob(f"*/samples/{STEPS_TABLE}-*.csv") if f.stat().st_size > 200}
            if len(ranks) >= 2:
                break
            assert tracer.poll() is None, tracer.communicate()[1][-3000:]
            time.sleep(0.5)
        else:
            pytest.fail("the ranks took no step in 400 s")
        seen |= set(psutil.Process(tracer.pid).children(recursive=True))
        tracer.send_signal(signal.SIGINT)
        _, err = tracer.communicate(timeout=120)
    finally:
        if tracer.poll() is None:
            tracer.kill()
    assert tracer.returncode == 130, err[-3000:]
    alive = [p for p in seen if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"left behind: {alive}"
    (folder,) = list_runs(out)
    record = folder.read_record()
    assert record.outcome.status is RunStatus.INTERRUPTED
    steps = folder.samples(STEPS_TABLE)
    assert steps is not None and set(steps.column(RANK).to_pylist()) == {0, 1}  # both ranks, told apart
    assert [r.rank for r in record.rank_infos] == [0, 1] and record.world_size == 2


def test_examples_run_unchanged_without_the_tracer() -> None:
    """The marker and the probe's absence change nothing: a script runs as it is (the cheap one here)."""
    python = python_of("pytorch")
    done = subprocess.run(
        [python, str(EXAMPLES / "raises_in_epoch2.py")], capture_output=True, text=True, env={**os.environ}
    )
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1].startswith("ValueError: bad batch")


NAN_LOOP = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(1, 6):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y) * (float("nan") if epoch == 2 else 1.0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("epoch", epoch, "done")
"""


def test_a_nan_loss_ends_the_run_diverged_at_that_epochs_end(tmp_path: Path) -> None:
    script = tmp_path / "nan_loop.py"
    script.write_text(NAN_LOOP)
    out = tmp_path / "runs"
    result = run_tracer("profile", "--out", str(out), "--", python_of("pytorch"), str(script))
    assert result.returncode == 1, result.stderr[-3000:]
    assert "epoch 1 done" in result.stdout and "epoch 2 done" not in result.stdout  # stopped at epoch 2's end
    (folder,) = list_runs(out)
    outcome = folder.read_record().outcome
    assert outcome.status is RunStatus.DIVERGED and outcome.divergence is not None
    assert outcome.divergence.epoch == 2 and outcome.divergence.loss == "nan"
