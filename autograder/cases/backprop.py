"""Cases for component `backprop` (backprop.py)."""
