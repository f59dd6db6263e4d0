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


def bits_stored(dataset_bits, final_nll_bits):
    """What a table holds minus what the model is still unsure of (total train NLL, bits), at
    least 0. The NLL drop from the base model (bits absorbed) also counts what the base model
    had to unlearn about the format, so it can exceed the table's bits. Works on pandas Series."""
    return (dataset_bits - final_nll_bits).clip(lower=0)
