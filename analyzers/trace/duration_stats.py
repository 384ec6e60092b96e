"""The statistics nsys's *_sum reports give a group of durations, as DuckDB aggregates: declared once for
the summaries over imported tables (`analyzers.summaries.cuda_api.summarise_ranges`) and those straight
from an export (`analyzers.ingest.nsys_summary`), which must give equal rows."""

from __future__ import annotations

STATS = (
    "sum(d) AS total, count(*) AS n, avg(d) AS avg, median(d) AS med, min(d) AS mn, max(d) AS mx, "
    "coalesce(stddev_samp(d), 0) AS sd"
)
"""Over a duration column `d`: total, count, mean, the usual median (the mean of the two middle values
for an even count), min, max and the sample standard deviation (0 for one value)."""
