"""Code that runs inside a framework's interpreter.

It imports only the standard library, NumPy, Pillow and the framework it trains, and keeps to
Python 3.6 syntax and calls (vermin checks it: tests/tracer/worker/test_worker_syntax.py), because
SINGA's only wheel and edge boards (JetPack 4) ship Python 3.6.
"""
