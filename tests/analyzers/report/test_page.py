"""The report page as a browser lays it out (issue 28 item 2): rendered in headless Chromium at 1,280 px on
the twelve H100 runs and a CPU run, no table and no text block is wider than the page. Chromium is Debian's
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
const page = document.documentElement.clientWidth;
const boxes = [...document.querySelectorAll("table")].map(t => {
  const box = (t.closest(".table-scroll") || t).getBoundingClientRect();
  return {left: box.left, right: box.right, table: t.getBoundingClientRect().width,
          scrolls: getComputedStyle(t.closest(".table-scroll") || t).overflowX};
});
const pres = [...document.querySelectorAll("pre")].map(p => ({scroll: p.scrollWidth, client: p.clientWidth}));
document.body.setAttribute("data-layout", JSON.stringify(
  {page, scroll: document.documentElement.scrollWidth, tables: boxes, pres}));
</script>"""


def chromium() -> str:
    found = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if found is None:
        if os.environ.get("TRACER_REQUIRE_CHROMIUM") == "1":
            pytest.fail("Chromium must be installed for this test run (TRACER_REQUIRE_CHROMIUM=1)")
        pytest.skip("no Chromium here: `apt-get install chromium` (scripts/setup.sh all does it as root)")
    return found


def layout(page: Path, profile: Path, width: int = PAGE_WIDTH_PX) -> dict[str, object]:
    """The page's layout as Chromium computes it at `width` px (a copy of the page with MEASURE appended)."""
    measured = page.with_name("measure.html")
    measured.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
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
