"""Issue 27, item 12: the oversubscription verdict holds on a busy machine. With one busy process per
core beside the runs, 16 intra-op threads on the cores are still the run's own oversubscription, and
the default threads are not (the preemption is the other processes' doing, and the verdict says so)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from analyzers.diagnosis import diagnose
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder

FAST = ("--batch", "4")


@pytest.fixture(scope="module")
def cpu_hog() -> Iterator[None]:
    """One process per core that never yields, as another user's job on the machine."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.fixture(scope="module")
def beside_a_hog(cpu_hog: None, make_run: Callable[..., RunFolder]) -> tuple[RunFolder, RunFolder]:
    return make_run("pytorch", *FAST, "--epochs", "3"), make_run("pytorch", *FAST, "--threads", "16")


def _oversubscription(folder: RunFolder):  # type: ignore[no-untyped-def]
    return next(v for v in diagnose(folder) if v.rule == "cpu-oversubscription")


def test_the_runs_own_threads_are_told_from_other_processes(beside_a_hog: tuple[RunFolder, RunFolder]) -> None:
    plain, oversubscribed = beside_a_hog
    over = _oversubscription(oversubscribed)
    loaders = int(oversubscribed.read_record().knobs.get("loader_workers", 0))
    assert over.fired and f"{16 + loaders} threads on" in over.finding, over
    assert "--threads" in over.knob and "torch.set_num_threads" in over.knob
    others = next(e.value for e in over.evidence if e.name == "other processes' CPU")
    assert others is not None and others > 0
    quiet = _oversubscription(plain)
    assert quiet.measured and not quiet.fired, quiet


def test_compare_and_diagnose_beside_a_hog(beside_a_hog: tuple[RunFolder, RunFolder]) -> None:
    plain, oversubscribed = beside_a_hog
    result = run_tracer("compare", str(plain.path), str(oversubscribed.path))
    assert result.returncode == 0, result.stderr
    assert "CPU oversubscribed" in result.stdout.split("Diagnosis: verdicts that differ")[1]
    shown = run_tracer("diagnose", str(oversubscribed.path))
    assert shown.returncode == 0 and "cpu-oversubscription" in shown.stdout
