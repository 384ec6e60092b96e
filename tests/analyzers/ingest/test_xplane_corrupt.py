"""A corrupt XPlane profile is called corrupt, not "no trace found": a real one written by jax.profiler imports;
the same file cut short, and bytes that are no protobuf, are refused with one line naming the damage (exit 2)."""

from __future__ import annotations

from pathlib import Path

from tests.analyzers.ingest.test_imports import _profile
from tests.conftest import run_tracer


def test_a_damaged_xplane_is_called_corrupt(tmp_path: Path) -> None:
    (real,) = _profile("jax", tmp_path / "jaxlog").rglob("*.xplane.pb")
    assert run_tracer("import", str(real), "--out", str(tmp_path / "runs")).returncode == 0
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(real.read_bytes()[: real.stat().st_size // 2])
    noise = tmp_path / "noise.xplane.pb"
    noise.write_bytes(bytes(range(256)) * 8)
    for damaged, said in ((cut, "truncated?"), (noise, "is no protobuf field")):
        done = run_tracer("import", str(damaged), "--out", str(tmp_path / "runs"))
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "corrupt XPlane profile" in done.stderr and said in done.stderr, done.stderr
        assert "no trace" not in done.stderr
