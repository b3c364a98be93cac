"""Grades language-model assignments against hidden references, in a sandbox."""
__version__ = "0.2.0"
