"""Copy tasks (numpy, seeded).

``copy_b1`` — the copy task of Irie et al. 2024 (App. B.1). A sequence of length 2L: L binary symbols,
then L '#' markers; during the '#' part the target is the stored pattern, symbol by symbol (target at step
L + j = symbol j). Inputs are one-hot over {0, 1, #} (3 features, straight into the core as in the paper).
``min_length``..``max_length`` (= l) set the pattern lengths L; the paper trains on all total lengths
2..2l, i.e. L uniform in 1..l (per sequence; shorter sequences are padded at the end).

``copy_patterns`` — the copy task of Zucchet et al. 2023 (Sec. 4.1): ``n_patterns`` (20) random
``bits``-bit (7) patterns, one per step, then ``delay`` (the paper's "padding", 7; we read it as blank
steps before the recall) blank steps, then ``n_patterns`` recall steps on which an output-token channel
is 1 and the target is the stored sequence of patterns (per-bit binary targets; the paper's training loss
is the per-bit binary cross-entropy, ~0.693 at chance, "solved" below 0.05). Inputs: ``bits`` data
features + 1 output-token feature.
"""

from __future__ import annotations

import numpy as np

from r2ac.tasks.sequence import SequenceBatch, as_rng


def copy_b1(batch: int, max_length: int, rng=None, min_length: int = 1) -> SequenceBatch:
    """The copy task of Irie et al. 2024 (App. B.1): patterns of length L ~ U{min_length..max_length};
    T = 2 * max_length."""
    if not 1 <= min_length <= max_length:
        raise ValueError(f"need 1 <= min_length <= max_length, got {min_length}, {max_length}")
    rng = as_rng(rng)
    T = 2 * max_length
    L = rng.integers(min_length, max_length + 1, size=batch)
    sym = rng.integers(0, 2, size=(max_length, batch))
    x = np.zeros((T, batch, 3), np.float32)
    y = np.zeros((T, batch), np.int64)
    mask = np.zeros((T, batch), bool)
    for b in range(batch):
        n = int(L[b])
        x[np.arange(n), b, sym[:n, b]] = 1.0  # the pattern, one-hot symbols 0/1
        x[n:2 * n, b, 2] = 1.0  # the '#' markers
        y[n:2 * n, b] = sym[:n, b]
        mask[n:2 * n, b] = True
    return SequenceBatch(x=x, y=y, mask=mask, lengths=2 * L.astype(np.int64), kind="class", n_classes=2)


def copy_patterns(batch: int, rng=None, n_patterns: int = 20, bits: int = 7, delay: int = 7) -> SequenceBatch:
    """The copy task of Zucchet et al. 2023: store ``n_patterns`` ``bits``-bit patterns, wait ``delay`` steps,
    recall them."""
    if n_patterns < 1 or bits < 1 or delay < 0:
        raise ValueError("need n_patterns >= 1, bits >= 1, delay >= 0")
    rng = as_rng(rng)
    T = 2 * n_patterns + delay
    pat = rng.integers(0, 2, size=(n_patterns, batch, bits)).astype(np.float32)
    x = np.zeros((T, batch, bits + 1), np.float32)
    x[:n_patterns, :, :bits] = pat
    recall = slice(n_patterns + delay, T)
    x[recall, :, bits] = 1.0  # the output token
    y = np.zeros((T, batch, bits), np.float32)
    y[recall] = pat
    mask = np.zeros((T, batch), bool)
    mask[recall] = True
    return SequenceBatch(x=x, y=y, mask=mask, lengths=np.full(batch, T, np.int64), kind="bits", n_classes=bits)
