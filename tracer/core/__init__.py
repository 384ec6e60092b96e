"""The run-folder data model: run options, records, schemas, reading and writing a folder. Knows nothing else."""
