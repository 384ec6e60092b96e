"""One declaration of every run option: the CLI, plans, validation and the worker all derive from it."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracer.core import options
from tracer.core.errors import UserError
from tracer.worker.workload import WorkloadConfig

ROOT = Path(__file__).resolve().parents[3]
NEW_FIELD = """    trial_knob: Annotated[int | None, Field(ge=1, le=9), Opt("a knob added by a test")] = None
"""
PROBE = """
import sys
from pathlib import Path
from tracer.campaign.plan import parse_plan
from tracer.core.options import validate_spec, worker_config
text = 'frameworks = ["pytorch"]\\nmodels = ["alexnet"]\\ndatasets = ["small"]\\n'
plan = parse_plan(text + '[knobs]\\ntrial_knob = 4\\n', Path("p.toml"))
print("plan-args", plan.cells[0].profile_args())
spec = validate_spec({"framework": "pytorch", "model": "alexnet", "dataset": "small", "trial_knob": 4})
print("worker", worker_config(spec, dataset_dir="/d"))
try:
    validate_spec({"framework": "pytorch", "model": "alexnet", "dataset": "small", "trial_knob": 12})
except Exception as e:
    print("refused", e)
"""


def test_one_added_declaration_reaches_cli_plan_and_worker(tmp_path: Path) -> None:
    """Adds a field to RunSpec in a copy of the package, and edits nothing else."""
    shutil.copytree(ROOT / "tracer", tmp_path / "tracer", ignore=shutil.ignore_patterns("__pycache__"))
    decl = tmp_path / "tracer" / "core" / "options.py"
    text = decl.read_text()
    anchor = "    inject_fault: Annotated["
    assert anchor in text
    decl.write_text(text.replace(anchor, NEW_FIELD + anchor, 1))
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"}  # the copy first; analyzers from here
    help_text = subprocess.run(
        [sys.executable, "-m", "tracer", "profile", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert help_text.returncode == 0, help_text.stderr
    assert "--trial-knob" in help_text.stdout and "a knob added by a test" in help_text.stdout
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    lines = dict(line.split(" ", 1) for line in probe.stdout.splitlines())
    assert "'--trial-knob', '4'" in lines["plan-args"]
    assert "'trial_knob': 4" in lines["worker"]
    assert "--trial-knob must be at most 9" in lines["refused"]


def test_the_worker_config_matches_the_declaration() -> None:
    """WorkloadConfig (the worker side, Python 3.6) holds every option sent to the worker, no more."""
    spec = options.validate_spec({"framework": "pytorch", "model": "alexnet", "dataset": "small"})
    sent = set(options.worker_config(spec, dataset_dir="/d"))
    assert sent == {f.name for f in dataclasses.fields(WorkloadConfig)}


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"sample_hz": float("nan")}, "--sample-hz must be a finite number"),
        ({"timeout_s": float("inf")}, "--timeout must be a finite number"),
        ({"workers": -1}, "--workers must be at least 0"),
        ({"momentum": 1.5}, "--momentum must be at most 1"),
        ({"device": "tpu"}, "unknown device 'tpu'"),
        ({"trace": "magic"}, "unknown trace backend 'magic'"),
    ],
)
def test_values_are_refused_in_the_words_of_the_flag(values: dict[str, object], words: str) -> None:
    with pytest.raises(UserError, match=words):
        options.validate_spec({"framework": "pytorch", "model": "alexnet", "dataset": "small", **values})


def test_an_option_for_one_framework_is_refused_for_the_others() -> None:
    spec = options.validate_spec(
        {"framework": "pytorch", "model": "alexnet", "dataset": "small", "gpu_thread_mode": "gpu_private"}
    )
    with pytest.raises(UserError, match="--gpu-thread-mode applies to tensorflow only"):
        options.check_frameworks(spec)


def test_each_literal_of_the_spec_is_its_declared_constant() -> None:
    """A choice written in RunSpec's type (for mypy and pydantic) equals the constant the rest of the tool
    reads: adding a choice to one and not the other fails here."""
    from typing import Literal, get_args, get_type_hints

    from tracer.core import schema

    def literal(field: str) -> tuple[object, ...]:
        found: list[object] = []
        stack = [get_type_hints(options.RunSpec, include_extras=True)[field]]
        while stack:
            hint = stack.pop()
            if getattr(hint, "__origin__", None) is Literal:
                found += get_args(hint)
            else:
                stack += get_args(hint)
        return tuple(found)

    declared = {
        "model": options.MODELS,
        "device": options.DEVICES,
        "trace": options.TRACE_BACKENDS,
        "gpu_thread_mode": options.GPU_THREAD_MODES,
        "on_divergence": schema.ON_DIVERGENCE,
        "data": schema.DATA_MODES,
        "pipeline": schema.PIPELINES,
        "workers": (schema.AUTOTUNE,),
    }
    for field, constant in declared.items():
        assert literal(field) == tuple(constant), field
    spelled = {f for f, hint in get_type_hints(options.RunSpec, include_extras=True).items() if "Literal" in str(hint)}
    assert spelled == set(declared)  # every field with a literal is checked here
