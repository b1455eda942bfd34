"""The parity of a count of unmarked events, as a supervised sequence task (numpy, seeded).

``flash_parity``: a sequence of ``span + 1`` steps with three inputs, (start, flash, query). The start input
is 1 at step 0; the flash input is 1 at 1..``max_count`` distinct steps drawn at random among steps
0..span-1 (the count drawn uniformly); the query input is 1 at the last step, where the one target is the
count's parity (class 1: odd, 0: even). The vector form of ``examples/odd_or_even.py`` (a user task the RL
agent's defaults did not solve at span 150, docs/results.md): supervised, with the exact gradient, it says
whether a recurrent core can learn the parity at all, apart from the policy gradient's credit.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from r2ac.tasks.sequence import SequenceBatch, as_rng

START, FLASH, QUERY = 0, 1, 2


def flash_parity(batch: int, span: int = 150, max_count: int = 6, rng=None,
                 count: Optional[int] = None) -> SequenceBatch:
    """``batch`` sequences of the flash-parity task; ``count`` fixes every sequence's number of flashes."""
    if span < 1 or not 1 <= max_count <= span:
        raise ValueError(f"need span >= 1 and 1 <= max_count <= span, got span={span}, max_count={max_count}")
    if count is not None and not 1 <= count <= span:
        raise ValueError(f"count must be in 1..span ({span}), got {count}")
    rng = as_rng(rng)
    T = span + 1
    counts = np.full(batch, count) if count is not None else rng.integers(1, max_count + 1, size=batch)
    x = np.zeros((T, batch, 3), np.float32)
    x[0, :, START] = 1.0
    x[span, :, QUERY] = 1.0
    for b in range(batch):
        x[rng.choice(span, size=int(counts[b]), replace=False), b, FLASH] = 1.0
    y = np.zeros((T, batch), np.int64)
    y[span] = counts % 2
    mask = np.zeros((T, batch), bool)
    mask[span] = True
    return SequenceBatch(x=x, y=y, mask=mask, lengths=np.full(batch, T, np.int64), kind="class", n_classes=2)
