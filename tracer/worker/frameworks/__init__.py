"""One module per framework, each defining `Trainer` (a `tracer.worker.base.Trainer`)."""
