"""The README stays a page; the rest is a documentation site that builds without a warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200


def test_readme_is_a_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move detail into docs/"


def test_docs_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    result = subprocess.run(
        [str(mkdocs), "build", "--strict", "--quiet", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(Path.home())},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    reference = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "--sample-hz" in reference and "tracer campaign" in reference
