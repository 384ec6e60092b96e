"""What the tracer knows of each framework: how to install it, and how to tell that it is installed.

The training code itself lives in `tracer/worker/frameworks/<name>.py`; adding a framework is one
entry here, one worker module and one line in `tracer/worker/registry.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracer.core.errors import UserError
from tracer.core.options import MODELS  # noqa: F401 - re-exported for the worker-facing code


@dataclass(frozen=True)
class FrameworkInfo:
    name: str
    import_name: str
    dist_names: tuple[str, ...]  # the first one installed gives the version
    cpu_requirements: tuple[str, ...]
    gpu_requirements: tuple[str, ...]
    note: str = ""
    # The interpreter the environment must be made from ("3.6": SINGA's only PyPI wheel is cp36);
    # empty: the tool's own interpreter.
    python_version: str = ""
    # Installed (upgraded) first, alone: the venv's own pip may be too old for the wheels' tags.
    pip_bootstrap: tuple[str, ...] = ()


FRAMEWORKS: dict[str, FrameworkInfo] = {
    f.name: f
    for f in (
        FrameworkInfo(
            "pytorch",
            "torch",
            ("torch",),
            # pip takes these from the local wheel store; torch 2.13.0's CPU wheel has a broken torchvision.
            ("torch==2.14.1", "torchvision==0.29.1", "numpy", "pillow"),
            ("torch==2.14.1", "torchvision==0.29.1", "numpy", "pillow"),
            note="the 2.14.1 wheel is a CUDA build: the same environment serves CPU and GPU",
        ),
        FrameworkInfo(
            "tensorflow",
            "tensorflow",
            ("tensorflow-cpu", "tensorflow"),
            ("tensorflow-cpu==2.21.0", "pillow"),
            ("tensorflow[and-cuda]==2.21.0", "pillow"),
        ),
        FrameworkInfo(
            "mxnet",
            "mxnet",
            ("mxnet", "mxnet-cu112"),
            # MXNet 1.9.1 uses np.bool, removed in NumPy 1.24.
            ("mxnet==1.9.1", "numpy==1.23.5", "pillow"),
            ("mxnet-cu112==1.9.1", "numpy==1.23.5", "pillow"),
        ),
        FrameworkInfo(
            "paddle",
            "paddle",
            ("paddlepaddle", "paddlepaddle-gpu"),
            ("paddlepaddle==3.3.1", "pillow"),
            ("paddlepaddle-gpu==3.3.1", "pillow"),
        ),
        FrameworkInfo(
            "jax",
            "jax",
            ("jax",),
            # jax 0.10.2 is the last release for Python 3.11 (the venvs here); grain is the input pipeline.
            ("jax==0.10.2", "jaxlib==0.10.2", "flax==0.12.8", "optax==0.2.8", "grain==0.2.18", "pillow"),
            ("jax[cuda13]==0.10.2", "flax==0.12.8", "optax==0.2.8", "grain==0.2.18", "pillow"),
            note="the CUDA build is the jax[cuda13] extra: it needs an NVIDIA driver for CUDA 13",
        ),
        FrameworkInfo(
            "singa",
            "singa",
            ("singa", "singa-cpu", "singa-gpu"),
            # PyPI's only SINGA build: a CPython 3.6 manylinux2014 CPU wheel. NumPy 1.19.5 and Pillow 8.4.0
            # are the last releases for 3.6; `dataclasses` is the 3.6 backport the worker imports.
            ("singa==3.0.0.dev1", "numpy==1.19.5", "dataclasses==0.8", "pillow==8.4.0"),
            ("singa==3.0.0.dev1", "numpy==1.19.5", "dataclasses==0.8", "pillow==8.4.0"),
            note="PyPI's SINGA wheel is CPU-only: for a GPU build, `tracer profile --python` an interpreter with one",
            python_version="3.6",
            # pip 18.1 (Python 3.6's own) rejects the manylinux2014 tag; 21.3.1 is the last pip for 3.6.
            pip_bootstrap=("pip<22",),
        ),
    )
}


def framework_info(name: str) -> FrameworkInfo:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise UserError(f"unknown framework '{name}': choose one of {', '.join(FRAMEWORKS)}") from None
