"""Rules on real tiny CPU runs made in the test: oversubscription, memory growth, crash, input-bound."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image

from analyzers.diagnosis import diagnose
from analyzers.diagnosis.verdict import Verdict
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder


def verdict(folder: RunFolder, rule: str) -> Verdict:
    return next(v for v in diagnose(folder) if v.rule == rule)


def test_threads_well_above_the_cores_are_diagnosed_oversubscribed(oversubscribed: RunFolder) -> None:
    v = verdict(oversubscribed, "cpu-oversubscription")
    assert v.fired, v
    assert "--threads" in v.knob and "torch.set_num_threads" in v.knob
    threads = next(e.value for e in v.evidence if e.name == "intra-op + loader threads")
    loaders = int(oversubscribed.read_record().knobs.get("loader_workers", 0))  # the fair default budget
    assert threads == 16 + loaders


def test_default_threads_are_not_oversubscribed(plain3: RunFolder) -> None:
    v = verdict(plain3, "cpu-oversubscription")
    assert v.measured and not v.fired, v


def test_a_worker_that_leaks_is_diagnosed_with_memory_growth(leaking: RunFolder) -> None:
    v = verdict(leaking, "memory-growth")
    assert v.fired, v
    # the fault appends 200 MiB an epoch (tracer.worker.main.LEAK_MIB_PER_EPOCH): the slope says so
    assert v.value == pytest.approx(200, rel=0.25)
    assert v.unit == "MiB/epoch"


def test_no_leak_no_memory_growth(plain3: RunFolder) -> None:
    v = verdict(plain3, "memory-growth")
    assert v.measured and not v.fired, v


def test_a_run_killed_by_a_fault_is_reported_with_its_cause(crashed: RunFolder) -> None:
    v = verdict(crashed, "crash")
    assert v.fired
    assert "RuntimeError: injected fault at epoch 2" in v.finding
    assert v.finding.startswith("failed:")
    shown = run_tracer("show", str(crashed.path))
    assert "RuntimeError: injected fault at epoch 2" in shown.stdout.split("Diagnosis")[1]


def test_a_finished_run_has_no_crash_verdict(plain3: RunFolder) -> None:
    v = verdict(plain3, "crash")
    assert v.measured and not v.fired


def test_thread_count_steady_in_a_real_run(plain3: RunFolder) -> None:
    v = verdict(plain3, "thread-per-image")
    assert v.measured and not v.fired, v


def test_diagnose_command_lists_every_rule_as_json(oversubscribed: RunFolder) -> None:
    from analyzers.diagnosis import RULES

    result = run_tracer("diagnose", str(oversubscribed.path), "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [v["rule"] for v in data["verdicts"]] == list(RULES.rules)
    fired = {v["rule"] for v in data["verdicts"] if v["fired"]}
    assert "cpu-oversubscription" in fired
    text = run_tracer("diagnose", str(oversubscribed.path))
    assert text.returncode == 0 and "cpu-oversubscription" in text.stdout


def test_diagnose_of_a_folder_that_is_not_a_run_is_one_line(tmp_path: Path) -> None:
    result = run_tracer("diagnose", str(tmp_path / "nothing"), "--runs", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "tracer: error:" in result.stderr


def test_compare_says_which_verdicts_differ(plain3: RunFolder, oversubscribed: RunFolder) -> None:
    result = run_tracer("compare", str(plain3.path), str(oversubscribed.path))
    assert result.returncode == 0, result.stderr
    block = result.stdout.split("Diagnosis: verdicts that differ")[1]
    assert "CPU oversubscribed" in block


def _big_photos(root: Path, per_class: int = 8) -> Path:
    """A folder of large JPEGs (3000x2000, noisy so they do not compress to nothing)."""
    import numpy as np

    rng = np.random.default_rng(0)
    for cls in ("fire", "smoke", "nofire"):
        (root / cls).mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 255, (2000, 3000, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / cls / f"{i}.jpg", quality=90)
    return root


def test_input_bound_on_real_runs(make_run: Callable[..., RunFolder], tmp_path: Path) -> None:
    """Issue 18's per-step table decides it: large photos, 0 loader workers and a small model wait for
    data; AlexNet on the generated set at 64 px does not. Runs only where the worker writes it.
    The slow run computes on one thread: two intra-op threads on a machine busy with other work spin
    at their barriers, and a CI run that shared the VM with other tests once saw compute outgrow the
    decoding (idle, the wait is 93-94 % with either)."""
    photos = _big_photos(tmp_path / "photos")
    slow = make_run("pytorch", "--dataset", str(photos), "--model", "mobilenet_v2", "--image-size", "32",
                    "--batch", "8", "--workers", "0", "--limit", "24", "--threads", "1")  # fmt: skip
    fast = make_run("pytorch", "--model", "alexnet", "--image-size", "64", "--batch", "8")
    assert slow.samples("steps") is not None  # every worker writes per-step timing (issue 18 is done)
    v_slow, v_fast = verdict(slow, "input-bound"), verdict(fast, "input-bound")
    assert v_slow.fired and v_slow.value is not None and v_slow.value > 50, v_slow
    assert v_fast.measured and not v_fast.fired, v_fast
