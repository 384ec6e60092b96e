"""What the tracer knows of each framework: how to install it, and how to tell that it is installed.

The training code itself lives in `tracer/worker/frameworks/<name>.py`; adding a framework is one
entry here, one worker module and one line in `tracer/worker/registry.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracer.errors import UserError

MODELS = ("alexnet", "mobilenet_v2", "resnet50", "vgg16")


@dataclass(frozen=True)
class FrameworkInfo:
    name: str
    import_name: str
    dist_names: tuple[str, ...]  # the first one installed gives the version
    cpu_requirements: tuple[str, ...]
    gpu_requirements: tuple[str, ...]
    note: str = ""
    # Tried when pip fails and `conda` is on PATH: a conda environment made at the env's place.
    conda_channels: tuple[str, ...] = ()
    conda_cpu: tuple[str, ...] = ()
    conda_gpu: tuple[str, ...] = ()
    # What to tell the user when neither pip nor conda could install it (one line).
    missing_hint: str = ""


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
            ("singa",),
            ("singa",),
            note="no SINGA build installs here (PyPI has only a CPython 3.6 wheel); see README, SINGA",
            conda_channels=("nusdbsystem", "conda-forge"),
            conda_cpu=("singa-cpu",),
            conda_gpu=("singa-gpu",),
            missing_hint=(
                "SINGA's Python package (module `singa`) is missing: PyPI has only a CPython 3.6 wheel; install it "
                "with conda (`conda install -c nusdbsystem -c conda-forge singa-cpu`, or singa-gpu) or from source "
                "(https://singa.apache.org/docs/installation), then run "
                "`tracer profile --framework singa --python /path/to/that/env/bin/python ...`"
            ),
        ),
    )
}


def framework_info(name: str) -> FrameworkInfo:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise UserError(f"unknown framework '{name}': choose one of {', '.join(FRAMEWORKS)}") from None
