"""Turn run folders and traces into tables, summaries and charts (no Qt here)."""
