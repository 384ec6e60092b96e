"""Why the probe will not load in a Python process a command starts (`python -I`, `-E`, `-S`, an
environment that drops the tracer's PYTHONPATH entry), read from its argv and environment alone.

Shared by the probe (a probed process starting another: `tracer/probe/spawns.py`) and the tool (the
command itself, `analyzers.figures.run_summary`), so a run says why its steps went unseen rather than
"no loop the probe knows". Python 3.6, standard library only: the probe runs in a user's interpreter.
"""

import os
import re
import shlex
from typing import Dict, List, Set, Tuple  # noqa: F401 - in the type comments

_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?[a-z]?$")
_SHELLS = ("sh", "bash", "dash", "zsh")
_FLAG_REASONS = (
    ("I", "python -I ignores PYTHONPATH, where the probe is"),
    ("E", "python -E ignores PYTHONPATH, where the probe is"),
    ("S", "python -S skips sitecustomize, which starts the probe"),
)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _unwrapped(argv, env):  # type: (List[str], Dict[str, str]) -> Tuple[List[str], Dict[str, str]]
    """argv and environment past an `env` prefix, a shell's `-c` and leading NAME=value words."""
    argv, env = list(argv), dict(env)
    for _ in range(8):  # nested wrappers, a few deep
        if not argv:
            break
        name = os.path.basename(argv[0])
        if name == "env":
            rest = argv[1:]
            while rest and (rest[0].startswith("-") or _ASSIGNMENT.match(rest[0])):
                word = rest.pop(0)
                if word in ("-i", "-", "--ignore-environment"):
                    env = {}
                elif word in ("-u", "--unset") and rest:
                    env.pop(rest.pop(0), None)
                elif word.startswith("--unset="):
                    env.pop(word.partition("=")[2], None)
                elif _ASSIGNMENT.match(word):
                    key, _, value = word.partition("=")
                    env[key] = value
            argv = rest
        elif name in _SHELLS and len(argv) > 2 and argv[1] == "-c":
            try:
                words = shlex.split(argv[2])
            except ValueError:
                return [], env
            while words and (_ASSIGNMENT.match(words[0]) or words[0] == "exec"):
                key, _, value = words.pop(0).partition("=")
                if value or key != "exec":
                    env[key] = value
            argv = words
        else:
            break
    return argv, env


def _flags(argv):  # type: (List[str]) -> Set[str]
    """The interpreter's one-letter options before its script, `-c` or `-m`."""
    found = set()  # type: Set[str]
    words = iter(argv[1:])
    for word in words:
        if word in ("-", "--") or not word.startswith("-") or word.startswith("--"):
            break
        letters = word[1:]
        for i, letter in enumerate(letters):
            if letter in "cm":
                return found
            if letter in "WX":  # the rest of the word, or the next word, is the option's value
                if i == len(letters) - 1:
                    next(words, None)
                break
            found.add(letter)
    return found


def kept_out(argv, env, probe_path, run_dir_env):  # type: (List[str], Dict[str, str], str, str) -> str
    """Why a process started with `argv` and `env` will run without the probe, or '' where it will run
    with it or is no Python (as far as its argv tells: a script run by its #! line is not followed).
    `probe_path`: the folder the tracer put first on PYTHONPATH; `run_dir_env`: the run folder's variable."""
    argv, env = _unwrapped(argv, env)
    if not argv or not _PYTHON.match(os.path.basename(argv[0])):
        return ""
    flags = _flags(argv)
    for letter, reason in _FLAG_REASONS:
        if letter in flags:
            return reason
    if "PYTHONPATH" not in env and run_dir_env not in env:
        return "its environment was cleared (env -i?), the PYTHONPATH where the probe is with it"
    path = [os.path.realpath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if os.path.realpath(probe_path) not in path:
        return "its PYTHONPATH was replaced, without the tracer's folder where the probe is"
    if not env.get(run_dir_env):
        return "its environment dropped %s, which tells the probe where the run is" % run_dir_env
    return ""
