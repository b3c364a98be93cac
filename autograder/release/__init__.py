"""Tools that turn the reference solutions into student-facing releases."""
