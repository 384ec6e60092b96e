"""A batch loader for a framework with no input-pipeline library of its own (SINGA): `workers` processes
of Python's multiprocessing, each building whole batches (`workload.load_batch`: decode, resize, crop,
flip, uint8), `workers * prefetch` batches in flight, handed back in order.

Processes, not threads: each decoder has its own interpreter lock, so --workers N is N decoders at work
whatever part of the decode holds the lock. Spawned, not forked: a child imports only the workload module
and never inherits the framework's threads or device state. The pool starts at the first batch asked for
(timed as that step's data wait) and lives until `close()`, as PyTorch's persistent workers do.
"""

import collections
import multiprocessing
from typing import Any, Deque, Iterable, Iterator, Optional, Sequence, Tuple

from tracer.worker.workload import load_batch

Job = Tuple[Sequence[str], int, Sequence[bool]]  # files, image size, flips: load_batch's arguments
START_METHOD = "spawn"


class PoolLoader(object):
    def __init__(self, workers: int, prefetch: int) -> None:
        if workers < 0 or (workers and prefetch < 1):
            raise ValueError(
                "PoolLoader(workers=%d, prefetch=%d): give workers >= 0, prefetch >= 1" % (workers, prefetch)
            )
        self.workers = workers
        self.in_flight = workers * prefetch
        self._pool: Optional[Any] = None

    def batches(self, jobs: Iterable[Job]) -> Iterator[Any]:
        """load_batch(*job) for each job, in order; with 0 workers, in the calling thread when asked for."""
        if not self.workers:
            for job in jobs:
                yield load_batch(*job)
            return
        if self._pool is None:
            self._pool = multiprocessing.get_context(START_METHOD).Pool(self.workers)
        todo = iter(jobs)
        pending: Deque[Any] = collections.deque()
        for job in todo:
            pending.append(self._pool.apply_async(load_batch, job))
            if len(pending) >= self.in_flight:
                break
        while pending:
            ready = pending.popleft().get()
            for job in todo:  # one more job for the one taken
                pending.append(self._pool.apply_async(load_batch, job))
                break
            yield ready

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
