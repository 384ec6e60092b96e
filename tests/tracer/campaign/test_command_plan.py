"""A campaign plan of the user's own command: a template with axes, expanded into cells that run
`tracer profile -- COMMAND` where the plan file is, and refused in one line where it is wrong."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.campaign.plan import parse_plan
from tracer.core.errors import UserError
from tracer.core.runfolder import list_runs

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PLAN = f"""\
name = "mine"
command = "{sys.executable} marker_loop.py --items {{items}} --epochs 2"
[vary]
items = [512, 1024]
[knobs]
timeout = 300
"""


def test_a_command_template_expands_into_one_cell_per_value(tmp_path: Path) -> None:
    plan = parse_plan(PLAN, tmp_path / "plan.toml")
    assert [c.cell_id for c in plan.cells] == ["cmd-items512", "cmd-items1024"]
    cell = plan.cells[1]
    assert cell.command[-4:] == ("--items", "1024", "--epochs", "2") and cell.cwd == str(tmp_path.resolve())
    assert cell.profile_args() == ["--timeout", "300", "--", *cell.command]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("models = ['alexnet']\n", "'models' does not go with a command"),
        ("[knobs.batch]\n", "knobs.batch: does not measure a command"),
    ],
)
def test_a_wrong_command_plan_is_one_line(tmp_path: Path, extra: str, said: str) -> None:
    text = PLAN.replace("[knobs]\ntimeout = 300\n", "[knobs]\nbatch = 3\n") if "knobs" in said else extra + PLAN
    with pytest.raises(UserError, match=said):
        parse_plan(text, tmp_path / "plan.toml")
    with pytest.raises(UserError, match="has no value in"):
        parse_plan(
            PLAN.replace("{{items}}", "{{items}} {{lr}}").replace("{items}", "{items} {lr}"), tmp_path / "p.toml"
        )


def test_a_command_campaign_runs_its_cells(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "marker_loop.py", tmp_path)
    (tmp_path / "plan.toml").write_text(PLAN)
    result = run_tracer("campaign", str(tmp_path / "plan.toml"), "--out", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr[-3000:]
    runs = list_runs(tmp_path / "runs")
    assert len(runs) == 2
    argvs = sorted(r.read_record().command.argv[-3] for r in runs)  # type: ignore[union-attr]
    assert argvs == ["1024", "512"]
