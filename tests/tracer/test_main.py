"""`python -m tracer` and the `tracer` script end a command that a terminal signal reaches with one line."""

from __future__ import annotations

import signal
import subprocess
import sys

# A command whose work defines a class with a field's `__set_name__` (as a dataclass does while a module is
# imported), and SIGTERM lands inside it: Python 3.11 hands it on as a RuntimeError caused by the interrupt
# (CI of 28 Nov: `tracer import` killed while it imported tracer.core.divergence printed that traceback).
SCRIPT = """
import os, signal, sys, time
import tracer.cli

class Field:
    def __set_name__(self, owner, name):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler runs here

def command(argv=None):
    class Record:
        knobs = Field()
    return 0

tracer.cli.main = command
from tracer.__main__ import entry
sys.exit(entry())
"""


def test_a_signal_inside_set_name_while_importing_is_one_line() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.stderr == "tracer: interrupted\n", done.stderr
    assert done.returncode == 128 + signal.SIGTERM


def test_any_other_runtime_error_is_not_taken_for_a_signal() -> None:
    script = "import sys, tracer.cli\ndef command(argv=None):\n    raise RuntimeError('boom')\n"
    script += "tracer.cli.main = command\nfrom tracer.__main__ import entry\nsys.exit(entry())\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "RuntimeError: boom" in done.stderr
