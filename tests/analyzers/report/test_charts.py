"""The figures and the page: written, non-empty, decodable, in the framework's colour, offline."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image

from analyzers.render import palette
from analyzers.report.series import OTHER, cuda_phases, group_shares
from tests.analyzers.report import _expected as x
from tests.analyzers.report.conftest import ReportRuns
from tracer.core.runfolder import RunFolder


def _figures(report_dir: Path, kind: str) -> list[Path]:
    return sorted(report_dir.glob(f"fig-{kind}-*.png"))


def test_every_figure_is_png_svg_and_pdf_that_decode(report_dir: Path) -> None:
    pngs = sorted(report_dir.glob("*.png"))
    assert len(_figures(report_dir, "resources")) == 2  # the ok case and the failed one's
    assert len(_figures(report_dir, "cuda-api")) == 2  # one per imported trace
    for png in pngs:
        with Image.open(png) as im:
            im.load()
            assert im.width > 400 and im.height > 300
            assert len(im.getcolors(2**24) or []) > 20  # drawn on, not blank
        svg = png.with_suffix(".svg")
        root = ET.parse(svg).getroot()
        assert root.tag.endswith("svg") and len(list(root.iter())) > 50
        assert png.with_suffix(".pdf").read_bytes().startswith(b"%PDF")


def test_framework_colour_is_the_palette_colour(report_dir: Path) -> None:
    (svg,) = [p for p in report_dir.glob("fig-resources-*.svg") if "b1" in p.name]
    assert palette.colour("pytorch").lower() in svg.read_text().lower()


def test_cuda_shares_equal_the_trace_table(report_runs: ReportRuns) -> None:
    for run in report_runs.imported:
        expected = x.cuda_shares_pct(run)
        whole = cuda_phases(RunFolder(run))["whole"]
        names, grouped = group_shares({"a": whole})
        shares = dict(zip(names, grouped["a"]))
        big = {n: v for n, v in expected.items() if v >= 1.0}
        assert set(names) - {OTHER} == set(big)
        for name, value in big.items():
            assert shares[name] == pytest.approx(value, rel=1e-9)
        assert shares.get(OTHER, 0.0) == pytest.approx(sum(v for v in expected.values() if v < 1.0), abs=1e-9)
        assert sum(shares.values()) == pytest.approx(100.0)


def test_group_shares_lists_a_function_for_every_framework_once_any_reaches_1_pct() -> None:
    from analyzers.report.series import ApiShare

    names, grouped = group_shares(
        {
            "pytorch": [ApiShare("launch", 98.0), ApiShare("sync", 0.5), ApiShare("free", 1.5)],
            "mxnet": [ApiShare("launch", 60.0), ApiShare("sync", 40.0)],
        }
    )
    assert names == ["launch", "sync", "free"]
    assert grouped == {"pytorch": [98.0, 0.5, 1.5], "mxnet": [60.0, 40.0, 0.0]}


def test_index_html_opens_offline_and_links_only_to_its_own_files(report_dir: Path, report_runs: ReportRuns) -> None:
    page = (report_dir / "index.html").read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "<script" not in page
    targets = re.findall(r'(?:src|href)="([^"#][^"]*)"', page)
    assert targets
    for target in targets:
        assert (report_dir / target).is_file(), target
    shown = set(re.findall(r'<img src="([^"]+)"', page))
    assert shown == {p.name for p in report_dir.glob("*.png")}
    assert "injected fault at epoch 1" in page
    assert report_runs.ok.name in page and report_runs.failed.name in page


def test_svg_is_byte_identical_when_redrawn(tmp_path: Path) -> None:
    from analyzers.report import charts

    panels = [("whole run", ["launch", OTHER], {"pytorch": [90.0, 10.0], "paddle": [70.0, 30.0]})]
    first, second = (
        charts.save(charts.cuda_api_figure("t", panels), tmp_path / name, ["svg"])[0] for name in ("a", "b")
    )
    assert first.read_bytes() == second.read_bytes()
