"""Recurrent cores with one contract (see ``r2ac.cores.base``) and the registry ``make_core``."""

from __future__ import annotations

import inspect
from typing import Dict, List, Type

from r2ac.cores.base import LEARNING_MODES, RecurrentCore, State, detach_state
from r2ac.cores.columnar import CCN, Columnar, Constructive
from r2ac.cores.elstm import ELSTM
from r2ac.cores.fwp import FastWeights
from r2ac.cores.lru import LRU
from r2ac.cores.mix import MixCore
from r2ac.cores.rtu import RTU
from r2ac.cores.snap import FELSTMSnAp1
from r2ac.cores.standard import FeedForwardCore, FELSTMCore, GRUCore, LSTMCore

CORES: Dict[str, Type[RecurrentCore]] = {
    cls.name: cls for cls in (ELSTM, RTU, LRU, MixCore, Columnar, CCN, Constructive, FastWeights, FELSTMSnAp1,
                              FELSTMCore, LSTMCore, GRUCore, FeedForwardCore)
}


def rtrl_cores(exact_only: bool = False) -> List[str]:
    """Names of the cores that support ``learning='rtrl'`` (exact RTRL only with ``exact_only``)."""
    return sorted(n for n, c in CORES.items() if c.supports_rtrl and (c.exact_rtrl or not exact_only))


def core_options(name: str) -> List[str]:
    cls = CORES[name]
    params = list(inspect.signature(cls.__init__).parameters)
    return [p for p in params if p not in ("self", "input_size", "hidden_size", "learning")]


def make_core(name: str, input_size: int, hidden_size: int, learning: str = "tbptt", **options) -> RecurrentCore:
    """Build a recurrent core by name. ``learning`` is ``"rtrl"`` (exact, untruncated gradients; only the
    cores listed by ``rtrl_cores()``) or ``"tbptt"`` (gradients stop at the segment start)."""
    if name not in CORES:
        raise ValueError(f"unknown core {name!r}; available cores: {', '.join(sorted(CORES))}")
    if learning not in LEARNING_MODES:
        raise ValueError(f"learning must be one of {LEARNING_MODES}, got {learning!r}")
    allowed = core_options(name)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(
            f"unknown option(s) {unknown} for core {name!r}; its options are: {allowed or 'none'} (in a config: "
            "model.core_options, which keeps the file's options when model.core is swapped; replace them, e.g. "
            "model.core_options={})"
        )
    return CORES[name](input_size, hidden_size, learning=learning, **options)


__all__ = ["CORES", "RecurrentCore", "State", "detach_state", "make_core", "rtrl_cores", "core_options"]
