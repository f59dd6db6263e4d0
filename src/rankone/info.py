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


def bits_recalled(n_facts: int, symbols: int, accuracy: float) -> float:
    """What greedy recall at `accuracy` tells about a table of `n_facts` uniform facts of `symbols`
    values each: n x (log2 S - H(a) - (1 - a) log2(S - 1)), at least 0. Fano's bound: exact when
    the wrong answers spread evenly over the other values, a lower bound otherwise. Unlike bits
    stored, it does not charge a fact the policy answers wrong with certainty its whole NLL."""
    a = min(max(accuracy, 0.0), 1.0)
    h = -sum(p * math.log2(p) for p in (a, 1 - a) if p > 0)
    per_fact = math.log2(symbols) - h - (1 - a) * math.log2(symbols - 1)
    return n_facts * max(0.0, per_fact)
