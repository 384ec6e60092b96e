"""The input-pipeline knobs told to a user's command fit its pipeline as the probe read it (issue 52):
no `num_parallel_calls` for a tf.data pipeline without a `map`, no prefetch where it has one."""

from __future__ import annotations

from analyzers.diagnosis.knobs import command_input_knobs
from tracer.core.schema import Probe


def read(probe: str, **knobs: object) -> dict[str, object]:
    return {f"{probe}.{k}": v for k, v in knobs.items()}


def test_a_pipeline_without_a_map_is_not_told_num_parallel_calls() -> None:
    advice = command_input_knobs([Probe.TF_DATA], read(Probe.TF_DATA, map=False, parallel_map=False, prefetch=False))
    assert "num_parallel_calls" not in advice and ".prefetch(tf.data.AUTOTUNE)" in advice


def test_a_map_one_call_at_a_time_is_told_to_run_in_parallel_and_a_present_prefetch_is_not_repeated() -> None:
    knobs = read(Probe.KERAS_FIT, map=True, parallel_map=False, prefetch=True, cache=False)
    advice = command_input_knobs([Probe.KERAS_FIT], knobs)
    assert "num_parallel_calls" in advice and ".prefetch" not in advice


def test_a_pipeline_read_before_this_knob_existed_keeps_the_general_advice() -> None:
    advice = command_input_knobs([Probe.TF_DATA], read(Probe.TF_DATA, prefetch=True, parallel_map=False))
    assert "num_parallel_calls" in advice  # no `map` knob read: the probe could not say
