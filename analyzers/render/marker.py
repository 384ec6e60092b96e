"""The two lines a user adds to a loop the probe cannot see (`tracer profile -- COMMAND` found no step),
per framework: what `show` and `diagnose` print in place of a reason, so the next run has steps."""

from __future__ import annotations

from typing import Sequence

from tracer.core.schema import PROBE_MARKER, PROBE_MODULE, Probe

#: Per framework, the iterable a loop the probe does not know usually walks, and why the probe missed it.
_LOOPS = {
    "pytorch": ("batches", "a loop over tensor slices or a generator, with no optimizer.step() seen"),
    "tensorflow": ("dataset", "a tf.function step over tf.data, or a loop with no eager apply_gradients"),
    "jax": ("batches", "a jax.jit step: its update runs no Python the probe can count"),
    "mxnet": ("batches", "a loop over NDArray slices with no gluon.Trainer.step()"),
    "paddle": ("batches", "a static-graph loop, or one with no optimizer.step()"),
    "singa": ("batches", "a loop with no optimizer(loss) call"),
}
_ANY = ("batches", "no framework's loader or optimizer update seen")


def marker_lines(framework: str) -> tuple[str, str]:
    """The import and the loop, for `framework` (any framework's two lines for one the tool does not name)."""
    name = _LOOPS.get(framework, _ANY)[0]
    return (
        f"from {PROBE_MODULE} import {PROBE_MARKER}",
        f"for batch in {PROBE_MARKER}({name}):  # each call is an epoch, each batch a step",
    )


def why_unseen(framework: str) -> str:
    """Why the probe saw no step in a `framework` script, in words."""
    return _LOOPS.get(framework, _ANY)[1]


def marker_advice(framework: str) -> str:
    """One sentence for a verdict's finding: why no step was seen and the two lines to add."""
    first, second = marker_lines(framework)
    return f"no step seen ({why_unseen(framework)}); add the marker: `{first}` and `{second}`"


#: Why a probe's steps carry no data wait (their cells left empty), by the probe that saw them.
WAIT_NOT_SEEN = {
    **dict.fromkeys(Probe.OPTIMIZERS, "the steps were counted from optimizer updates: no batch wait seen"),
    **dict.fromkeys(
        Probe.IN_GRAPH_INPUT,
        "Keras fit read its batches inside its compiled graph, unseen (steps_per_execution > 1, tf.distribute"
        " or Keras 2)",
    ),
}


def wait_not_seen(probes: Sequence[str]) -> str:
    """Why the data wait of steps seen by `probes` is not measured."""
    said = [WAIT_NOT_SEEN[p] for p in probes if p in WAIT_NOT_SEEN]
    return "; ".join(said) if said else "some steps' wait for their batch was not seen"
