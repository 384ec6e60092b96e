"""A parent holding a 256 MiB dataset in memory forks three loader workers (as a DataLoader with
num_workers=3 does under the fork start method): the pages are shared, copy-on-write. While all four
live, it reads its tree's memory from /proc and prints both sums: RSS counts the shared pages in each
process, PSS counts them once."""

import os
import time

MIB = 2**20
data = bytearray(256 * MIB)
for i in range(0, len(data), 4096):  # touch every page: resident, then shared by the forks
    data[i] = 1

workers = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        checksum = sum(data[i] for i in range(0, len(data), 4096 * 64))  # reads: shares, does not copy
        time.sleep(6)
        os._exit(0 if checksum else 1)
    workers.append(pid)


def rollup(pid, field):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


time.sleep(3)
tree = [os.getpid(), *workers]
rss = sum(rollup(p, "Rss") for p in tree) / MIB
pss = sum(rollup(p, "Pss") for p in tree) / MIB
print(f"tree of {len(tree)}: RSS summed {rss:.0f} MiB, PSS summed {pss:.0f} MiB", flush=True)
for pid in workers:
    os.waitpid(pid, 0)
