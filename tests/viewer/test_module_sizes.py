"""The viewer only indexes and draws what the analyzers computed (issue #25): no module of it grows past
`MAX_LINES`, and its data layer stays loading, metrics and zoom indexes."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400
DATA_MAX_LINES = 330  # 300 until a run's ranks and problems reached the viewer (round of 2026-11-27)


def test_no_viewer_module_is_over_400_lines() -> None:
    sizes = {p.relative_to(ROOT): len(p.read_text().splitlines()) for p in (ROOT / "viewer").rglob("*.py")}
    assert sizes and not {p: n for p, n in sizes.items() if n > MAX_LINES}
    assert sizes[Path("viewer/data.py")] < DATA_MAX_LINES
