"""Every `--format json` names its schema and version (issue 55 item 4), and its top-level fields are the
ones `tracer/cli/json_output.py` declares, from which docs/reference/json.md is generated."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.cli import build_parser
from tracer.cli.json_output import OUTPUT_BY_COMMAND, OUTPUTS, SCHEMA_KEY, SCHEMA_PREFIX, SCHEMA_VERSION, VERSION_KEY

H100 = "gpu-h100"
UNTRACED, TRACED = "85cf", "a9b3"  # PyTorch AlexNet b100: untraced, and traced with the PyTorch profiler
VARYING = {"analyze"}  # outputs whose fields depend on the run (ranks, a trace window): a subset is declared


def _commands(h100: Path) -> dict[str, list[str]]:
    runs = ["--runs", str(h100)]
    return {
        "runs": ["runs", *runs],
        "show": ["show", TRACED, *runs],
        "diagnose": ["diagnose", TRACED, *runs],
        "analyze": ["analyze", TRACED, *runs],
        "diff": ["diff", UNTRACED, TRACED, *runs],
        "compare": ["compare", UNTRACED, TRACED, *runs],
        "gate": ["gate", "--baseline", UNTRACED, "--candidate", TRACED, *runs],
    }


def test_every_json_output_is_declared() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    with_json = {
        name
        for name, p in sub.choices.items()
        for a in p._actions
        if "--format" in a.option_strings and "json" in (a.choices or ())
    }
    assert with_json == set(OUTPUT_BY_COMMAND)
    for output in OUTPUTS:
        for path in output.records:
            module, _, name = path.rpartition(".")
            assert dataclasses.is_dataclass(getattr(importlib.import_module(module), name)), path


@pytest.mark.parametrize("command", [o.command for o in OUTPUTS])
def test_a_json_output_names_its_schema_and_holds_its_declared_fields(command: str, real_fixtures: Path) -> None:
    result = run_tracer(*_commands(real_fixtures / H100)[command], "--format", "json")
    assert result.returncode in (0, 1), result.stderr  # gate: 1 where the candidate regressed
    data = json.loads(result.stdout)
    assert list(data)[:2] == [SCHEMA_KEY, VERSION_KEY]
    assert data[SCHEMA_KEY] == SCHEMA_PREFIX + command and data[VERSION_KEY] == SCHEMA_VERSION
    fields = set(data) - {SCHEMA_KEY, VERSION_KEY}
    declared = set(OUTPUT_BY_COMMAND[command].fields)
    assert fields <= declared if command in VARYING else fields == declared, fields ^ declared
