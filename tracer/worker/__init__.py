"""Code that runs inside a framework's interpreter.

It imports only the standard library, NumPy, Pillow and the framework it trains, and keeps to
Python 3.8 syntax, because edge boards and framework environments ship old interpreters.
"""
