"""The chi-square test of a sample against the distribution it should follow: the cases grade samples by it, and the
diagnostics name the distribution a failed sample follows instead. Below both, so neither reaches up for it."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np


def chi_square_p_value(transitions: Counter, probs: dict) -> float:
    """p-value of the observed transitions, pooling outcomes expected fewer than 5 times."""
    statistic, dof = 0.0, 0
    for h, dist in probs.items():
        total = sum(c for (hh, _), c in transitions.items() if hh == h)
        observed = np.array([transitions[(h, w)] for w in dist], dtype=float)
        expected = np.array([total * p for p in dist.values()])
        small = expected < 5
        if small.any():
            observed = np.append(observed[~small], observed[small].sum())
            expected = np.append(expected[~small], expected[small].sum())
        keep = expected > 0
        if keep.sum() < 2:
            continue
        statistic += float((((observed - expected) ** 2) / np.where(keep, expected, 1))[keep].sum())
        dof += int(keep.sum()) - 1
    if not dof:
        return 1.0
    # The chi-square survival function is the regularised upper incomplete gamma function Q(dof/2, statistic/2).
    return upper_gamma(dof / 2, statistic / 2)


def upper_gamma(a: float, x: float) -> float:
    """The regularised upper incomplete gamma function Q(a, x) = Γ(a, x) / Γ(a), for a > 0: by the series of the lower
    one below x = a + 1 and by the continued fraction of the upper one above it, where each converges fast. In plain
    Python, so that grading a sample imports no torch (tests/test_chi_square.py: within 1e-11 of mpmath's)."""
    if x <= 0:
        return 1.0
    scale = math.exp(a * math.log(x) - x - math.lgamma(a))  # x^a e^-x / Γ(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-17:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1.0 - total * scale)
    tiny = 1e-300  # Lentz's method: no denominator may be zero
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    fraction = d
    for i in range(1, 1000):
        term = -i * (i - a)
        b += 2
        d = term * d + b
        d = 1 / (d if abs(d) > tiny else tiny)
        c = b + term / c
        c = c if abs(c) > tiny else tiny
        fraction *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return scale * fraction
