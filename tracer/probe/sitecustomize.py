"""Staged as `sitecustomize` ahead of the user's path by `tracer profile -- COMMAND`: starts the probe,
then runs the `sitecustomize` the process would have run without the tracer (a virtual environment's,
a user's own), so nothing the user set up is lost. Never raises: a probe that cannot start leaves the
command running unprobed, with one line on stderr."""

import importlib.machinery
import importlib.util
import os
import sys


def _start_probe():  # type: () -> None
    try:
        from dltracer_probe import boot

        boot.start()
    except Exception as e:  # noqa: BLE001
        sys.stderr.write("dl-tracer probe not started: %s: %s\n" % (type(e).__name__, e))


def _chain():  # type: () -> None
    """The next `sitecustomize` on the path after ours, run under its own name."""
    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))  # the staged folder, not the source
    rest = [p for p in sys.path if os.path.realpath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_start_probe()
_chain()
