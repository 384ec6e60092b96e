"""Notes each Python process a probed one starts that the probe cannot enter (`python -I`, `-E`, `-S`,
an environment whose PYTHONPATH was replaced): an event naming it and why, so the run says why its steps
went unseen. Read from Python's audit events (3.8+) for subprocess, exec, spawn and system; the hook
never raises (an audit hook's error would fail the user's call)."""

import os
import sys

from .names import schema

WATCHED = {"subprocess.Popen": (1, 3), "os.exec": (1, 2), "os.posix_spawn": (1, 2), "os.spawn": (2, 3), "os.system": 0}
"""Audit events that start a program, and where their argv and environment are among the event's arguments."""
MAX_NOTED = 8
"""Events written at most per process: a loop starting the same child is one note, a launcher of many a few."""
ARGV_WORDS, WORD_CHARS = 6, 200


def _text(value):
    return os.fsdecode(value) if isinstance(value, (bytes, os.PathLike)) else str(value)


def _launch(event, args):
    """(argv, environment) of a watched audit event."""
    if event == "os.system":
        return ["/bin/sh", "-c", _text(args[0])], os.environ
    at, env_at = WATCHED[event]
    argv, env = args[at], args[env_at]
    argv = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv)
    return [_text(a) for a in argv], os.environ if env is None else env


def install(rec):  # type: (object) -> None
    add = getattr(sys, "addaudithook", None)
    if add is None:  # Python 3.7 and older: children are not checked
        return
    stage = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the folder first on PYTHONPATH
    noted = set()

    def hook(event, args):
        if event not in WATCHED or len(noted) >= MAX_NOTED:
            return
        try:
            argv, env = _launch(event, args)
            env = {_text(k): _text(v) for k, v in env.items()}
            reason = schema.probe_kept_out(argv, env, stage, schema.PROBE_RUN_DIR_ENV)
            shown = tuple(a[:WORD_CHARS] for a in argv[:ARGV_WORDS])
            if reason and (shown, reason) not in noted:
                noted.add((shown, reason))
                rec.emit(schema.Event.PROBE_MISSED, argv=list(shown), reason=reason)
        except Exception:  # noqa: BLE001 - the user's call goes on, unchecked
            pass

    add(hook)
