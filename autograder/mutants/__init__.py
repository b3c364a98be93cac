"""Mutants of the reference: the edits students make (edits.py), and the failed cases they explain (match.py)."""

# What follows a mutant's sentence in a message: the evidence for it, which the class report also tells it by.
EVIDENCE = "The reference with"
