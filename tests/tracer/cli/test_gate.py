"""`tracer gate` on real PyTorch profiler traces (issue 55): a small training under `torch.profiler`, fed by a
DataLoader whose items cost a real JPEG decode, with 0 loader workers against 4, imported with `tracer
import`. The candidate with 0 workers waits for data: the gate exits 1 naming data wait first; a run
against itself and repeats against repeats exit 0; the JUnit XML is read by a JUnit parser."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import junitparser
import pytest

from tests.conftest import require_framework, run_tracer
from tracer.cli.gate import FAILED_EXIT
from tracer.cli.json_output import SCHEMA_VERSION
from tracer.core.runfolder import list_runs
from tracer.measure.environments import status

SCRIPT = Path(__file__).with_name("profiled_loader.py")
REPEATS = 3  # of the 4-worker run on each side of the within-noise gate


def _profile_and_import(python: str, workers: int, trace: Path, runs: Path) -> tuple[str, dict[str, float]]:
    """Runs the script (its own truth on its last line), imports its trace; (the run id, that truth)."""
    done = subprocess.run(
        [python, str(SCRIPT), str(trace), "--workers", str(workers)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    truth = json.loads(done.stdout.strip().splitlines()[-1])
    before = {f.run_id for f in list_runs(runs)} if runs.exists() else set()
    imported = run_tracer("import", str(trace), "--framework", "pytorch", "--device", "cpu", "--out", str(runs))
    assert imported.returncode == 0, imported.stderr
    (new,) = [f.run_id for f in list_runs(runs) if f.run_id not in before]
    return new, truth


def _import_into(runs: Path, python: str, workers: int, trace: Path) -> tuple[str, dict[str, float]]:
    """Like _profile_and_import, into a folder of its own side: (the run's folder, the script's truth)."""
    run_id, truth = _profile_and_import(python, workers, trace, runs)
    return str(runs / run_id), truth


@pytest.fixture(scope="module")
def loader_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One 0-worker run (in runs/) and REPEATS * 2 4-worker runs, interleaved between two folders of runs
    (base/ and cand/, so the machine's load falls on both sides alike) and the first of them in runs/ too;
    each a real trace imported."""
    require_framework("pytorch")
    python = status("pytorch").python
    root = tmp_path_factory.mktemp("gate")
    runs = root / "runs"
    zero, zero_truth = _profile_and_import(python, 0, root / "workers0.json", runs)
    first, first_truth = _profile_and_import(python, 4, root / "workers4.json", runs)
    sides = [_import_into(root / ("base", "cand")[i % 2], python, 4, root / f"workers4-{i}.json")
             for i in range(2 * REPEATS)]  # fmt: skip
    return {"runs": runs, "zero": zero, "zero_truth": zero_truth, "four": [first, *(r for r, _ in sides)],
            "four_truth": [first_truth, *(t for _, t in sides)], "root": root}  # fmt: skip


def test_a_candidate_whose_data_wait_regressed_fails_naming_data_wait_first(loader_runs: dict[str, object]) -> None:
    runs, root = loader_runs["runs"], loader_runs["root"]
    assert isinstance(runs, Path) and isinstance(root, Path)
    zero, four = loader_runs["zero"], loader_runs["four"]
    zero_truth, four_truth = loader_runs["zero_truth"], loader_runs["four_truth"]
    assert isinstance(zero, str) and isinstance(four, list) and isinstance(zero_truth, dict)
    assert isinstance(four_truth, list)
    # The script's own clock: without workers the step waits for its batch, with four it hardly does.
    assert zero_truth["wait_s"] / zero_truth["step_s"] > 0.1 > four_truth[0]["wait_s"] / four_truth[0]["step_s"]
    summary, junit = root / "summary.md", root / "junit.xml"
    result = run_tracer("gate", "--baseline", four[0], "--candidate", zero, "--runs", str(runs),
                        "--summary", str(summary), "--junit", str(junit))  # fmt: skip
    assert result.returncode == FAILED_EXIT, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("gate failed") and first.split(": ", 2)[2].startswith("data wait share"), first
    markdown = summary.read_text()
    verdict_line = next(line for line in markdown.splitlines() if line.startswith("**data wait"))
    assert "regressed" in verdict_line
    assert markdown.index("**data wait") < markdown.index("| data wait")  # named before the table
    assert "waiting for data" in markdown.split("**Why**")[1]  # diff's reason: the data wait part of the gap
    # The gate's data wait against the script's own: the trace's DataLoader ranges are the script's next().
    data = json.loads(run_tracer("gate", "--baseline", four[0], "--candidate", zero, "--runs", str(runs),
                                 "--format", "json").stdout)  # fmt: skip
    assert data["schema"] == "dl-tracer.gate" and data["schema_version"] == SCHEMA_VERSION
    assert data["passed"] is False and data["regressed"][0] == "data_wait"
    wait = next(m for m in data["metrics"] if m["metric"] == "data_wait")
    own = 100 * zero_truth["wait_s"] / zero_truth["step_s"]
    assert wait["candidate"]["value"] == pytest.approx(own, abs=10), (wait, zero_truth)
    # JUnit: one testcase per metric, the regression a <failure>, read by a JUnit reader.
    tree = ET.parse(junit)
    suite = tree.getroot().find("testsuite")
    assert suite is not None
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["data_wait"].find("failure") is not None
    assert int(suite.get("failures", "0")) == len([c for c in cases.values() if c.find("failure") is not None]) >= 1
    assert int(suite.get("tests", "0")) == len(cases)
    parsed = junitparser.JUnitXml.fromfile(str(junit))
    results = {case.name: case.result for s in parsed for case in s}
    assert any(isinstance(r, junitparser.Failure) for r in results["data_wait"])


def test_a_run_against_itself_passes(loader_runs: dict[str, object]) -> None:
    runs, four = loader_runs["runs"], loader_runs["four"]
    assert isinstance(four, list)
    result = run_tracer("gate", "--baseline", four[0], "--candidate", four[0], "--runs", str(runs))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("gate passed")


def test_repeats_against_repeats_pass_within_noise(loader_runs: dict[str, object]) -> None:
    """Each side a folder of repeats (a folder of runs stands for every run in it)."""
    root = loader_runs["root"]
    assert isinstance(root, Path)
    result = run_tracer("gate", "--baseline", str(root / "base"), "--candidate", str(root / "cand"), "--format", "json")
    data = json.loads(result.stdout)
    assert result.returncode == 0 and data["passed"], result.stdout
    assert len(data["baseline"]) == len(data["candidate"]) == REPEATS
    judged = {m["metric"]: m for m in data["metrics"]}
    assert judged["data_wait"]["baseline"]["range_over"] == "repeats"
    assert judged["step_time"]["state"] in ("within threshold", "within noise", "not judged"), judged["step_time"]


def test_bad_input_is_one_line_and_exit_2(loader_runs: dict[str, object], tmp_path: Path) -> None:
    runs, four = loader_runs["runs"], loader_runs["four"]
    assert isinstance(four, list)
    for args, said in (
        (["--threshold", "stepp_time=5"], "no such metric"),
        (["--threshold", "step_time=-1"], "METRIC=PCT"),
        (["--candidate", "no-such-run"], "no-such-run"),
        (["--junit", str(tmp_path / "missing" / "j.xml")], "j.xml"),
        (["--candidate", str(tmp_path)], "no run in it"),
    ):
        given = args if "--candidate" in args else ["--candidate", four[1], *args]
        result = run_tracer("gate", "--baseline", four[0], *given, "--runs", str(runs))
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert said in result.stderr and "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_threshold_given_replaces_the_default(loader_runs: dict[str, object]) -> None:
    """At 100 points no data wait share can fail the gate."""
    runs, zero, four = loader_runs["runs"], loader_runs["zero"], loader_runs["four"]
    assert isinstance(four, list) and isinstance(zero, str)
    result = run_tracer("gate", "--baseline", four[0], "--candidate", zero, "--runs", str(runs),
                        "--threshold", "data_wait=100", "--format", "json")  # fmt: skip
    data = json.loads(result.stdout)
    assert "data_wait" not in data["regressed"]
    wait = next(m for m in data["metrics"] if m["metric"] == "data_wait")
    assert wait["threshold"] == 100 and wait["state"] == "within threshold"


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pytorch_dataloader.py"
LOADER = ("--items", "64", "--batch", "16", "--epochs", "2")


def test_command_runs_are_gated_alike(tmp_path: Path) -> None:
    """`tracer profile -- python examples/pytorch_dataloader.py`, its loader plain and slowed by 20 ms an item:
    two runs of a user's command, their steps seen by the probe; the slowed one fails the gate on data wait."""
    require_framework("pytorch")
    python = status("pytorch").python
    folders = []
    for name, extra in (("plain", ()), ("slowed", ("--slow-ms", "20"))):
        made = run_tracer("profile", "--out", str(tmp_path / name), "--", python, str(EXAMPLE), *LOADER, *extra)
        assert made.returncode == 0, made.stderr[-3000:]
        (folder,) = list_runs(tmp_path / name)
        folders.append(str(folder.path))
    result = run_tracer("gate", "--baseline", folders[0], "--candidate", folders[1], "--format", "json")
    data = json.loads(result.stdout)
    assert any("waiting for data" in s for s in data["reason"]), result.stdout
    wait = next(m for m in data["metrics"] if m["metric"] == "data_wait")
    assert wait["change"] > wait["threshold"], result.stdout
    if wait["why"] == "contended":  # other processes held this machine's CPU (a busy CI host): times are not judged
        assert result.returncode == 0 and wait["state"] == "not judged", result.stdout
    else:
        assert result.returncode == FAILED_EXIT and data["regressed"][0] == "data_wait", result.stdout
