"""The worker's side: copied into each worker's scratch folder and run there as `python -I worker.py`, so its
modules import one another as top-level modules and nothing else of the grader's (wire.py is shared with the host)."""
