"""The framework matrix is read from its one declaration (tracer/core/frameworks.py): no test, benchmark,
set-up script or CI script writes the frameworks out again, so a framework added there is tested, set up
and required everywhere."""

from __future__ import annotations

import re
from pathlib import Path

from tracer.core.frameworks import FRAMEWORKS

ROOT = Path(__file__).resolve().parents[1]
PLACES = ("tests", "benchmarks", "scripts", ".ci")
ENOUGH = 4  # names on one line that make a hand-written matrix (a scenario names one or two)


def test_no_hand_written_framework_matrix() -> None:
    word = re.compile(r"\b(" + "|".join(map(re.escape, FRAMEWORKS)) + r")\b")
    found = []
    for place in PLACES:
        for path in sorted((ROOT / place).rglob("*")):
            if not path.is_file() or path.suffix not in ("", ".py", ".sh", ".toml"):
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if len(set(word.findall(line))) >= ENOUGH:
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "read the frameworks from tracer.core.frameworks.FRAMEWORKS:\n" + "\n".join(found)


def test_setup_all_and_ci_take_every_declared_framework() -> None:
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "from tracer.core.frameworks import FRAMEWORKS" in setup
    assert "TRACER_REQUIRE_FRAMEWORKS=all" in (ROOT / ".ci" / "run").read_text()
