"""What the worker and the probe are held to, checked the same way for both: they run in a framework's or a
user's interpreter (Python 3.6 for SINGA and on JetPack 4 boards), beside packages that are not the tool's."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path


def vermin_violations(files: Sequence[Path], backports: Sequence[str] = ()) -> str:
    """vermin's report of what in `files` needs a Python newer than 3.6 ('' when nothing does)."""
    vermin = Path(sys.executable).parent / "vermin"
    flags = [arg for name in backports for arg in ("--backport", name)]
    result = subprocess.run(
        [str(vermin), "-t=3.6-", "--no-tips", "--violations", "--eval-annotations", *flags, *map(str, files)],
        capture_output=True,
        text=True,
    )
    return "" if result.returncode == 0 else result.stdout + result.stderr


def absolute_imports(path: Path) -> Iterator[str]:
    """Every module a file imports by absolute name (`import a.b`, `from a.b import c`: `a.b`)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
