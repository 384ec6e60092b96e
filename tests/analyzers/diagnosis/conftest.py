"""Real tiny CPU runs shared by the diagnosis tests (each made once per session)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder, list_runs

FAST = ("--batch", "4")
NSYS_FIXTURE = "nsys-h100/resnet18_train_nsys2025.3.1.sqlite"


@pytest.fixture(scope="session")
def plain3(make_run: Callable[..., RunFolder]) -> RunFolder:
    """Three epochs, defaults: the run every rule should stay quiet on (start-up aside)."""
    return make_run("pytorch", *FAST, "--epochs", "3")


@pytest.fixture(scope="session")
def oversubscribed(make_run: Callable[..., RunFolder]) -> RunFolder:
    return make_run("pytorch", *FAST, "--threads", "16")


@pytest.fixture(scope="session")
def leaking(make_run: Callable[..., RunFolder]) -> RunFolder:
    """Leaks from epoch 2 on. No loader processes: a forked loader counts the parent's pages in its own RSS,
    so whether a sample lands while one lives moves the tree's peak by hundreds of MiB; four epochs give
    the slope three steady points."""
    return make_run("pytorch", *FAST, "--epochs", "4", "--workers", "0", "--inject-fault", "leak@2")


@pytest.fixture(scope="session")
def crashed(make_run: Callable[..., RunFolder]) -> RunFolder:
    return make_run("pytorch", *FAST, "--inject-fault", "raise@2", expect_ok=False)


@pytest.fixture(scope="session")
def imported_nsys(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    """The real H100 ResNet-18 nsys trace, imported with `tracer import` as a user would."""
    out = tmp_path_factory.mktemp("imported")
    result = run_tracer("import", str(real_fixtures / NSYS_FIXTURE), "--out", str(out), "--framework", "pytorch")
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(out)
    return folder
