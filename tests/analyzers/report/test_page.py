"""The report page as a browser lays it out (issue 28 item 2, issue 58): rendered in headless Chromium at 1,280 px
on the twelve H100 runs and a CPU run, nothing is wider than the page and no case's table needs to scroll
(Table 2 at no more than `headline.HEADLINE_LIMIT` columns); with its print stylesheet at a sheet's width
the same holds. Chromium is Debian's
`chromium` (scripts/setup.sh installs it as root); without it the test skips, unless
TRACER_REQUIRE_CHROMIUM=1 (CI) makes that a failure."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from analyzers.report import collect_runs, write_report
from analyzers.report.headline import HEADLINE_LIMIT
from tracer.core.runfolder import RunFolder

PAGE_WIDTH_PX = 1280
# As root Chromium needs --no-sandbox; the rest keeps a test run off the network and out of ~/.config.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
# Runs last in the page: the page's width, and per table the box it sits in and its own width.
MEASURE = """<script>
document.querySelectorAll("details").forEach(d => { d.open = true; });
const page = document.documentElement.clientWidth;
const boxes = [...document.querySelectorAll("table")].map(t => {
  const box = (t.closest(".table-scroll") || t).getBoundingClientRect();
  return {left: box.left, right: box.right, table: t.getBoundingClientRect().width,
          scrolls: getComputedStyle(t.closest(".table-scroll") || t).overflowX};
});
const pres = [...document.querySelectorAll("pre")].map(p => ({scroll: p.scrollWidth, client: p.clientWidth}));
const cases = [...document.querySelectorAll("table.headline")].map(t => ({
  device: t.dataset.device, columns: t.rows[0].cells.length, width: t.scrollWidth,
  box: t.closest(".table-scroll").clientWidth}));
document.body.setAttribute("data-layout", JSON.stringify(
  {page, scroll: document.documentElement.scrollWidth, tables: boxes, pres, cases}));
</script>"""


def chromium() -> str:
    found = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if found is None:
        if os.environ.get("TRACER_REQUIRE_CHROMIUM") == "1":
            pytest.fail("Chromium must be installed for this test run (TRACER_REQUIRE_CHROMIUM=1)")
        pytest.skip("no Chromium here: `apt-get install chromium` (scripts/setup.sh all does it as root)")
    return found


def layout(page: Path, profile: Path, width: int = PAGE_WIDTH_PX, printed: bool = False) -> dict[str, object]:
    """The page's layout as Chromium computes it at `width` px (a copy of the page with MEASURE appended);
    `printed`: with its print stylesheet applied on screen (`@media print` made `@media all`)."""
    measured = page.with_name("measure.html")
    text = page.read_text().replace("</body>", MEASURE + "</body>")
    if printed:
        assert "@media print {" in text
        text = text.replace("@media print {", "@media all {")
    measured.write_text(text)
    done = subprocess.run(
        [
            chromium(),
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},900",
            "--dump-dom",
            measured.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    m = re.search(r'data-layout="([^"]*)"', done.stdout)
    assert m, done.stderr[-2000:]
    return json.loads(html.unescape(m[1]))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def gpu_report(tmp_path_factory: pytest.TempPathFactory, real_fixtures: Path, tiny_pytorch_run: RunFolder) -> Path:
    runs, warnings = collect_runs([real_fixtures / "gpu-h100", tiny_pytorch_run.path])
    out = tmp_path_factory.mktemp("page")
    index, _ = write_report(runs, out, ("png",), warnings)
    return index


def test_no_table_or_text_is_wider_than_the_page_at_1280_px(gpu_report: Path, tmp_path: Path) -> None:
    measured = layout(gpu_report, tmp_path / "profile")
    page = measured["page"]
    assert isinstance(page, int) and PAGE_WIDTH_PX - 40 <= page <= PAGE_WIDTH_PX, measured
    assert measured["scroll"] == page, "something makes the page scroll sideways"
    _case_tables_fit(measured)
    tables = measured["tables"]
    assert isinstance(tables, list) and len(tables) >= 4  # Tables 1-2, the findings, the runs
    for box in tables:
        assert 0 <= box["left"] and box["right"] <= page, box  # each table's box inside the page
        assert box["table"] <= box["right"] - box["left"] + 1 or box["scrolls"] == "auto", box
    pres = measured["pres"]
    assert isinstance(pres, list) and pres  # the diagnosis blocks
    assert all(p["scroll"] <= p["client"] for p in pres), pres  # wrapped, nothing clipped


def test_one_heading_per_figure(gpu_report: Path) -> None:
    headings = re.findall(r"<h2 id=\"fig-[^\"]+\">Figure \d+: ([^<]*)</h2>", gpu_report.read_text())
    assert len(headings) >= 13 and len(set(headings)) == len(headings), headings
    assert not [h for h in headings if "\n" in h], headings  # one line each (the energy ones had two)
    assert sum(h.startswith("GPU energy and power per epoch: ") for h in headings) == 4, headings


def _case_tables_fit(measured: dict[str, object]) -> None:
    """Table 2 is one table per GPU case of the H100 runs (four), each at most HEADLINE_LIMIT columns and
    as wide as its box at most: it never scrolls sideways; Table 1 (the CPU run) likewise."""
    cases = measured["cases"]
    assert isinstance(cases, list)
    gpu = [c for c in cases if c["device"] == "gpu"]
    assert len(gpu) == 4 and any(c["device"] == "cpu" for c in cases), cases
    assert all(c["columns"] <= HEADLINE_LIMIT for c in cases), cases
    assert all(c["width"] <= c["box"] for c in cases), cases


# A sheet of A4 at 96 px per inch less Chromium's default print margins (about 1 cm each side).
PRINT_WIDTH_PX = 720


def test_the_print_stylesheet_fits_the_page_on_a_sheet(gpu_report: Path, tmp_path: Path) -> None:
    measured = layout(gpu_report, tmp_path / "profile", PRINT_WIDTH_PX, printed=True)
    assert measured["scroll"] == measured["page"], "something is wider than a printed sheet"
    _case_tables_fit(measured)
