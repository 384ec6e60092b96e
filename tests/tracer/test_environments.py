"""Per-framework environments: SINGA, which cannot be installed here, fails with one clear line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tracer.worker.helpers import require_singa
from tracer.core.runfolder import RunFolder
from tracer.environments import env_python, status
from tracer.frameworks import FRAMEWORKS


def tracer_cli(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if cache is not None:
        env["TRACER_CACHE"] = str(cache)
    return subprocess.run([sys.executable, "-m", "tracer", *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.skipif(shutil.which("conda") is not None, reason="conda is here: it may really install SINGA")
def test_env_create_singa_says_what_is_missing(tmp_path: Path) -> None:
    if status("singa").installed:
        pytest.skip("SINGA is installed here")
    result = tracer_cli("env", "create", "singa", cache=tmp_path)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("tracer: error: pip could not install singa")
    for needed in ("conda is not on PATH", "module `singa`", "singa-cpu", "--python"):
        assert needed in last
    assert result.stderr.count("tracer: error") == 1


def test_profile_singa_without_an_interpreter_is_one_line(tmp_path: Path) -> None:
    result = tracer_cli(
        "profile",
        "--framework",
        "singa",
        "--model",
        "alexnet",
        "--dataset",
        "small",
        "--out",
        str(tmp_path),
        cache=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "tracer env create singa" in result.stderr and "--python" in result.stderr


def test_python_without_singa_is_refused(tmp_path: Path) -> None:
    result = tracer_cli(
        "profile", "--framework", "singa", "--case", "SimpleBig", "--python", sys.executable, "--out", str(tmp_path)
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "has no singa module" in result.stderr


def test_every_framework_has_cpu_and_gpu_recipes() -> None:
    for fw in FRAMEWORKS.values():
        assert fw.cpu_requirements and fw.gpu_requirements, fw.name
    assert "numpy==1.23.5" in FRAMEWORKS["mxnet"].cpu_requirements  # MXNet 1.9.1 needs np.bool


@pytest.mark.slow
def test_singa_tiny_run(make_run: Callable[..., RunFolder]) -> None:
    """Runs only where SINGA is installed (`tracer env create singa` succeeded); skipped here."""
    require_singa()
    folder = make_run("singa", "--model", "mobilenet_v2", "--limit", "8", "--batch", "4")
    record = folder.read_record()
    assert record.outcome.status.value == "ok" and len(folder.epochs()) == 2
    assert env_python("singa").exists()
