"""One run, read once: the lowest layer of the analyzers, above the trace tables only.

`analyzers.run.run.Run` is what every analysis takes: the record and what was run (`workload`, `ranks`),
the events and epochs, the sample and trace tables (`samples(name, columns)`, `table(name, columns)`), the
damaged files met (`problems`) and a memo. Every analysis is a typed function of a `Run`; one that more than
one consumer asks for is decorated with `analyzers.run.memo.per_run`, so it is computed once per run (and
warm-up) whoever asks. Ranks are in-memory views of their run (`Run.rank`).

This package module is kept free of Arrow: the light parts of the analyzers (phase names, `analyze FILE`
of an SQLite export) read the warm-up default from here without loading a table library.
"""

WARMUP_EPOCHS = 1  # leading epochs left out of the steady state unless a caller declares another number
