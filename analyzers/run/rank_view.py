"""One rank of a run of several, as a `Run` of its own, in memory (`Run.rank(r)`): nothing is copied or written.

The view is the same folder read through the run's rank column: each trace table (`Run.table`,
`Run.table_file`) and the steps and collectives sample tables hold that rank's rows only
(`analyzers.trace.tables.of_rank`; a table without ranks is rank 0's), and its other sample tables are the
rank's own (its process tree: `ranks/<r>/samples/` for a rank above 0, the run's `samples/` for rank 0). The
record, events and epochs are the run's, read once by the run; the damaged files met are the run's
`problems`. Every summary then reads one rank without knowing of ranks, and what is computed on the view
(`per_run`) is kept in the view's own memo: the rank's phases, summary and lanes, never the run's.

Here is what a view reads differently; `analyzers.run.run.Run` holds one (`Run.rank_of`) and asks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from analyzers.trace import tables as t
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder
from tracer.core.schema import COLLECTIVES_TABLE, RANKS_DIR, STEPS_TABLE

if TYPE_CHECKING:
    import pyarrow as pa

RANKED_SAMPLES = (STEPS_TABLE, COLLECTIVES_TABLE)
"""The sample tables that hold every rank's rows (a RANK column), filtered; the others are each rank's own."""


@dataclass(frozen=True)
class RankOf:
    """Rank `rank` of the run `whole` (a `Run`, whose reads are kept and shared)."""

    whole: RunFolder
    rank: int

    @classmethod
    def of(cls, whole: RunFolder, rank: int) -> RankOf:
        """Rank `rank` of `whole`; an unknown rank is a `UserError` naming the run's ranks."""
        known = [r.rank for r in whole.read_record().rank_infos]
        if rank not in known:
            raise UserError(f"{whole.path.name} has no rank {rank}: its ranks are {', '.join(map(str, known))}")
        return cls(whole, rank)

    def samples(self, name: str) -> pa.Table | None:
        """The rank's sample table `name`: its rows of the steps and collectives, else its own table."""
        if name in RANKED_SAMPLES:
            table = self.whole.samples(name)
            return None if table is None else t.of_rank(table, self.rank)
        if self.rank == 0:
            return self.whole.samples(name)
        return RunFolder(self.whole.path / RANKS_DIR / str(self.rank), self.whole.problems).samples(name)

    def table_file(self, path: Path) -> pa.Buffer:
        """The trace table at `path` (present: its schema checked) with the rank's rows only, as Parquet in
        memory, written as the file was (`pq.write_table`)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        with pq.ParquetFile(path, memory_map=True) as file:
            table = file.read()
        sink = pa.BufferOutputStream()
        pq.write_table(t.of_rank(table, self.rank), sink)
        return sink.getvalue()
