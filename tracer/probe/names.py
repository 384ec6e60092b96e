"""The names the probe writes, taken from the worker's schema (tracer/worker/schema.py), the one
declaration both share with the tracer.

The probe runs in a user's processes under the name `dltracer_probe`, with no `tracer` package on their
path (a user's own `tracer` module must not be shadowed). The schema is loaded from its file beside this
package's real location, with the tool's folder on the path only while it loads (the schema imports its
sibling `tracer.worker.cupti_layout`, standard library only); every `tracer` module that load brought
in is dropped again, so the user's process sees none of them.
"""

import importlib.util
import os
import sys

_NAME = "dltracer_probe_worker_schema"


def _load():
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    here = os.path.dirname(os.path.realpath(__file__))  # .../tracer/probe
    root = os.path.dirname(os.path.dirname(here))  # the folder that holds the `tracer` package
    before = set(sys.modules)
    sys.path.insert(0, root)
    try:
        spec = importlib.util.spec_from_file_location(_NAME, os.path.join(os.path.dirname(here), "worker", "schema.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[_NAME] = module
        spec.loader.exec_module(module)
    finally:
        if root in sys.path:
            sys.path.remove(root)
        for name in [n for n in sys.modules if n not in before and (n == "tracer" or n.startswith("tracer."))]:
            del sys.modules[name]
    return module


schema = _load()
