"""Shared test helpers: real tiny runs made with the real `tracer` CLI in a child process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real_fixtures import REAL_FIXTURES
from tracer.core.frameworks import FRAMEWORKS
from tracer.core.runfolder import RunFolder, list_runs
from tracer.measure.environments import status

JAX_CACHE_ENV = {
    # The suite's JAX runs compile the same few steps again and again (XLA on a CPU: 10-40 s a model). One
    # persistent compilation cache per test session, cold at its start, turns every repeat into a read.
    # The runs record it (knob jax_compilation_cache_dir); nothing here times a compile.
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
}


def pytest_configure(config: pytest.Config) -> None:
    """Every child of the session (tracer, workers, probes) inherits the session's JAX compilation cache.
    And none inherits the terminal size GNU readline (imported by pytest) wrote into the C-level environment
    of this process, unseen by os.environ: xdist's test processes started with COLUMNS=80 and LINES=24, so
    the CLI's piped output, 200 columns wide, was folded at 80."""
    for name in ("COLUMNS", "LINES"):
        if name not in os.environ:
            os.unsetenv(name)
    if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="dl-tracer-tests-jax-cache-")
        config.add_cleanup(lambda: shutil.rmtree(os.environ.pop("JAX_COMPILATION_CACHE_DIR"), ignore_errors=True))
    for name, value in JAX_CACHE_ENV.items():
        os.environ.setdefault(name, value)


SHARED_PROCESS = {
    # README's test command runs the suite in two processes (pytest-xdist -n 2). They share out groups of
    # tests: by default a module (its module fixtures' runs made once); these share one: prefix -> group.
    # -- a conftest's session fixtures (real runs) made once:
    "tests/viewer/": "viewer runs",
    "tests/analyzers/report/": "report runs",
    "tests/analyzers/diagnosis/": "diagnosis runs",
    "tests/analyzers/comparison/test_pairs.py": "data_all_runs",
    "tests/tracer/cli/test_data_all.py": "data_all_runs",
    # -- one at a time on the machine: two `nsys profile` at once fail a report fixture (nsys stats and
    #    export kept apart from them too), and two Ray clusters would both take Ray's fixed agent ports.
    "tests/tracer/measure/tracing/test_nsys.py": "nsys",
    "tests/tracer/measure/tracing/test_nsys_versions.py": "nsys",
    "tests/tracer/measure/tracing/test_trace_window.py": "nsys",
    "tests/analyzers/ingest/test_nsys_arrow.py": "nsys",
    "tests/analyzers/ingest/test_ingest_errors.py": "nsys",
    "tests/analyzers/summaries/test_against_nsys.py": "nsys",
    "tests/tracer/campaign/test_ray.py": "ray cluster",
    "tests/tracer/campaign/test_ray_boards.py": "ray cluster",
}


def process_group(nodeid: str) -> str:
    """The group a test runs in, under pytest-xdist: SHARED_PROCESS's, else its module's."""
    module = nodeid.split("::")[0]
    return next((group for prefix, group in SHARED_PROCESS.items() if module.startswith(prefix)), module)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scheduling by scope, with process_group as the scope (its loadgroup reads a node id that
    pytest 9 no longer lets it change)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return process_group(nodeid)

    return GroupScheduling(config, log)


TINY = ["--epochs", "2", "--limit", "16", "--image-size", "64", "--dataset", "small"]


CHILD_GRACE_S = 15.0
"""How long a test's children get to finish after it (a busy machine reaps slowly) before they count as left behind."""


@pytest.fixture(autouse=True)
def no_child_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test that leaves a process of its own behind: every process the test started (at any depth)
    must have exited once it ends; one still alive after CHILD_GRACE_S is named, killed, and fails the
    test. Processes that fixtures of a wider scope started before the test are theirs, not its."""
    import psutil

    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield
    left = [p for p in me.children(recursive=True) if p.pid not in before]
    _gone, alive = psutil.wait_procs(left, timeout=CHILD_GRACE_S) if left else ([], [])
    alive = [p for p in alive if _running(p)]
    if not alive:
        return
    named = ", ".join(_describe(p) for p in alive)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=CHILD_GRACE_S)
    pytest.fail(f"{request.node.nodeid} left {len(alive)} process(es) behind: {named}", pytrace=False)


def _running(p: Any) -> bool:
    import psutil

    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _describe(p: Any) -> str:
    import psutil

    try:
        return f"{p.pid} ({' '.join(p.cmdline())[:120] or p.name()})"
    except psutil.Error:
        return str(p.pid)


def ctrl_c_reaches_python() -> None:
    """`preexec_fn` of a child a test will signal as a terminal would: a test run in the background (a
    shell's `&`) ignores SIGINT and SIGQUIT, one under `nohup` SIGHUP, and its children inherit that; the
    tracer keeps a signal ignored at its start ignored (as a background job's should be), so the child would
    train on. The child starts as a foreground job of a terminal does: all four at their defaults."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's words: 64k, 2m) mounted at `where` (made), unmounted whatever the test did:
    a full disk made for real. A skip where it cannot be mounted (not root, no mount(8), no tmpfs)."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def spec_of(record: dict[str, Any]) -> dict[str, Any]:
    """A run.json's spec as a dict to read or edit: the built-in workload's (`workload.spec`), or the first
    layout's `spec` (fixtures written before format_version 2)."""
    return record["workload"]["spec"] if "workload" in record else record["spec"]


def edit_spec(record: dict[str, Any], **changes: object) -> None:
    """Changes a run.json's spec in place; a field the measurement holds too (framework, device) changes there
    as well, so the edited run reads as one run."""
    spec_of(record).update(changes)
    measured = record.get("measurement", {})
    measured.update({k: v for k, v in changes.items() if k in measured})


def run_tracer(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`tracer ARGS` as a user runs it (a real process, real exit code, real output), piped and with no
    COLUMNS: the environment is passed explicitly, as the test process's C-level environment held a
    COLUMNS=80 that no user set (curses' terminal set-up exports it), and piped output keeps within COLUMNS."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [sys.executable, "-m", "tracer", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def framework_required(name: str) -> bool:
    """Whether TRACER_REQUIRE_FRAMEWORKS names the framework (`all`: every one in tracer/core/frameworks.py)."""
    required = os.environ.get("TRACER_REQUIRE_FRAMEWORKS", "").split(",")
    return name in required or ("all" in required and name in FRAMEWORKS)


def require_framework(name: str) -> None:
    """Skips where the framework is absent, except where CI says it must be there
    (TRACER_REQUIRE_FRAMEWORKS=pytorch,tensorflow,..., or `all`: every declared framework): then its absence
    fails the test."""
    if status(name).installed:
        return
    if framework_required(name):
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
def real_fixtures() -> Path:
    """The real traces and run folders under tests/data/fixtures (their sources in SOURCES.md there)."""
    return REAL_FIXTURES


def photo_folder(root: Path, count: int, width: int, height: int) -> Path:
    """`count` noisy photo-sized JPEGs in two classes: costly to decode and to shrink, as photos are."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (height // 8, width // 8, 3), dtype=np.uint8)
    big = np.asarray(Image.fromarray(base).resize((width, height), Image.Resampling.BICUBIC))
    for i in range(count):
        folder = root / ("fire" if i % 2 else "smoke")
        folder.mkdir(parents=True, exist_ok=True)
        noise = rng.integers(0, 24, big.shape, dtype=np.uint8)
        Image.fromarray(big + noise).save(folder / f"{i:03d}.jpg", quality=90)
    return root


# A starved model: large photos, a tiny input, no loader workers, so --data files waits for its batches.
DATA_ALL_ARGS = ("--model", "mobilenet_v2", "--image-size", "32", "--batch", "8", "--epochs", "2")
DATA_ALL_ARGS += ("--threads", "1", "--workers", "0")


@pytest.fixture(scope="session")
def data_all_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[RunFolder], str]:
    """`tracer profile --data all` of PyTorch on 16 photos: the three run folders (files, memory,
    synthetic, in that order) and what the command printed."""
    require_framework("pytorch")
    root = tmp_path_factory.mktemp("data-all")
    photos = photo_folder(root / "photos", 16, 2000, 1500)
    out = root / "runs"
    result = run_tracer("profile", "--framework", "pytorch", "--dataset", str(photos), *DATA_ALL_ARGS, "--data", "all",
                        "--out", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return list_runs(out), result.stdout
