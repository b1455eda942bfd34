"""Data generators for the online-learning benchmarks (numpy, seeded, nothing downloaded).

- ``copy_b1``, ``copy_patterns``: the copy tasks of Irie et al. 2024 (App. B.1) and Zucchet et al. 2023 (Sec. 4.1);
- ``listops_batch``, ``generate_expression``, ``evaluate``: ListOps (LRA grammar), generated locally;
- ``flash_parity``: the parity of a count of unmarked flashes (the vector form of examples/odd_or_even.py);
- ``trace_conditioning``, ``trace_patterning``: prediction streams (x(t), cumulant(t)) of Elelimy et al. 2024
  and Javed et al. 2023, with ``discounted_return`` for the true return.

Supervised tasks return a time-major ``SequenceBatch`` (see ``r2ac.tasks.sequence``).
"""

from r2ac.tasks.copy import copy_b1, copy_patterns
from r2ac.tasks.parity import flash_parity
from r2ac.tasks.listops import TOKENS, VOCAB, evaluate, generate_expression, listops_batch
from r2ac.tasks.sequence import SequenceBatch
from r2ac.tasks.trace import (TraceStream, discounted_return, oracle_predictions, trace_conditioning,
                              trace_patterning)

__all__ = [
    "SequenceBatch", "copy_b1", "copy_patterns", "flash_parity", "listops_batch", "generate_expression", "evaluate",
    "TOKENS", "VOCAB", "TraceStream", "discounted_return", "oracle_predictions", "trace_conditioning",
    "trace_patterning",
]
