"""Architecture parity: every declared framework's every declared model has torchvision's trainable parameter
count within 1 %, counted exactly as a run counts them (the models module's `model_params`), in the
framework's own interpreter. A model the framework refuses (SINGA 3.0's CPU: MobileNetV2) is listed with the
framework's message instead. One case per (framework, model), from tracer.core.frameworks and
tracer.core.options: a new model is one line in the options and one entry in each models module."""

from __future__ import annotations

import functools
import json

import pytest

from tests.conftest import require_framework
from tests.tracer.worker.helpers import require_singa, run_in_framework
from tracer.core.frameworks import FRAMEWORKS
from tracer.core.options import MODELS
from tracer.worker.workload import REFERENCE_PARAMS

IMAGE_SIZE = 64  # what the CI runs use; the counts do not depend on it (adaptive pooling everywhere)

PROBE = """
import importlib, json, sys
models = importlib.import_module(sys.argv[1])
for name in sys.argv[2:]:
    try:
        c = models.model_params(name, 3, {size})
    except ValueError as e:
        if not str(e).startswith(getattr(models, "REFUSED", "-")):
            raise
        print(json.dumps({{"model": name, "refused": str(e)}}), flush=True)
        continue
    print(json.dumps({{"model": name, "trainable": c.trainable, "total": c.total}}), flush=True)
"""
# What a framework refuses to build, with the words its refusal ends with.
REFUSED = {("singa", "mobilenet_v2"): "Not implemented yet"}
# Frameworks whose layers give torchvision's count exactly (PyTorch is torchvision).
EXACT = ("pytorch", "singa")


@functools.cache
def counts(framework: str) -> dict[str, tuple[int, int] | str]:
    """Every model's counts, built in one start of the framework's interpreter (kept for the run's other cases)."""
    module = FRAMEWORKS[framework].models_module
    out = run_in_framework(framework, PROBE.format(size=IMAGE_SIZE), module, *MODELS)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {r["model"]: r["refused"] if "refused" in r else (r["trainable"], r["total"]) for r in rows}


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_trainable_parameters_within_one_percent(framework: str, model: str) -> None:
    if framework == "singa":
        require_singa()
    require_framework(framework)
    found = counts(framework)
    assert model in found, (framework, sorted(found))
    count = found[model]
    if isinstance(count, str):
        assert count.endswith(REFUSED[(framework, model)]), (framework, model, count)
        return
    assert (framework, model) not in REFUSED
    trainable, total = count
    reference = REFERENCE_PARAMS[model]
    assert abs(trainable - reference) / reference < 0.01, (framework, model, trainable, reference)
    assert total >= trainable
    if framework in EXACT:
        assert trainable == reference
