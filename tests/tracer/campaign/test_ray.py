"""The Ray runner on a real two-node cluster on this machine, one `tracer_node` per node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_framework
from tests.tracer.campaign.conftest import TINY_PYTORCH, assert_one_ok_run_per_cell, record, run_campaign, write_plan
from tests.tracer.campaign.raycluster import LocalCluster, running_cluster

pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'dl-tracer[ray]'")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """Head plus one worker node."""
    with running_cluster(1) as c:
        yield c


def test_plan_runs_on_a_ray_cluster_and_every_run_folder_comes_back(tmp_path: Path, cluster: LocalCluster) -> None:
    require_framework("pytorch")
    out = tmp_path / "runs"
    plan = write_plan(tmp_path, TINY_PYTORCH)
    result = run_campaign(str(plan), "--out", str(out), "--ray", cluster.address, "--no-report")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 node(s) offer tracer_node" in result.stderr
    assert_one_ok_run_per_cell(out, "tiny", 4)
    for folder in (out / e["run_id"] for e in record(out, "tiny")["cells"].values()):
        assert (folder / "run.json").exists() and (folder / "samples").is_dir() and (folder / "events.jsonl").exists()


def test_shared_dir_carries_the_run_folders(tmp_path: Path, cluster: LocalCluster) -> None:
    require_framework("pytorch")
    out = tmp_path / "runs"
    shared = tmp_path / "shared"
    plan = write_plan(tmp_path, TINY_PYTORCH.replace("batches = [1, 2]", "batches = [1]"))
    args = ["--out", str(out), "--ray", cluster.address, "--shared-dir", str(shared), "--no-report"]
    result = run_campaign(str(plan), *args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_one_ok_run_per_cell(out, "tiny", 2)
    assert not any(shared.glob("tiny/*/*"))  # moved on to runs/, nothing left behind
