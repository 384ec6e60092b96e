"""One declaration per framework: every consumer (CLI, worker config, palette, diagnosis knobs, docs) reads it."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracer.core import frameworks
from tracer.core.frameworks import FRAMEWORKS, Tuning

ROOT = Path(__file__).resolve().parents[3]
FAKE = """    FrameworkInfo(
        "fakeflow",
        "FakeFlow",
        "#123456",
        "fakeflow",
        ("fakeflow",),
        ("fakeflow==1.0",),
        ("fakeflow-gpu==1.0",),
        "fakeflow_worker",
        {
            T.WORKERS: Setting("fakeflow.Loader(decoders=...)"),
            T.PREFETCH: None,
            T.THREADS: Setting("fakeflow.threads(...)"),
            T.ALLOCATOR: None,
            T.LAUNCH: gpu("fakeflow.fuse()"),
            T.SYNC: None,
            T.STARTUP: None,
            T.PRECISION: None,
            T.LAYOUT: None,
        },
        ("fakeflow",),
    ),
"""
PROBE = """
import sys
sys.path.insert(0, "docs")
import hooks
from analyzers.render import palette
from analyzers.diagnosis.knobs import knob
from tracer.core.frameworks import Tuning
from tracer.core.options import validate_spec, worker_config
spec = validate_spec({"framework": "fakeflow", "model": "alexnet", "dataset": "small", "device": "gpu"})
print("colour", palette.colour("fakeflow"))
print("label", palette.label("fakeflow"))
print("order", palette.order(["fakeflow", "pytorch"]))
print("knob", knob(spec, Tuning.LAUNCH, "fewer launches"))
print("worker", worker_config(spec, dataset_dir="/d")["worker_module"])
print("docs", [line for line in hooks.frameworks_page().splitlines() if "fakeflow" in line])
"""


def test_a_framework_added_in_one_place_reaches_cli_palette_knobs_worker_and_docs(tmp_path: Path) -> None:
    """Adds a framework to tracer/core/frameworks.py in a copy of the packages, and edits nothing else."""
    for package in ("tracer", "analyzers"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "hooks.py", tmp_path / "docs" / "hooks.py")
    decl = tmp_path / "tracer" / "core" / "frameworks.py"
    text = decl.read_text()
    anchor = '    FrameworkInfo(\n        "jax",'
    assert anchor in text
    decl.write_text(text.replace(anchor, FAKE + anchor, 1))
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"}  # the copy first; analyzers from here
    help_text = subprocess.run(
        [sys.executable, "-m", "tracer", "profile", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert help_text.returncode == 0, help_text.stderr
    choices = help_text.stdout.split("  --framework FRAMEWORK", 1)[1].split("  --model", 1)[0]
    order = list(FRAMEWORKS)
    order.insert(order.index("jax"), "fakeflow")  # where the copy declares it
    assert f"one of: {', '.join(order)}" in " ".join(choices.split())
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    lines = dict(line.split(" ", 1) for line in probe.stdout.splitlines())
    assert lines["colour"] == "#123456" and lines["label"] == "FakeFlow"
    assert lines["order"] == "['pytorch', 'fakeflow']"  # declaration order
    assert lines["knob"] == "fewer launches: fakeflow.fuse()"
    assert lines["worker"] == "fakeflow_worker"
    assert "#123456" in lines["docs"] and "fakeflow==1.0" in lines["docs"] and "fakeflow.fuse()" in lines["docs"]


def test_a_declaration_missing_a_tuning_is_refused() -> None:
    """No consumer falls back when a framework forgets a setting: the declaration itself is refused."""
    jax = FRAMEWORKS["jax"]
    partial = dict(jax.settings)
    del partial[Tuning.SYNC]
    forgot = dataclasses.replace(jax, name="forgetful", colour="#010101", settings=partial)
    with pytest.raises(ValueError, match="forgetful.*sync"):
        frameworks._check((*FRAMEWORKS.values(), forgot))
    same_colour = dataclasses.replace(jax, name="lookalike")
    with pytest.raises(ValueError, match="lookalike"):
        frameworks._check((*FRAMEWORKS.values(), same_colour))


def test_an_unknown_framework_is_one_user_error() -> None:
    from tracer.core.errors import UserError

    with pytest.raises(UserError, match="unknown framework 'nope': choose one of pytorch"):
        frameworks.framework_info("nope")


def test_the_worker_is_told_its_module() -> None:
    from tracer.core.options import validate_spec, worker_config

    spec = validate_spec({"framework": "mxnet", "model": "alexnet", "dataset": "small"})
    assert worker_config(spec, dataset_dir="/d")["worker_module"] == "tracer.worker.frameworks.mxnet"
