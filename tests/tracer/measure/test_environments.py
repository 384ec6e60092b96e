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
from tracer.measure.environments import env_python, status


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


# `tracer env create` with the PyTorch entry's requirements swapped for one tiny wheel built here: the
# real CLI, venv and pip, without downloading a framework (torch alone is ~200 MB and minutes).
_SWAP = """
import dataclasses, sys
from tracer.core import frameworks
from tracer.cli import main
fw = frameworks.FRAMEWORKS["pytorch"]
frameworks.FRAMEWORKS["pytorch"] = dataclasses.replace(
    fw,
    import_name="tinypkg",
    dist_names=("tinypkg",),
    cpu_requirements=(sys.argv[1],),
    gpu_requirements=(sys.argv[1],),
    example_requirements=(),
)
"""
_SWAPPED = _SWAP + 'sys.exit(main(["env", "create", "pytorch", "--cpu"]))\n'


def _tiny_wheel(folder: Path) -> Path:
    """A real, complete wheel with no dependencies: pip installs it without a network."""
    import base64
    import hashlib
    import zipfile

    files = {
        "tinypkg/__init__.py": "VALUE = 1\n",
        "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files["tinypkg-1.0.dist-info/RECORD"] = "\n".join([*record, "tinypkg-1.0.dist-info/RECORD,,"]) + "\n"
    wheel = folder / "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return wheel


def test_env_create_prints_one_line_per_package_set_and_logs_pip(tmp_path: Path) -> None:
    """Issue 28 item 3: pip's output goes to the install log; the terminal gets one line per package set
    (here the whole output is 2 lines; with the real PyTorch set it is the same 2 lines)."""
    wheel = _tiny_wheel(tmp_path)
    env = dict(os.environ, TRACER_CACHE=str(tmp_path / "cache"))
    result = subprocess.run(
        [sys.executable, "-c", _SWAPPED, str(wheel)], capture_output=True, text=True, env=env, timeout=600
    )
    assert result.returncode == 0, result.stderr
    lines = (result.stdout + result.stderr).splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"pytorch: installed {wheel} (") and lines[1].startswith("pytorch 1.0: ")
    log = tmp_path / "cache" / "envs" / "pytorch-install.log"
    assert "Successfully installed tinypkg-1.0" in log.read_text()


def test_env_create_that_pip_refuses_names_the_log(tmp_path: Path) -> None:
    env = dict(os.environ, TRACER_CACHE=str(tmp_path / "cache"))
    missing = tmp_path / "absent-1.0-py3-none-any.whl"
    result = subprocess.run(
        [sys.executable, "-c", _SWAPPED, str(missing)], capture_output=True, text=True, env=env, timeout=600
    )
    log = tmp_path / "cache" / "envs" / "pytorch-install.log"
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert result.stderr.count("\n") == 1 and f"pip's whole output is in {log}" in result.stderr, result.stderr
    assert "No such file or directory" in result.stderr and "No such file or directory" in log.read_text()


# Whether the environment is current, then the same with one package added to the examples' recipe.
_CURRENT = (
    _SWAP
    + """
from tracer.measure.environments import recipe_current
print(recipe_current("pytorch"))
fw = frameworks.FRAMEWORKS["pytorch"]
frameworks.FRAMEWORKS["pytorch"] = dataclasses.replace(fw, example_requirements=("lightning==2.6.6",))
print(recipe_current("pytorch"))
"""
)


def test_an_environment_made_before_its_recipe_changed_is_not_current(tmp_path: Path) -> None:
    """Set-up completes an environment whose recipe gained a package (scripts/setup.sh asks this)."""
    wheel = _tiny_wheel(tmp_path)
    env = dict(os.environ, TRACER_CACHE=str(tmp_path / "cache"))

    def ask(script: str) -> list[str]:
        result = subprocess.run(
            [sys.executable, "-c", script, str(wheel)], capture_output=True, text=True, env=env, timeout=600
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    assert ask(_CURRENT) == ["False", "False"]  # no environment yet
    ask(_SWAPPED)
    assert ask(_CURRENT) == ["True", "False"]
