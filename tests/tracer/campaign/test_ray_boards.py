"""Campaigns over several boards: a local three-node Ray cluster whose nodes say which board they are
(`board:<type>`), a plan that targets board types, and runs that never share a board."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_framework
from tests.tracer.campaign.conftest import record, run_campaign, write_plan
from tests.tracer.campaign.raycluster import LocalCluster, running_cluster

pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'dl-tracer[ray]'")
pytestmark = pytest.mark.slow

# Head: an Orin; two workers: two Nanos (three "boards" on this machine, each its own Ray node).
BOARDS: list[dict[str, float]] = [{"board:orin": 1}, {"board:nano": 1}, {"board:nano": 1}]
PLAN = (
    'name = "boards"\nframeworks = ["pytorch"]\nmodels = ["alexnet"]\ndatasets = ["small"]\n'
    'batches = [1, 2]\nepochs = 1\n[knobs]\nlimit = 4\nimage_size = 64\nboard = ["nano", "orin"]\n'
    '[[exclude]]\nbatch = 2\nboard = "orin"\n'
)


@pytest.fixture(scope="module")
def boards() -> Iterator[LocalCluster]:
    with running_cluster(2, BOARDS) as c:
        yield c


def test_runs_land_on_their_board_type_and_never_share_a_board(tmp_path: Path, boards: LocalCluster) -> None:
    require_framework("pytorch")
    out = tmp_path / "runs"
    result = run_campaign(str(write_plan(tmp_path, PLAN)), "--out", str(out), "--ray", boards.address, "--no-report")
    assert result.returncode == 0, result.stderr[-3000:]
    cells = record(out, "boards")["cells"]
    assert len(cells) == 3
    node: dict[str, str] = {}
    window: dict[str, tuple[int, int]] = {}
    for cell_id, entry in cells.items():
        assert entry["state"] == "ok", entry
        assert "(ray node " in entry["host"]
        node[cell_id] = entry["host"].split("(ray node ")[1].rstrip(")")
        run = json.loads((out / entry["run_id"] / "run.json").read_text())
        window[cell_id] = (run["wall_start_ns"], run["wall_end_ns"])
    orin = [c for c in cells if "orin" in c]
    nano = [c for c in cells if "nano" in c]
    assert len(orin) == 1 and len(nano) == 2
    assert node[orin[0]] not in {node[c] for c in nano}  # the Orin run ran on the Orin, not on a Nano
    ids = sorted(cells)
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            overlap = window[a][0] < window[b][1] and window[b][0] < window[a][1]
            if overlap:
                assert node[a] != node[b], f"{a} and {b} ran at once on one board"


def test_a_board_type_no_node_offers_is_refused_before_anything_runs(tmp_path: Path, boards: LocalCluster) -> None:
    plan = write_plan(tmp_path, PLAN.replace('board = ["nano", "orin"]', 'board = "tx1"').split("[[exclude]]")[0])
    result = run_campaign(str(plan), "--out", str(tmp_path / "runs"), "--ray", boards.address, "--no-report")
    assert result.returncode == 2
    assert "board type(s) tx1" in result.stderr and "nano, orin" in result.stderr
    assert "Traceback" not in result.stderr
