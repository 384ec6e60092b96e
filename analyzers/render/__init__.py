"""How numbers and runs read: one format per column, sentences that parse, one colour and one label per run."""
