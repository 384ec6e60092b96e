"""Ingest foreign traces into a run folder's normalised tables (`analyzers.trace.tables`).

`pipeline.ingest_file` reads one trace (nsys .sqlite or Arrow export, .nsys-rep when an `nsys` binary is
found, Kineto .json/.json.gz, or a `raw/cupti/` folder of our CUPTI batches) and writes `<run>/<table>.parquet`
for each table it has; `pipeline.ingest_run` does it for every known trace under `raw/` and then writes the
thread timeline (`analyzers.ingest.threads`: sampler, OS-runtime calls and py-spy in one table). Anything that is
not a readable trace raises `UserError` with one line. Inputs are only ever opened read-only.
When several sources in one run give the same table, their rows are appended, each row carrying
its `source`.
"""
