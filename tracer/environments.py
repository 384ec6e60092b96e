"""One virtual environment per framework (their pins conflict), under the cache folder.

`tracer env create NAME` makes it; `profile` finds its interpreter, or takes `--python`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tracer.errors import UserError
from tracer.frameworks import FRAMEWORKS, FrameworkInfo, framework_info
from tracer.paths import cache_root

_PROBE = """
import importlib.util, importlib.metadata as md, json, sys
spec = importlib.util.find_spec(sys.argv[1])
version = None
for dist in sys.argv[2:]:
    try:
        version = md.version(dist); break
    except md.PackageNotFoundError:
        pass
print(json.dumps({"found": spec is not None, "version": version, "python": sys.executable,
                  "python_version": "%d.%d.%d" % sys.version_info[:3]}))
"""


@dataclass(frozen=True)
class EnvStatus:
    framework: str
    installed: bool
    version: str | None
    python: str
    python_version: str = ""
    problem: str = ""  # why the probe could not tell (it hung, it is not Python)


PROBE_TIMEOUT_S = 60


def env_dir(framework: str) -> Path:
    return cache_root() / "envs" / framework


def env_python(framework: str) -> Path:
    return env_dir(framework) / "bin" / "python"


def probe(python: Path | str, fw: FrameworkInfo) -> EnvStatus:
    """Asks the interpreter whether it has the framework without importing it (TF takes seconds)."""
    try:
        proc = subprocess.Popen(
            [str(python), "-c", _PROBE, fw.import_name, *fw.dist_names],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,  # a hung probe is ended with everything it started
        )
        try:
            stdout, _ = proc.communicate(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            problem = f"{python} did not answer within {PROBE_TIMEOUT_S} s (hung?); it was stopped"
            return EnvStatus(fw.name, False, None, str(python), problem=problem)
        data = json.loads(stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError, IndexError, KeyError, TypeError):
        return EnvStatus(fw.name, False, None, str(python))
    return EnvStatus(fw.name, bool(data["found"]), data["version"], data["python"], data["python_version"])


def status(framework: str) -> EnvStatus:
    fw = framework_info(framework)
    python = env_python(framework)
    if not python.exists():
        return EnvStatus(framework, False, None, "")
    return probe(python, fw)


def list_all() -> list[EnvStatus]:
    return [status(name) for name in FRAMEWORKS]


def resolve_python(framework: str, explicit: str | None) -> EnvStatus:
    """The interpreter that will train: `--python` if given, else the framework's environment."""
    fw = framework_info(framework)
    if explicit:
        path = shutil.which(explicit) or explicit
        if not Path(path).exists():
            raise UserError(f"--python {explicit}: no such interpreter")
        found = probe(path, fw)
        if found.problem:
            raise UserError(f"--python {explicit}: {found.problem}")
        if not found.installed:
            raise UserError(
                f"{explicit} has no {fw.import_name} module: install {framework} into it, "
                f"or drop --python and run `tracer env create {framework}`"
            )
        return found
    found = status(framework)
    if not found.installed:
        raise UserError(
            f"{framework} is not installed: run `tracer env create {framework}` "
            f"(or pass --python PATH of an interpreter that has {fw.import_name})"
        )
    return found


def has_nvidia_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None or Path("/proc/driver/nvidia").exists()


def create(framework: str, gpu: bool | None = None, python: str = sys.executable) -> EnvStatus:
    """Makes (or completes) the framework's virtual environment; pip's output goes to the terminal."""
    fw = framework_info(framework)
    use_gpu = has_nvidia_gpu() if gpu is None else gpu
    requirements = fw.gpu_requirements if use_gpu else fw.cpu_requirements
    target = env_dir(framework)
    if not env_python(framework).exists():
        subprocess.run([python, "-m", "venv", str(target)], check=True)
    cmd = [str(env_python(framework)), "-m", "pip", "install", "--disable-pip-version-check", *requirements]
    result = subprocess.run(cmd)
    if result.returncode != 0 and fw.missing_hint:
        return _create_with_conda(fw, use_gpu, pip_exit=result.returncode)
    if result.returncode != 0:
        raise UserError(
            f"pip could not install {' '.join(requirements)} into {target} (exit {result.returncode}); "
            f"see pip's output above{'; ' + fw.note if fw.note else ''}"
        )
    return status(framework)


def _create_with_conda(fw: FrameworkInfo, use_gpu: bool, pip_exit: int) -> EnvStatus:
    """For frameworks pip cannot install here (SINGA): a conda environment in the env's place when conda
    is on PATH, else one line saying what is missing and how to use an interpreter that has it."""
    conda = shutil.which("conda") or shutil.which("mamba")
    packages = fw.conda_gpu if use_gpu else fw.conda_cpu
    if conda is None or not packages:
        raise UserError(
            f"pip could not install {fw.name} (exit {pip_exit}) and conda is not on PATH: {fw.missing_hint}"
        )
    target = env_dir(fw.name)
    shutil.rmtree(target, ignore_errors=True)
    channels = [arg for c in fw.conda_channels for arg in ("-c", c)]
    result = subprocess.run([conda, "create", "-y", "-p", str(target), *channels, *packages, "pillow"])
    if result.returncode != 0:
        raise UserError(
            f"neither pip (exit {pip_exit}) nor conda (exit {result.returncode}) could install {fw.name}: "
            f"{fw.missing_hint}"
        )
    return status(fw.name)
