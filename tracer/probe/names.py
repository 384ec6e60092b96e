"""The names the probe writes, taken from the worker's schema (tracer/worker/schema.py), the one
declaration both share with the tracer.

The probe runs in a user's processes under the name `dltracer_probe`, with no `tracer` package on their
path (a user's own `tracer` module must not be shadowed). The schema is loaded from its file beside this
package's real location, with the tool's folder on the path only while it loads (the schema imports its
sibling `tracer.worker.cupti_layout`, standard library only); every `tracer` module that load brought
in is dropped again, so the user's process sees none of them. Other worker modules the probe runs as
they are (the trace window's gate, the PyTorch profiler's trace) are loaded the same way (`worker_module`).
"""

import importlib.util
import os
import sys

_NAME = "dltracer_probe_worker_schema"


def _ours(name):  # type: (str) -> bool
    return name == "tracer" or name.startswith("tracer.")


def worker_module(name, *path):
    """The worker's module at tracer/worker/<path>, loaded under `name` (once) in the same way: the
    tool's folder on the path only while it loads, its `tracer` modules dropped again and a user's own
    `tracer` modules, where the script has some, put back."""
    if name in sys.modules:
        return sys.modules[name]
    here = os.path.dirname(os.path.realpath(__file__))  # .../tracer/probe
    root = os.path.dirname(os.path.dirname(here))  # the folder that holds the `tracer` package
    users = dict((n, m) for n, m in sys.modules.items() if _ours(n))
    for n in users:
        del sys.modules[n]
    sys.path.insert(0, root)
    try:
        spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(here), "worker", *path))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        if root in sys.path:
            sys.path.remove(root)
        for n in [n for n in sys.modules if _ours(n)]:
            del sys.modules[n]
        sys.modules.update(users)
    return module


schema = worker_module(_NAME, "schema.py")
