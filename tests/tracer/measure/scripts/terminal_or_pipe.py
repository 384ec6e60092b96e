"""Says what its output streams are (a terminal or not), as tqdm, rich and colour libraries ask, and its
terminal's width; then exits with its own status 7."""

import os
import shutil
import sys

print(f"stdout is a terminal: {sys.stdout.isatty()}", flush=True)
print(f"stderr is a terminal: {sys.stderr.isatty()}", file=sys.stderr, flush=True)
if sys.stdout.isatty():
    print(f"columns {os.get_terminal_size(sys.stdout.fileno()).columns}", flush=True)
print(f"fallback columns {shutil.get_terminal_size().columns}", flush=True)
sys.exit(7)
