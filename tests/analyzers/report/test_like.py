"""Like with like (analyzers.report.like): on the H100 fixtures of SimpleBig batch 100 (untraced PyTorch 85cf
and JAX a504, PyTorch traced with nsys cf98, torch a9b3 and CUPTI a266), the report's resource and energy
figures draw 85cf and a504, name the kind in their panel titles, and say which runs were left out and why;
the diagnosis ranks the traced runs apart from the untraced ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.report import Output, collect_runs, write_report
from analyzers.report.build import FINDINGS_TITLE
from analyzers.report.like import UNTRACED, choose, run_kind

SIMPLE_BIG_B100 = ("85cf", "cf98", "a9b3", "a266", "a504")


@pytest.fixture(scope="module")
def report(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Output]]:
    paths = [p for p in (real_fixtures / "gpu-h100").iterdir() if p.name[-4:] in SIMPLE_BIG_B100]
    runs, _ = collect_runs(paths)
    out = tmp_path_factory.mktemp("like")
    return write_report(runs, out, formats=("png",))


def _figure(outputs: list[Output], head: str) -> Output:
    (figure,) = [o for o in outputs if o.kind == "figure" and o.title.startswith(head)]
    return figure


@pytest.mark.parametrize("head", ["CPU %, RAM % and threads", "GPU energy and power"])
def test_resource_and_energy_figures_draw_the_untraced_runs(report: tuple[Path, list[Output]], head: str) -> None:
    _, outputs = report
    caption = _figure(outputs, head).caption
    drawn = caption.split("Runs: ")[1].split(" (untraced)")[0]
    assert sorted(r[-4:] for r in drawn.split(", ")) == ["85cf", "a504"]
    left_out = caption.split("Left out: ")[1]
    for traced, kind in (("a266", "cupti"), ("cf98", "nsys"), ("a9b3", "torch")):
        assert f"{traced} ({kind}: the figure draws untraced runs)" in left_out


def test_panel_titles_name_the_kind(real_fixtures: Path) -> None:
    paths = [p for p in (real_fixtures / "gpu-h100").iterdir() if p.name[-4:] in SIMPLE_BIG_B100]
    runs, _ = collect_runs(paths)
    untraced = choose(runs, lambda r: True)
    assert untraced is not None and untraced.kind == UNTRACED
    assert {fw: r.run_id[-4:] for fw, r in untraced.runs.items()} == {"pytorch": "85cf", "jax": "a504"}
    assert untraced.title("pytorch") == "PyTorch (untraced)"
    traced = choose(runs, lambda r: True, traced_only=True)  # a figure of traces: one backend only
    assert traced is not None and len({run_kind(r.record) for r in traced.runs.values()}) == 1
    assert traced.title("pytorch") == f"PyTorch ({traced.kind})"
    assert len(traced.left_out) == 2 and all("the figure draws" in why for _, why in traced.left_out)


def test_the_diagnosis_ranks_traced_runs_apart(report: tuple[Path, list[Output]]) -> None:
    _, outputs = report
    (section,) = [o for o in outputs if o.title == FINDINGS_TITLE]
    sections = {title: lines for title, lines in section.text}
    untraced = next(lines for title, lines in sections.items() if title.endswith("batch 100"))
    ranked = [line for line in untraced if line[:1].isdigit()]
    assert len(ranked) == 2 and all("pytorch" in line.lower() or "jax" in line.lower() for line in ranked)
    for kind in ("cupti", "nsys", "torch"):
        apart = [lines for title, lines in sections.items() if title.endswith(f"traced with {kind} (ranked apart)")]
        assert len(apart) == 1 and sum(line[:1].isdigit() for line in apart[0]) == 1
