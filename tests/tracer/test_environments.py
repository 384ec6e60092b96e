"""Per-framework environments; SINGA's needs a CPython 3.6, and says in one line when there is none."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tracer.worker.helpers import require_singa
from tracer.core.frameworks import FRAMEWORKS
from tracer.environments import env_python, status


def tracer_cli(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if cache is not None:
        env["TRACER_CACHE"] = str(cache)
    return subprocess.run([sys.executable, "-m", "tracer", *args], capture_output=True, text=True, env=env, timeout=600)


def test_env_create_singa_without_python_3_6_says_what_is_missing(tmp_path: Path) -> None:
    """No python3.6 on PATH, no pyenv, an empty pyenv root: one line, exit 2, nothing made."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin", PYENV_ROOT=str(tmp_path / "pyenv"))
    env.update(HOME=str(tmp_path), TRACER_CACHE=str(tmp_path / "cache"))
    result = subprocess.run(
        [sys.executable, "-m", "tracer", "env", "create", "singa"], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1
    for needed in ("singa needs a CPython 3.6", "none was found", "pyenv install 3.6", "--python"):
        assert needed in result.stderr
    assert not (tmp_path / "cache" / "envs" / "singa").exists()


def test_env_create_singa_refuses_another_python(tmp_path: Path) -> None:
    result = tracer_cli("env", "create", "singa", "--python", sys.executable, cache=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert f"is Python {sys.version_info[0]}.{sys.version_info[1]}; singa needs Python 3.6" in result.stderr


@pytest.mark.slow
def test_env_create_singa_makes_an_environment_that_imports_singa() -> None:
    """In the real cache (made from scratch by `scripts/setup.sh all` in CI; here it is completed: pip
    finds everything in place)."""
    require_singa()
    result = tracer_cli("env", "create", "singa")
    assert result.returncode == 0, result.stderr[-3000:]
    found = status("singa")
    assert found.installed and found.version == "3.0.0.dev1" and found.python_version.startswith("3.6.")
    assert f"singa 3.0.0.dev1: {env_python('singa')}" in result.stdout
    listed = tracer_cli("env", "list")
    rows = [re.findall(r"[\w.]+", line)[:3] for line in listed.stdout.splitlines()]
    assert ["singa", "yes", "3.0.0.dev1"] in rows


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
