"""The contract every recurrent core follows.

    core  = make_core(name, input_size, hidden_size, learning="rtrl" | "tbptt", **options)
    state = core.initial_state(batch_size)              # dict of tensors, batch-first
    y, state = core(x, state, reset)                    # x [T, B, D]; reset [T, B] bool
    y, _     = core(x, state, reset, return_state=False)
    y, hidden = core(x, state, reset, sensitivities=False)   # actors: advance the hidden state only

``state`` is a flat ``dict[str, Tensor]`` whose tensors all have the batch as their first dimension, so it
can be sliced per environment, concatenated into batches, pickled and sent between processes. Its keys
split into ``core.hidden_keys`` (the recurrent state: 1 or 2 numbers per unit, or (h, c) for an LSTM) and
``core.sensitivity_keys`` (RTRL only: d state / d recurrent parameters, shaped ``[B, *unit_state, *param_tail]``;
one entry per recurrent parameter, except where one parameter's sensitivity is a fixed map of another's
and is not stored: the linear RTU's dc/dW2 = i dc/dW1, the LRU's B_im). Its size never depends on the segment length.

``reset[t, b]`` True means a new episode starts at step t for sample b: the state (and the
sensitivities) are zeroed before step t is processed.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
from torch import Tensor, nn

State = Dict[str, Tensor]

LEARNING_MODES = ("rtrl", "tbptt")


class RecurrentCore(nn.Module):
    """Base class: input checks, state construction and the forward contract."""

    #: registry name, set by subclasses
    name: str = ""
    #: whether RTRL (learning="rtrl") is available for this core
    supports_rtrl: bool = False
    #: False for cores whose "rtrl" is a documented approximation (e.g. SnAp-1)
    exact_rtrl: bool = True

    def __init__(self, input_size: int, hidden_size: int, learning: str = "tbptt"):
        super().__init__()
        if not isinstance(input_size, int) or input_size <= 0:
            raise ValueError(f"input_size must be a positive int, got {input_size!r}")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"hidden_size must be a positive int, got {hidden_size!r}")
        if learning not in LEARNING_MODES:
            raise ValueError(f"learning must be one of {LEARNING_MODES}, got {learning!r}")
        if learning == "rtrl" and not self.supports_rtrl:
            from r2ac.cores import rtrl_cores  # late import: registry lives in the package

            raise ValueError(
                f"core {self.name!r} has no tractable RTRL; use learning='tbptt', or one of the cores "
                f"with RTRL: {', '.join(rtrl_cores())}"
            )
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.learning = learning

    # -- what subclasses describe -------------------------------------------------------------
    @property
    def output_size(self) -> int:
        return self.hidden_size

    def hidden_spec(self) -> Dict[str, Tuple[int, ...]]:
        """Per-sample shapes of the hidden-state tensors."""
        raise NotImplementedError

    def sensitivity_spec(self) -> Dict[str, Tuple[int, ...]]:
        """Per-sample shapes of the RTRL sensitivity tensors (empty unless learning == 'rtrl')."""
        return {}

    def _forward(self, x: Tensor, state: State, keep: Tensor, return_state: bool, sensitivities: bool):
        raise NotImplementedError

    def project_(self) -> None:
        """Called by the learners after every optimizer step: a core that constrains its weights (the
        eLSTM's ``contractive`` option) moves them back into the allowed set here. Default: nothing."""

    # -- shared machinery ---------------------------------------------------------------------
    @property
    def hidden_keys(self) -> Tuple[str, ...]:
        return tuple(self.hidden_spec())

    @property
    def sensitivity_keys(self) -> Tuple[str, ...]:
        return tuple(self.sensitivity_spec()) if self.learning == "rtrl" else ()

    def state_spec(self, sensitivities: bool = True) -> Dict[str, Tuple[int, ...]]:
        spec = dict(self.hidden_spec())
        if sensitivities and self.learning == "rtrl":
            spec.update(self.sensitivity_spec())
        return spec

    def _param_ref(self) -> Optional[Tensor]:
        return next(iter(self.parameters()), None)

    def initial_state(self, batch_size: int, device=None, dtype=None, sensitivities: bool = True) -> State:
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        ref = self._param_ref()
        device = device if device is not None else (ref.device if ref is not None else "cpu")
        dtype = dtype if dtype is not None else (ref.dtype if ref is not None else torch.float32)
        return {
            k: torch.zeros((batch_size,) + shape, device=device, dtype=dtype)
            for k, shape in self.state_spec(sensitivities).items()
        }

    def forward(self, x: Tensor, state: State, reset: Tensor, return_state: bool = True,
                sensitivities: bool = True):
        """Run T steps. Returns ``(y [T, B, output_size], next_state or None)``.

        ``sensitivities=False`` (actors between trajectory boundaries) advances the hidden state only and
        returns a hidden-only state; re-running the whole trajectory from its start state with
        ``sensitivities=True`` transports the sensitivities to its end in one batched matmul.
        """
        self._check_inputs(x, state, reset, need_sensitivities=sensitivities)
        keep = (~reset).to(x.dtype)
        return self._forward(x, state, keep, return_state, sensitivities and self.learning == "rtrl")

    def extra_repr(self) -> str:
        return f"input_size={self.input_size}, hidden_size={self.hidden_size}, learning={self.learning!r}"

    # -- input validation (shape/dtype/device metadata only: no device sync) ------------------
    def _specs(self):
        """(full state spec, hidden spec, their key sets), built once per learning mode: the shapes follow
        from the sizes and options fixed at construction, and every forward call checks against them."""
        cache = self.__dict__.setdefault("_spec_cache", {})
        if self.learning not in cache:
            full, hidden = self.state_spec(sensitivities=True), dict(self.hidden_spec())
            cache[self.learning] = (full, hidden, frozenset(full), frozenset(hidden))
        return cache[self.learning]

    def _check_inputs(self, x, state, reset, need_sensitivities: bool) -> None:
        who = f"core {self.name!r} (learning={self.learning!r})"
        if not isinstance(x, Tensor):
            raise TypeError(f"x must be a torch.Tensor [T, B, {self.input_size}], got {type(x).__name__}")
        if x.dim() != 3:
            raise ValueError(
                f"x must have shape [T, B, {self.input_size}] (time-major), got shape {tuple(x.shape)}; "
                "add a time dimension with x.unsqueeze(0) for a single step"
            )
        T, B, D = x.shape
        if D != self.input_size:
            raise ValueError(f"x has feature size {D}, but {who} was built with input_size={self.input_size}")
        if not x.is_floating_point():
            raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
        ref = self._param_ref()
        if ref is not None:
            if x.dtype != ref.dtype:
                raise TypeError(
                    f"x has dtype {x.dtype} but the core's parameters are {ref.dtype}; "
                    f"convert with x.to({ref.dtype}) or core.to({x.dtype})"
                )
            if x.device != ref.device:
                raise ValueError(
                    f"x is on {x.device} but the core's parameters are on {ref.device}; move one of them"
                )
        if not isinstance(reset, Tensor):
            raise TypeError(f"reset must be a bool torch.Tensor [T, B], got {type(reset).__name__}")
        if reset.dtype != torch.bool:
            raise TypeError(f"reset must have dtype torch.bool, got {reset.dtype}; use reset.bool()")
        if tuple(reset.shape) != (T, B):
            raise ValueError(f"reset must have shape [T, B] = {(T, B)} like x, got {tuple(reset.shape)}")
        if reset.device != x.device:
            raise ValueError(f"reset is on {reset.device} but x is on {x.device}")
        if not isinstance(state, dict):
            raise TypeError(f"state must be the dict returned by core.initial_state(), got {type(state).__name__}")
        full, hidden, full_keys, hidden_keys = self._specs()
        keys = set(state)
        if need_sensitivities and self.learning == "rtrl":
            if keys != full_keys:
                if keys == hidden_keys:
                    raise ValueError(
                        f"state holds no RTRL sensitivities ({sorted(full.keys() - keys)} missing): "
                        f"it came from a call with sensitivities=False; pass the trajectory-start state, or "
                        f"call with sensitivities=False"
                    )
                raise ValueError(
                    f"state has keys {sorted(keys)}, but {who} expects {sorted(full)}: it was made by "
                    f"another core or learning mode; use core.initial_state(batch_size)"
                )
        elif not hidden_keys <= keys or not keys <= full_keys:
            raise ValueError(
                f"state has keys {sorted(keys)}, but {who} expects {sorted(hidden)}"
                + (f" (plus {sorted(full.keys() - hidden.keys())})" if full.keys() - hidden.keys() else "")
                + ": it was made by another core or learning mode; use core.initial_state(batch_size)"
            )
        for k in keys:
            v = state[k]
            if not isinstance(v, Tensor):
                raise TypeError(f"state[{k!r}] must be a tensor, got {type(v).__name__}")
            want = (B,) + full[k]
            if tuple(v.shape) != want:
                if v.dim() >= 1 and tuple(v.shape[1:]) == full[k]:
                    raise ValueError(
                        f"state[{k!r}] is for batch size {v.shape[0]}, but x has batch size {B}; "
                        f"use core.initial_state({B})"
                    )
                raise ValueError(f"state[{k!r}] has shape {tuple(v.shape)}, expected {want} for {who}")
            if v.dtype != x.dtype:
                raise TypeError(f"state[{k!r}] has dtype {v.dtype}, expected {x.dtype} like x")
            if v.device != x.device:
                raise ValueError(f"state[{k!r}] is on {v.device} but x is on {x.device}")


def detach_state(state: State) -> State:
    return {k: v.detach() for k, v in state.items()}


def select_state(state: State, keys) -> State:
    return {k: state[k] for k in keys}
