"""The trust boundary. `worker/` is what runs beside student code, in its process; `host/` is the grader's side,
which starts, talks to and kills those processes. Nothing in `worker/` may import the grader."""
