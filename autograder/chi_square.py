"""The chi-square test of a sample against the distribution it should follow: the cases grade samples by it, and the
diagnostics name the distribution a failed sample follows instead. Below both, so neither reaches up for it."""
from __future__ import annotations

from collections import Counter

import numpy as np
import torch


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
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64), torch.tensor(statistic / 2, dtype=torch.float64)))
