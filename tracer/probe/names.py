"""The names the probe writes, taken from the worker's schema (tracer/worker/schema.py), the one
declaration both share with the tracer.

The probe runs in a user's processes under the name `dltracer_probe`, with no `tracer` package on their
path (a user's own `tracer` module must not be shadowed), so the schema is loaded from its file beside
this package's real location rather than imported by name.
"""

import importlib.util
import os
import sys

_NAME = "dltracer_probe_worker_schema"


def _load():
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    here = os.path.dirname(os.path.realpath(__file__))
    path = os.path.join(os.path.dirname(here), "worker", "schema.py")
    spec = importlib.util.spec_from_file_location(_NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    spec.loader.exec_module(module)
    return module


schema = _load()
