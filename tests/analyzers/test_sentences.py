"""Numbers in sentences: units that show the number, shares that are shares."""

from __future__ import annotations

import pytest

from analyzers import sentences as say


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.00119, "1.19 ms"), (0.00085, "850 µs"), (2.5, "2.5 s"), (3e-9, "3 ns"), (-0.0071, "-7.1 ms"), (0, "0 s")],
)
def test_seconds_in_a_unit_that_shows_them(value: float, text: str) -> None:
    assert say.seconds(value) == text


def test_a_pair_shares_the_larger_ones_unit() -> None:
    assert say.seconds_pair(0.000796, 0.00199) == ("0.80 ms", "1.99 ms")
    assert say.seconds_pair(0.0, 0.0000013) == ("0 µs", "1.30 µs")


def test_a_share_is_between_none_and_all_of_its_whole() -> None:
    assert say.share(7.1, 7.6) == pytest.approx(7.1 / 7.6)
    assert say.share(8.0, 7.0) is None  # above its whole: worded otherwise
    assert say.share(-1.0, 7.0) is None  # of the other sign
    assert say.share(1.0, 0.0) is None
    assert [say.percent(x) for x in (0.934, 0.004, 0.0, 1.0)] == ["93 %", "<1 %", "0 %", "100 %"]
    assert say.count(1256.4) == "1,256" and say.ratio(0.8, 2.0) == "2.5x" and say.ratio(0, 1) is None


def test_a_pair_far_apart_shows_neither_as_zero() -> None:
    assert say.seconds_pair(3.15, 0.0008) == ("3.15 s", "800 µs")
    assert say.ratio(0.0008, 3.2) == "4,000x"
