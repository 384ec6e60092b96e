"""The interface of a trace backend: how it wraps the worker, and what it leaves in the run folder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracer.core.records import RunSpec
from tracer.core.runfolder import RunFolder


class TraceBackend:
    """The default does nothing: training runs unwrapped and only the sampler measures it."""

    name = "none"
    #: True when the launched process is not the worker itself (nsys): the sampler then waits for
    #: the worker's own pid file instead of watching the launched process.
    wraps_process = False

    def check(self, spec: RunSpec, python: str = "") -> None:
        """Raise UserError when the backend cannot work here (tool or GPU missing); `python` is
        the worker's interpreter, for backends that need something inside it."""

    def command(self, worker_cmd: list[str], folder: RunFolder, spec: RunSpec, writes_pid: bool) -> list[str]:
        """The command that starts `worker_cmd` (under this backend's wrapper, if it has one); `writes_pid`:
        whether the measured process writes worker.pid as it starts (the built-in worker does, a user's
        command does not)."""
        return worker_cmd

    def environment(self, folder: RunFolder, spec: RunSpec) -> dict[str, str]:
        """Extra environment variables for the worker (e.g. switching in-process tracing on)."""
        return {}

    def worker_returncode(self, returncode: int, events: Sequence[Mapping[str, Any]]) -> int:
        """The worker's exit status as `subprocess` reports it, from the launched process's
        (they differ when a wrapper such as nsys re-encodes a signal death as 128+N)."""
        return returncode

    def finish(self, folder: RunFolder) -> list[str]:
        """After the worker ended (however it ended): convert and ingest traces; returns the trace
        files kept, relative to the run folder."""
        return []
