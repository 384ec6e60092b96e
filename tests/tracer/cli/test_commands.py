"""The subcommand -> module map that lets a command line import only its own command's module."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

from tracer.cli import COMMAND_MODULES, COMMANDS, build_parser


def test_every_subcommand_is_mapped_to_the_module_that_registers_it() -> None:
    registered = {}
    for name in COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"tracer.cli.{name}").add_parser(sub)
        registered |= {command: name for command in sub.choices}
    assert COMMANDS == registered
    assert set(COMMANDS.values()) == set(COMMAND_MODULES)


def test_a_named_command_parses_as_with_every_command() -> None:
    argv = ["analyze", "some-run", "--format", "json", "--top", "5"]
    assert vars(build_parser("analyze").parse_args(argv)) == vars(build_parser().parse_args(argv))


def test_a_named_command_imports_no_other_command_module() -> None:
    code = (
        "import sys\nfrom tracer.cli import build_parser\nbuild_parser('analyze')\n"
        "print(sorted(m for m in sys.modules if m.startswith('tracer.cli.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    loaded = {m.rsplit(".", 1)[1] for m in eval(out)}  # noqa: S307 - our own print of a list of names
    assert "analyze" in loaded and not loaded & (set(COMMAND_MODULES) - {"analyze"})


def test_the_independence_contract_names_every_command_module() -> None:
    """pyproject.toml's "The CLI's commands are apart" contract holds for every command: a new command module
    not listed there could import another's printers unchecked."""
    pyproject = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    (contract,) = [c for c in pyproject["tool"]["importlinter"]["contracts"] if c["type"] == "independence"]
    assert sorted(contract["modules"]) == sorted(f"tracer.cli.{m}" for m in COMMAND_MODULES)
