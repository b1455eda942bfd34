"""Cores side by side: ``mix`` runs several exact-RTRL cores on the same input and concatenates their outputs.

    y(t) = [y_1(t); y_2(t); ...],   y_k(t), state_k(t) = core_k(x(t), state_k(t-1))

No part reads another's state, so the network's Jacobian is block-diagonal over the parts and each part's
sensitivities are exactly its own core's: RTRL stays exact (each part applies identities 1 and 2 to its
own state) and costs the sum of the parts' costs. The point is inductive bias: the gated eLSTM keeps a value
for hundreds of steps and shuts out what comes between (the suite of ``r2ac bench memory``), while the
linear complex-diagonal RTU holds a window of recent inputs that a linear read-out can pick any one of
(POPGym's RepeatPrevious); docs/results.md, "Cores side by side".

Options: ``parts``, a list of ``[core, units]`` or ``[core, units, {options}]`` entries whose units add up to
``hidden_size``; default: an eLSTM of ``hidden_size - hidden_size // 2`` units and an RTU of
``hidden_size // 2``. Each part must have exact RTRL (or any core with ``learning="tbptt"``). The state's
keys are the parts' own, prefixed with the part's index (``0_c``, ``1_dc_dW1``, ...).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import torch
from torch import nn

from r2ac.cores.base import RecurrentCore


def _parse_parts(parts, hidden_size: int) -> List[Tuple[str, int, dict]]:
    if parts is None:
        half = hidden_size // 2
        if half < 1:
            raise ValueError(f"core 'mix' needs hidden_size >= 2 for its default parts, got {hidden_size}")
        return [("elstm", hidden_size - half, {}), ("rtu", half, {})]
    if not isinstance(parts, (list, tuple)) or not parts:
        raise ValueError(f"core 'mix': parts must be a non-empty list of [core, units] or [core, units, {{options}}] "
                         f"entries, got {parts!r}")
    out = []
    for entry in parts:
        if not isinstance(entry, (list, tuple)) or len(entry) not in (2, 3):
            raise ValueError(f"core 'mix': each part is [core, units] or [core, units, {{options}}], got {entry!r}")
        name, units = entry[0], entry[1]
        options = dict(entry[2]) if len(entry) == 3 else {}
        if not isinstance(name, str) or name == "mix":
            raise ValueError(f"core 'mix': a part's core must be another core's name, got {name!r}")
        if not isinstance(units, int) or isinstance(units, bool) or units < 1:
            raise ValueError(f"core 'mix': part {name!r} needs a positive number of units, got {units!r}")
        out.append((name, units, options))
    total = sum(u for _, u, _ in out)
    if total != hidden_size:
        raise ValueError(f"core 'mix': the parts' units add up to {total}, but model.hidden_size is {hidden_size}; "
                         f"make them equal")
    return out


class MixCore(RecurrentCore):
    """Exact-RTRL cores side by side (see the module docstring)."""

    name = "mix"
    supports_rtrl = True

    def __init__(self, input_size: int, hidden_size: int, learning: str = "tbptt", parts=None):
        super().__init__(input_size, hidden_size, learning)
        from r2ac.cores import CORES, make_core  # late import: the registry lives in the package

        self.part_specs = _parse_parts(parts, hidden_size)
        cores = []
        for name, units, options in self.part_specs:
            if name not in CORES:
                raise ValueError(f"core 'mix': unknown part {name!r}; available cores: {', '.join(sorted(CORES))}")
            if learning == "rtrl" and not CORES[name].exact_rtrl:
                raise ValueError(f"core 'mix': part {name!r} has approximate RTRL; the mix keeps RTRL exact, so its "
                                 f"parts must be exact-RTRL cores")
            cores.append(make_core(name, input_size, units, learning=learning, **options))
        self.parts = nn.ModuleList(cores)

    @property
    def output_size(self) -> int:
        return sum(p.output_size for p in self.parts)

    @staticmethod
    def _prefixed(i: int, spec: Dict) -> Dict:
        return {f"{i}_{k}": v for k, v in spec.items()}

    def hidden_spec(self):
        spec = {}
        for i, p in enumerate(self.parts):
            spec.update(self._prefixed(i, p.hidden_spec()))
        return spec

    def sensitivity_spec(self):
        spec = {}
        for i, p in enumerate(self.parts):
            spec.update(self._prefixed(i, p.sensitivity_spec()))
        return spec

    def recurrent_parameters(self):
        return [q for p in self.parts for q in getattr(p, "recurrent_parameters", lambda: [])()]

    def project_(self) -> None:
        for p in self.parts:
            p.project_()

    def extra_repr(self) -> str:
        return super().extra_repr() + ", parts=" + ", ".join(f"{n}:{u}" for n, u, _ in self.part_specs)

    def _param_ref(self):
        return self.parts[0]._param_ref()

    def _forward(self, x, state, keep, return_state, sensitivities):
        ys, out = [], {}
        for i, p in enumerate(self.parts):
            prefix = f"{i}_"
            sub = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
            y, st = p._forward(x, sub, keep, return_state, sensitivities)
            ys.append(y)
            if st is not None:
                out.update({prefix + k: v for k, v in st.items()})
        return torch.cat(ys, -1), (out if return_state else None)
