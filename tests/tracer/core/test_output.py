"""The one table writer (`tracer.core.output.write_csv`): a header, then rows, each cell through `csv_cell`."""

from __future__ import annotations

import csv
from pathlib import Path

from tracer.core.output import csv_cell, write_csv


def test_cells_read_back_as_written(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "t.csv", "--csv", ["name", "value", "count"], [["a", 0.1 + 0.2, 3], ["b", None, 0]])
    assert path.read_bytes() == b"name,value,count\r\na,0.3,3\r\nb,,0\r\n"
    with path.open(newline="") as f:
        assert list(csv.reader(f))[1] == ["a", "0.3", "3"]
    assert csv_cell(1.0) == "1" and csv_cell(True) is True and csv_cell("x") == "x"


def test_a_second_write_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    write_csv(path, "--csv", ["a"], [[1], [2]])
    write_csv(path, "--csv", ["a"], [])
    assert path.read_bytes() == b"a\r\n"
