"""`tracer.core.memory.give_back_freed_memory`: what a process freed leaves it (glibc keeps freed heap
pages below a live allocation until trimmed). Run in a child process so that no other test's heap counts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = """
from tracer.core.memory import give_back_freed_memory
def rss_mib():
    return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) / 1024
blocks = [bytes(4000) for _ in range(50_000)]  # 200 MB of heap, not mmapped one by one
pin = [bytes(4000) for _ in range(10)]  # live above them: the heap's top cannot shrink
del blocks
before = rss_mib()
give_back_freed_memory()
print(before, rss_mib())
"""


def test_freed_heap_pages_leave_the_process() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, cwd=Path(__file__).parents[3]
    )
    before, after = map(float, proc.stdout.split())
    assert before - after > 100, f"RSS {before:.0f} -> {after:.0f} MiB"
