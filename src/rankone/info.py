"""Information accounting in bits, shared by the trainers (per step) and analysis."""

from __future__ import annotations

import math
from collections import Counter

NATS_TO_BITS = 1 / math.log(2)


def entropy_bits(values) -> float:
    """Entropy of the empirical distribution of `values`: 0 if all equal, 1 for a 50/50 pair."""
    counts = Counter(values)
    n = sum(counts.values())
    return max(0.0, -sum(c / n * math.log2(c / n) for c in counts.values()))
