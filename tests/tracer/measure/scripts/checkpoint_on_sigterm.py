"""A loop that checkpoints on preemption: each of SIGTERM, SIGINT, SIGHUP (and SIGQUIT) is caught and
named on stdout, a checkpoint file written, and the script exits with its own status 3."""

import signal
import sys
import time

checkpoint = sys.argv[1]


def on_signal(signum, frame):
    name = signal.Signals(signum).name
    with open(checkpoint, "w") as f:
        f.write(name)
    print(f"got {name}: checkpointed", flush=True)
    sys.exit(3)


for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(sig, on_signal)
print("training", flush=True)
while True:
    time.sleep(0.05)
