"""Architecture parity: every framework's four models have torchvision's trainable parameter count
within 1 %, counted exactly as a run counts them (the worker module's `model_params`), in the
framework's own interpreter. A model the framework refuses (SINGA 3.0's CPU: MobileNetV2) is listed
with the framework's message instead."""

from __future__ import annotations

import json

import pytest

from tests.conftest import require_framework
from tests.tracer.worker.helpers import require_singa, run_in_framework
from tracer.core.frameworks import FRAMEWORKS
from tracer.core.options import MODELS
from tracer.worker.workload import REFERENCE_PARAMS

IMAGE_SIZE = 64  # what the CI runs use; the counts do not depend on it (adaptive pooling everywhere)

PROBE = """
import json, sys
from tracer.worker.frameworks import {module} as worker
for name in sys.argv[1:]:
    try:
        c = worker.model_params(name, 3, {size})
    except ValueError as e:
        if not str(e).startswith(getattr(worker, "REFUSED", "-")):
            raise
        print(json.dumps({{"model": name, "refused": str(e)}}), flush=True)
        continue
    print(json.dumps({{"model": name, "trainable": c.trainable, "total": c.total}}), flush=True)
"""
# What a framework refuses to build, with the words its refusal ends with.
REFUSED = {("singa", "mobilenet_v2"): "Not implemented yet"}


def counts(framework: str) -> dict[str, tuple[int, int] | str]:
    out = run_in_framework(framework, PROBE.format(module=framework, size=IMAGE_SIZE), *MODELS)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {r["model"]: r["refused"] if "refused" in r else (r["trainable"], r["total"]) for r in rows}


@pytest.mark.slow
@pytest.mark.parametrize("framework", list(FRAMEWORKS))  # every declared framework, each over every declared model
def test_trainable_parameters_within_one_percent(framework: str) -> None:
    if framework == "singa":
        require_singa()
    require_framework(framework)
    found = counts(framework)
    assert sorted(found) == sorted(MODELS)
    for model, count in found.items():
        if isinstance(count, str):
            assert count.endswith(REFUSED[(framework, model)]), (framework, model, count)
            continue
        assert (framework, model) not in REFUSED
        trainable, total = count
        reference = REFERENCE_PARAMS[model]
        assert abs(trainable - reference) / reference < 0.01, (framework, model, trainable, reference)
        assert total >= trainable
    if framework in ("pytorch", "singa"):  # torchvision's own count; SINGA's layers give exactly the same
        exact = {m: c[0] for m, c in found.items() if not isinstance(c, str)}
        assert exact == {m: REFERENCE_PARAMS[m] for m in exact}
