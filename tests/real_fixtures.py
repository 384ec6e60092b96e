"""Where the real traces and run folders the tests read live: inside the repository (issue 55), so a
clone alone runs every test. Their sources and licences are in `tests/data/fixtures/SOURCES.md`."""

from pathlib import Path

REAL_FIXTURES = Path(__file__).resolve().parent / "data" / "fixtures"
