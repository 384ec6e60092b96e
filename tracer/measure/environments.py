"""One virtual environment per framework (their pins conflict), under the cache folder.

`tracer env create NAME` makes it; `profile` finds its interpreter, or takes `--python`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from tracer.core.errors import UserError
from tracer.core.frameworks import FRAMEWORKS, FrameworkInfo, framework_info
from tracer.core.paths import cache_root

# Runs in the framework's interpreter, which may be Python 3.6 (no importlib.metadata: pkg_resources).
_PROBE = """
import importlib.util, json, sys
try:
    import importlib.metadata as md
    dist_version, missing = md.version, md.PackageNotFoundError
except ImportError:
    import pkg_resources
    dist_version = lambda name: pkg_resources.get_distribution(name).version
    missing = pkg_resources.DistributionNotFound
spec = importlib.util.find_spec(sys.argv[1])
version = None
for dist in sys.argv[2:]:
    try:
        version = dist_version(dist); break
    except missing:
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


#: Beside an environment's interpreter folder: the digest of the recipe it was last completed with.
RECIPE_FILE = ".tracer-recipe"


def recipe_digest(packages: tuple[str, ...]) -> str:
    return hashlib.sha256("\n".join(packages).encode()).hexdigest()[:16]


def recipes(fw: FrameworkInfo) -> dict[str, tuple[str, ...]]:
    """Everything `create` installs, by device: the framework's requirements, then its examples'."""
    return {
        "cpu": fw.cpu_requirements + fw.example_requirements,
        "gpu": fw.gpu_requirements + fw.example_requirements,
    }


def recipe_current(framework: str) -> bool:
    """Whether the environment was last completed with today's recipe (CPU's or GPU's): set-up
    completes one made before a package was added to it."""
    try:
        made = (env_dir(framework) / RECIPE_FILE).read_text().strip()
    except OSError:
        return False
    return made in {recipe_digest(r) for r in recipes(framework_info(framework)).values()}


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


def install_log(framework: str) -> Path:
    """Where `create` writes pip's whole output (beside the environment, so a failed one keeps it)."""
    return cache_root() / "envs" / f"{framework}-install.log"


def create(
    framework: str, gpu: bool | None = None, python: str | None = None, console: Console | None = None
) -> EnvStatus:
    """Makes (or completes) the framework's virtual environment. pip's output (thirty packages of
    progress bars) goes to `install_log`; `console` gets a spinner on a terminal and one line per
    package set, and a failure names the log.

    `python` is the interpreter to make it from; by default the tool's own, or for a framework that
    needs another version (SINGA: 3.6) the first such interpreter found (see `find_python`)."""
    fw = framework_info(framework)
    use_gpu = has_nvidia_gpu() if gpu is None else gpu
    requirements = fw.gpu_requirements if use_gpu else fw.cpu_requirements
    recipe = recipes(fw)["gpu" if use_gpu else "cpu"]
    target = env_dir(framework)
    log = install_log(framework)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    if not env_python(framework).exists():
        base = _base_python(fw, python)
        subprocess.run([base, "-m", "venv", str(target)], check=True)
    pip = [str(env_python(framework)), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar=off"]
    if fw.pip_bootstrap:
        _pip(pip + ["--upgrade"], fw.pip_bootstrap, fw, log, console)
    _pip(pip, requirements, fw, log, console)
    if fw.example_requirements:
        _pip(pip, fw.example_requirements, fw, log, console)
    (target / RECIPE_FILE).write_text(recipe_digest(recipe) + "\n")
    return status(framework)


def _pip(pip: list[str], packages: tuple[str, ...], fw: FrameworkInfo, log: Path, console: Console | None) -> None:
    """One `pip install` into the log; one line when it is done, the log's path when it failed."""
    what = " ".join(packages)
    start = time.monotonic()
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join([*pip, *packages])}\n")
        out.flush()
        spinner = (
            console.status(f"{fw.name}: pip is installing {what} (output in {log})")
            if console is not None and console.is_terminal
            else contextlib.nullcontext()
        )
        with spinner:
            returncode = subprocess.run([*pip, *packages], stdout=out, stderr=subprocess.STDOUT).returncode
    if returncode != 0:
        said = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith("ERROR:")]
        raise UserError(
            f"pip could not install {what} (exit {returncode}"
            + (f": {said[-1].removeprefix('ERROR: ')}" if said else "")
            + f"); pip's whole output is in {log}"
            + (f"; {fw.note}" if fw.note else "")
        )
    if console is not None:
        console.print(f"{fw.name}: installed {what} ({time.monotonic() - start:.0f} s)", markup=False, soft_wrap=True)


def _base_python(fw: FrameworkInfo, explicit: str | None) -> str:
    """The interpreter the environment is made from; one line saying what is missing when none fits."""
    if explicit:
        path = shutil.which(explicit) or explicit
        found = python_version(path)
        if found is None:
            raise UserError(f"--python {explicit}: no such interpreter (or it does not run)")
        if fw.python_version and found != fw.python_version:
            raise UserError(
                f"--python {explicit} is Python {found}; {fw.name} needs Python {fw.python_version} "
                f"(its only PyPI build is for {fw.python_version})"
            )
        return path
    if not fw.python_version:
        return sys.executable
    found_path = find_python(fw.python_version)
    if found_path is None:
        raise UserError(
            f"{fw.name} needs a CPython {fw.python_version} (its only PyPI build is for it) "
            f"and none was found (python{fw.python_version} on PATH, or in pyenv's versions folder "
            f"{_pyenv_root() or '~/.pyenv'}/versions): install one (`pyenv install {fw.python_version}`) and "
            f"run `tracer env create {fw.name} --python /path/to/python{fw.python_version}`, or run "
            f"`tracer profile --python` with an interpreter that has {fw.import_name}"
        )
    return found_path


def python_version(python: str) -> str | None:
    """The "MAJOR.MINOR" of an interpreter, asked by running it (a pyenv shim exists but may refuse to run)."""
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def find_python(version: str) -> str | None:
    """A working CPython `version`: `pythonX.Y` on PATH, else the newest in pyenv's versions folder."""
    candidates = [p for p in (shutil.which(f"python{version}"),) if p]
    root = _pyenv_root()
    if root is not None:
        found = (root / "versions").glob(f"{version}.*/bin/python{version}")
        candidates += [str(p) for p in sorted(found, key=lambda p: _version_key(p.parents[1].name), reverse=True)]
    for candidate in candidates:
        if python_version(candidate) == version:
            return candidate
    return None


def _pyenv_root() -> Path | None:
    """$PYENV_ROOT, else what `pyenv root` says, else ~/.pyenv when it exists."""
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    pyenv = shutil.which("pyenv")
    if pyenv is not None:
        try:
            out = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30)
            if out.returncode == 0 and out.stdout.strip():
                return Path(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    home = Path.home() / ".pyenv"
    return home if home.is_dir() else None


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1 for part in name.split("."))
