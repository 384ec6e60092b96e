"""Turn run folders and traces into tables, summaries and charts (no Qt here).

Packages, top down (import-linter holds the order; `a | b` are side by side): report, run (the `Run`
every consumer starts from), diagnosis, comparison | timeline, summaries | render, figures | ingest,
trace."""
