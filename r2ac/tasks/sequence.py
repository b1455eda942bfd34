"""The batch format shared by the supervised sequence tasks.

A ``SequenceBatch`` is time-major, numpy, padded at the end:

- ``x`` [T, B, D] float32 inputs (zeros after a sequence's end),
- ``y`` [T, B] int64 class targets (``kind="class"``) or [T, B, K] float32 bit targets (``kind="bits"``),
- ``mask`` [T, B] bool: True where step t of sequence b carries a target (the loss and the accuracy count
  only those entries),
- ``lengths`` [B] int64: the number of real (unpadded) steps of each sequence.

Padding sits after the end of every sequence, so a causal model's outputs on the real steps do not depend on
it; the learners simply run through it with the mask at zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SequenceBatch:
    x: np.ndarray
    y: np.ndarray
    mask: np.ndarray
    lengths: np.ndarray
    kind: str  # "class" or "bits"
    n_classes: int  # classes (kind="class") or bits per step (kind="bits")

    def __post_init__(self):
        if self.kind not in ("class", "bits"):
            raise ValueError(f"kind must be 'class' or 'bits', got {self.kind!r}")
        T, B = self.x.shape[:2]
        if self.mask.shape != (T, B) or self.y.shape[:2] != (T, B) or self.lengths.shape != (B,):
            raise ValueError("x, y, mask, lengths disagree on [T, B]")

    @property
    def T(self) -> int:
        return self.x.shape[0]

    @property
    def B(self) -> int:
        return self.x.shape[1]

    @property
    def input_size(self) -> int:
        return self.x.shape[2]

    @property
    def output_size(self) -> int:
        return self.n_classes


def as_rng(rng) -> np.random.Generator:
    """An int seed, None or a Generator -> a Generator."""
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
