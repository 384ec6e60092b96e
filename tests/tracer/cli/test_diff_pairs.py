"""`tracer diff` answers for every pair of fixtures that have steps: per image where both record their images,
per step where either does not (imported traces without a batch), with GPU time by kernel class wherever a
trace's steps and kernels share its clock (every Kineto import); `tracer import --batch N` gives a trace its
batch, and the same pair then compares per image."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder, list_runs

STEPPED_TRACES = (
    "kineto-2021/worker0.1623143089861.pt.trace.json.gz",
    "hta/nccl_data.json.gz",
    "hta/triton_example.json.gz",
    "param-dlrm-8rank",
)
"""Every fixture trace whose import has steps (ProfilerStep ranges); the others have none."""
RUN_FOLDERS = ("cf98", "85cf")
"""Two H100 run folders of ours: traced with nsys, and untraced (both record their batch)."""


def _diff(a: Path, b: Path) -> dict[str, Any]:
    result = run_tracer("diff", str(a), str(b), "--format", "json")
    assert result.returncode == 0, (a.name, b.name, result.stderr[-1500:])
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def _knows_its_batch(path: Path) -> bool:
    """A run of ours, or an import whose trace recorded its batch (the 2021 trace's shapes do)."""
    imported = RunFolder(path).read_record().imported
    return imported is None or "batch" not in imported.not_recorded


@pytest.fixture(scope="module")
def imported(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for rel in STEPPED_TRACES:
        where = tmp_path_factory.mktemp("runs")
        result = run_tracer("import", str(real_fixtures / rel), "--out", str(where))
        assert result.returncode == 0, result.stderr
        (folder,) = list_runs(where)
        assert (folder.samples_dir / "steps.parquet").exists(), rel
        out[rel] = folder.path
    return out


def test_every_pair_of_fixtures_with_steps_diffs(imported: dict[str, Path], real_fixtures: Path) -> None:
    runs = {**imported, **{s: next((real_fixtures / "gpu-h100").glob(f"*-{s}")) for s in RUN_FOLDERS}}
    assert [_knows_its_batch(p) for p in imported.values()] == [True, False, False, False]
    for (na, a), (nb, b) in itertools.combinations(runs.items(), 2):
        out = _diff(a, b)
        both_know = _knows_its_batch(a) and _knows_its_batch(b)
        assert out["per"] == ("image" if both_know else "step"), (na, nb)
        assert out["gap_s"] is not None and out["parts"], (na, nb)
        explanation = out["explanation"]
        if explanation is not None and explanation["cause"] is not None:  # the gap's parts sized, with the rest
            total = sum(p["seconds"] for p in explanation["parts"]) + explanation["unexplained_s"]
            assert total == pytest.approx(explanation["effect_s"], rel=1e-9, abs=1e-12)
            _named_only_when_covered(explanation)
        sized = out["class_explanation"]  # the change in GPU time by class: the classes add up to it exactly
        if sized is not None:
            change = sum(c["b_s"] for c in out["classes"]) - sum(c["a_s"] for c in out["classes"])
            assert sized["effect_s"] == pytest.approx(abs(change), rel=1e-9)
            assert sum(p["seconds"] for p in sized["parts"]) == pytest.approx(sized["effect_s"], rel=1e-9)
            _named_only_when_covered(sized)
            assert "Sized against the change in GPU time: " in " ".join(out["sentences"]) or not any(
                "changed most is" in line for line in out["sentences"]
            )
        if na in imported and nb in imported:  # Kineto: the steps and kernels share the trace's clock
            assert out["classes"], (na, nb)
            assert not any("clock is not the steps' clock" in n for n in out["a"]["notes"] + out["b"]["notes"])


def _named_only_when_covered(explanation: dict[str, Any]) -> None:
    """The coverage rule: a part is the cause only from 80 % of the effect on, else the cause is mixed."""
    top = explanation["parts"][0]
    if explanation["cause"] not in (None, "mixed"):
        assert explanation["cause"] == top["label"] and top["pct"] >= explanation["named_pct"], explanation
    else:
        assert top["pct"] < explanation["named_pct"], explanation


def test_a_batch_given_on_import_makes_the_diff_per_image(real_fixtures: Path, tmp_path: Path) -> None:
    trace = real_fixtures / "hta" / "nccl_data.json.gz"
    for batch in ("32", "64"):
        result = run_tracer("import", str(trace), "--batch", batch, "--out", str(tmp_path / batch))
        assert result.returncode == 0, result.stderr
    (a,), (b,) = list_runs(tmp_path / "32"), list_runs(tmp_path / "64")
    imported = a.read_record().imported
    assert imported is not None and imported.batch == 32 and "batch" not in imported.not_recorded
    out = _diff(a.path, b.path)
    assert out["per"] == "image" and out["a"]["images"] == 32 * out["a"]["steps"]
    # the same trace: per image, B takes half A's time (twice the images per step)
    assert out["b"]["step_s"] == pytest.approx(out["a"]["step_s"] / 2, rel=1e-9)
    bad = run_tracer("import", str(trace), "--batch", "0", "--out", str(tmp_path / "bad"))
    assert bad.returncode == 2 and "not a batch size" in bad.stderr
