"""The grader's side of the boundary: isolation tiers, starting and killing workers, the proxies checks call through."""
