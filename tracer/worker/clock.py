"""Nanosecond clocks for the worker, on any Python it runs on.

`time.time_ns` and `time.perf_counter_ns` are Python 3.7+; SINGA's only wheel and JetPack 4 boards
run Python 3.6, where the float clocks stand in (microsecond resolution, ample for events and steps).
"""

import time


def _time_ns_from_float() -> int:
    return int(time.time() * 1e9)


def _perf_counter_ns_from_float() -> int:
    return int(time.perf_counter() * 1e9)


time_ns = getattr(time, "time_ns", _time_ns_from_float)
perf_counter_ns = getattr(time, "perf_counter_ns", _perf_counter_ns_from_float)
