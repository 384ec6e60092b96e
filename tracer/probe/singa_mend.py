"""SINGA's only PyPI build (`singa==3.0.0.dev1`, a CPython 3.6 wheel) cannot train as shipped: its SWIG
module lacks NumPy copies, Python 3's in-place division and CPU BatchNorm training's return values
(tracer/worker/frameworks/singa_patches.py says how each fails). The built-in worker mends them; a user's
script gets the same mends, from the same file, as soon as it imports `singa`: each defect is probed first
and mended only where found, so a fixed SINGA build is left alone. What was mended is recorded beside the
version (`MENDED_KEY` in the run's framework versions).
"""

import importlib.util
import os

PATCHES_FILE = ("worker", "frameworks", "singa_patches.py")
MODULE_NAME = "dltracer_singa_patches"
MENDED_KEY = "singa wheel mended"


def patch_singa(singa, recorder):
    recorder.frameworks["singa"] = str(getattr(singa, "__version__", ""))
    tool = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # .../tracer
    spec = importlib.util.spec_from_file_location(MODULE_NAME, os.path.join(tool, *PATCHES_FILE))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    mended = module.apply()
    recorder.frameworks[MENDED_KEY] = ", ".join(mended) or "nothing (no defect found)"
