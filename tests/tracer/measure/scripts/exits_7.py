"""Trains two 'steps' and exits with its own status 7 (a status a job script checks)."""

import sys

for step in range(2):
    print(f"step {step}", flush=True)
print("exiting with 7", flush=True)
sys.exit(7)
