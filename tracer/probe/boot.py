"""Starts the probe in a process (from `sitecustomize`): one Recorder, the import hooks, and a reset
in forked children. Does nothing where the process was not started by `tracer profile -- COMMAND`."""

import os
import sys

from .names import schema

_state = {}  # type: dict


def recorder():
    """This process's Recorder, or None outside the tracer (or with the probe off)."""
    return _state.get("recorder")


def start():  # type: () -> None
    run_dir = os.environ.get(schema.PROBE_RUN_DIR_ENV)
    if not run_dir or "recorder" in _state or not os.path.isdir(run_dir):
        return
    from . import hooks, spawns
    from .recorder import Recorder

    rec = Recorder(run_dir)
    _state["recorder"] = rec
    at_fork = getattr(os, "register_at_fork", None)  # Python 3.7+; a forked 3.6 child checks its pid instead
    if at_fork is not None:
        at_fork(after_in_child=rec.after_fork)
    hooks.install(rec)
    spawns.install(rec)
    rec.emit(
        schema.Event.START,
        python=sys.executable,
        python_version="%d.%d.%d" % sys.version_info[:3],
        argv=list(sys.argv) if hasattr(sys, "argv") else [],
        world_size=rec.world_size,
    )
