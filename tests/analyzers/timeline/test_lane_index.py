"""The lanes' zoom index: what a wide view cuts from the raster pyramid must show every segment a pixel
can show (never drop a burst, edges off by at most a fraction of a pixel), and a narrow view is drawn
from the segments themselves."""

from __future__ import annotations

import numpy as np
import pytest

from analyzers.timeline.lane_index import FACTOR, NONE, PER_COLUMN, RASTER_MIN_SEGMENTS, LaneIndex, _raster, fine_bins

LANES, LEVELS = 6, 3


@pytest.fixture(scope="module")
def segments() -> tuple[np.ndarray, ...]:
    """Six lanes of 40 k back-to-back segments each, of random kinds, and a few 1 µs bursts of the top kind."""
    rng = np.random.default_rng(2)
    per_lane = 40_000
    parts = []
    for lane in range(LANES):
        cuts = np.sort(rng.choice(np.arange(1, 10 * per_lane), per_lane, replace=False)) * 0.25
        start, end = np.append(0.0, cuts), np.append(cuts, 10 * per_lane * 0.25)
        parts.append((start, end, np.full(len(start), lane), rng.integers(0, LEVELS - 1, len(start))))
    x0, x1, lane_of, level = (np.concatenate(p) for p in zip(*parts))
    bursts = np.array([1_234.5, 55_555.5, 77_000.25])
    x0 = np.concatenate([x0, bursts])
    x1 = np.concatenate([x1, bursts + 1e-6])
    lane_of = np.concatenate([lane_of, [1, 3, 5]])
    level = np.concatenate([level, [LEVELS - 1] * 3])
    return x0, x1, lane_of, level


@pytest.mark.parametrize(
    "view", [(0.0, 100_000.0), (-5.0, 40_000.0), (1_000.0, 11_000.0), (5_000.0, 5_060.0), (50_000.0, 50_000.5)]
)
def test_raster_matches_the_segments(segments: tuple[np.ndarray, ...], view: tuple[float, float]) -> None:
    x0, x1, lane_of, level = segments
    index = LaneIndex.build(x0, x1, lane_of, level, LANES, LEVELS)
    assert index.rows is not None  # the bursts came last: the index sorted them into their lanes
    v0, v1 = view
    exact = _raster(x0, x1, lane_of, level, LANES, LEVELS, v0, v1, 1200)
    drawn = index.raster(v0, v1, 1200)
    # a raster column may straddle a pixel edge by 1/PER_COLUMN: what one shows is in a neighbour of the other
    assert (drawn <= _near(exact)).all() and (exact <= _near(drawn)).all()
    assert (drawn == exact).mean() > 0.95
    for lane, burst in ((1, 1_234.5), (3, 55_555.5), (5, 77_000.25)):
        if v0 <= burst <= v1:  # a 1 µs burst of the top kind wins its pixel at every zoom
            column = int((burst - v0) / (v1 - v0) * 1200)
            assert (drawn[lane, max(column - 1, 0) : column + 2] == LEVELS - 1).any()


def _near(raster: np.ndarray) -> np.ndarray:
    """Each column's highest level among itself and its two neighbours."""
    padded = np.pad(raster, ((0, 0), (1, 1)), constant_values=NONE)
    return np.maximum(np.maximum(padded[:, :-2], padded[:, 1:-1]), padded[:, 2:])


def test_wide_views_come_from_the_pyramid(segments: tuple[np.ndarray, ...]) -> None:
    x0, x1, lane_of, level = segments
    index = LaneIndex.build(x0, x1, lane_of, level, LANES, LEVELS)
    assert len(index) > RASTER_MIN_SEGMENTS and index.pyramid[0].shape == (LANES, fine_bins(len(index)) + 1)
    for fine, coarse in zip(index.pyramid, index.pyramid[1:]):  # each level the max of FACTOR finer columns
        assert coarse.shape[1] - 1 == (fine.shape[1] - 1) // FACTOR
        assert np.array_equal(coarse[:, :-1], fine[:, :-1].reshape(LANES, -1, FACTOR).max(axis=2))
    span = index.span[1] - index.span[0]
    full = index._pyramid_level(span / 1200)
    assert full is not None and (full.shape[1] - 1) < fine_bins(len(index))  # a full view reads a coarse level
    assert (span / 1200) >= PER_COLUMN * span / (full.shape[1] - 1)
    assert index._pyramid_level(60.0 / 1200) is None  # a minute is drawn from its segments
    assert (index.pyramid[0][:, -1] == NONE).all()


def test_hover_finds_the_callers_row(segments: tuple[np.ndarray, ...]) -> None:
    x0, x1, lane_of, level = segments
    index = LaneIndex.build(x0, x1, lane_of, level, LANES, LEVELS)
    for lane, x in ((3, 55_555.5), (0, 10.0), (5, 99_999.9)):
        row = index.at(lane, x, 1e-7)  # a row in the order the caller gave (the index sorted them)
        assert row is not None and lane_of[row] == lane and x0[row] <= x <= x1[row]
    assert index.at(3, -100.0, 1.0) is None and index.at(LANES, 0.0, 1.0) is None


def test_finer_rasters_for_more_segments() -> None:
    assert fine_bins(RASTER_MIN_SEGMENTS) == FACTOR**7 and fine_bins(70_000) == FACTOR**8
    assert fine_bins(10_000_000) == fine_bins(4_000_000) == FACTOR**10  # the cap: 1 M columns


def test_small_sets_have_no_pyramid() -> None:
    x0 = np.arange(1000, dtype=np.float64)
    index = LaneIndex.build(x0, x0 + 0.5, np.zeros(1000, dtype=np.int64), np.zeros(1000, dtype=np.int64), 1, 1)
    assert index.pyramid == () and index.reach is index.x1  # no overlaps: one array serves both
    assert (index.raster(0.0, 1000.0, 100) == 0).all()
