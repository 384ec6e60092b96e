"""A data-parallel rank of the built-in workload (`--nproc`): who it is, the record of each collective it
enters, and the test hook that slows one rank's loader.

Python 3.6, standard library only. The rank comes from the environment torchrun also sets (RANK_ENV ...);
each collective is a row of COLLECTIVE_COLUMNS: when this rank arrived and when it completed here, so the
tracer can name the rank that arrived last (the straggler), not the one that waited.
"""

import os
import threading
import time
from typing import Any, Iterable, Iterator, List, Optional

from tracer.worker.schema import COLLECTIVE_COLUMNS, LOCAL_RANK_ENV, RANK_ENV, WORLD_SIZE_ENV


class RankEnv(object):
    def __init__(self, rank: int = 0, local_rank: int = 0, world_size: int = 1) -> None:
        self.rank = rank
        self.local_rank = local_rank
        self.world_size = world_size

    @classmethod
    def from_environ(cls) -> "RankEnv":
        return cls(
            int(os.environ.get(RANK_ENV, "0")),
            int(os.environ.get(LOCAL_RANK_ENV, "0")),
            int(os.environ.get(WORLD_SIZE_ENV, "1")),
        )


class CollectiveLog(object):
    """Rows of COLLECTIVE_COLUMNS appended to a CSV; rows may come from a communication thread (a DDP
    hook's completion), so they are kept under a lock and written by `flush` (each epoch's end, close)."""

    def __init__(self, path: str, rank: int) -> None:
        folder = os.path.dirname(path)
        if folder and not os.path.isdir(folder):
            os.makedirs(folder)
        self._file = open(path, "a")
        if self._file.tell() == 0:
            self._file.write(",".join(COLLECTIVE_COLUMNS) + "\n")
            self._file.flush()
        self._rank = rank
        self._rows: List[str] = []
        self._lock = threading.Lock()

    def add(self, epoch: int, step: int, what: str, arrive_ns: int, done_ns: int) -> None:
        with self._lock:
            self._rows.append("%d,%d,%s,%d,%d,%d\n" % (epoch, step, what, arrive_ns, done_ns, self._rank))

    def flush(self) -> None:
        with self._lock:
            rows, self._rows = self._rows, []
        if rows:
            self._file.write("".join(rows))
            self._file.flush()

    def close(self) -> None:
        self.flush()
        self._file.close()


def slow_ms(spec: Optional[str], rank: int) -> float:
    """The sleep per batch `--slow-loader RANK:MS` asks of this rank (0 for the others)."""
    if not spec:
        return 0.0
    who, _, ms = spec.partition(":")
    return float(ms or 0) if int(who) == rank else 0.0


def slowed(batches: Iterable[Any], ms: float) -> Iterator[Any]:
    """The batches, each handed over `ms` later: a slow input pipeline, seen by the step as data wait."""
    for batch in batches:
        if ms > 0:
            time.sleep(ms / 1000.0)
        yield batch
