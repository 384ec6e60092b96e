"""Shared test helpers: real tiny runs made with the real `tracer` CLI in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tracer.core.runfolder import RunFolder, list_runs
from tracer.environments import status

TINY = ["--epochs", "2", "--limit", "16", "--image-size", "64", "--dataset", "small"]


def run_tracer(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`tracer ARGS` as a user runs it (a real process, real exit code, real output)."""
    return subprocess.run([sys.executable, "-m", "tracer", *args], capture_output=True, text=True, timeout=timeout)


def require_framework(name: str) -> None:
    """Skips where the framework is absent, except where CI says it must be there
    (TRACER_REQUIRE_FRAMEWORKS=pytorch,tensorflow,...): then its absence fails the test."""
    if status(name).installed:
        return
    if name in os.environ.get("TRACER_REQUIRE_FRAMEWORKS", "").split(","):
        pytest.fail(f"{name} must be installed for this test run (TRACER_REQUIRE_FRAMEWORKS)")
    pytest.skip(f"{name} is not installed here: run `tracer env create {name}`")


@pytest.fixture(scope="session")
def make_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., RunFolder]:
    """Makes a real run folder: `make_run("pytorch", "--model", "alexnet", ...)` (tiny defaults)."""

    def make(framework: str = "pytorch", *args: str, expect_ok: bool = True) -> RunFolder:
        require_framework(framework)
        out = tmp_path_factory.mktemp("runs")
        extra = list(args)
        if "--model" not in extra and "--case" not in extra:
            extra += ["--model", "alexnet"]
        result = run_tracer("profile", "--framework", framework, *TINY, *extra, "--out", str(out))
        if expect_ok:
            assert result.returncode == 0, result.stderr[-3000:]
        (folder,) = list_runs(out)
        return folder

    return make


@pytest.fixture(scope="session")
def tiny_pytorch_run(make_run: Callable[..., RunFolder]) -> RunFolder:
    """One tiny real PyTorch run shared by the tests that only read a run folder."""
    return make_run("pytorch")


def _refuse_constant(name: str) -> None:
    raise ValueError(f"not strict JSON: {name}")


def assert_strict_json(folder: Path) -> int:
    """Every .json and .jsonl file under `folder` (or the file itself) parses with a strict parser (no NaN, Infinity);
    returns how many files were read, so a caller can check there were some."""
    found = [folder] if folder.is_file() else folder.rglob("*")
    files = sorted(p for p in found if p.suffix in (".json", ".jsonl") and p.is_file())
    for path in files:
        lines = path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]
        for line in lines:
            if line.strip():
                json.loads(line, parse_constant=_refuse_constant)
    return len(files)


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    path = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
    if not path.exists():
        pytest.skip(f"{path} is missing: the real trace fixtures live beside the clone in ../shared")
    return path
