"""Profiles deep-learning training across frameworks.

Kept free of imports: the worker package below it is imported inside framework interpreters.
"""

__version__ = "0.1.0"
