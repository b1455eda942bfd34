"""Supervised sequence learning with a recurrent core: BPTT, truncated BPTT, and RTRL in segments or fully
online (one update per step).

Model: [optional linear encoder] -> core -> linear readout (``SequenceModel``). The learner
(``SequenceLearner``) computes, for a batch of sequences (``r2ac.tasks.SequenceBatch``), one of these
gradient estimates of the summed per-step loss, and applies Adam updates:

====================  ======================  ==========================================================
mode                  core learning           gradient
====================  ======================  ==========================================================
``bptt``              any                     full-sequence backprop (one segment)
``tbptt``             ``tbptt``               segments of ``k`` steps, state detached in between
``rtrl-segment``      ``rtrl``                segments of ``k`` steps, the carried state holds the RTRL
                                              sensitivities: identity 1 makes the summed segment gradients
                                              the exact full gradient (for exact-RTRL cores)
``rtrl-online``       ``rtrl``                ``rtrl-segment`` with k = 1
``spatial``           ``tbptt``               ``tbptt`` with k = 1: every step's loss reaches only the same
                                              step's computation (h(t-1) is a constant): "spatial" /
                                              instantaneous backprop (Zucchet et al. 2023)
``truncated``         ``tbptt``               per step, the loss of step t backpropagated ``k`` steps back
                                              (a sliding window re-run from the detached state at t-k):
                                              Zucchet et al.'s "1-step truncated" is k = 1
====================  ======================  ==========================================================

``update``: ``"segment"`` (default) applies an optimizer step after every segment (every step for
``rtrl-online``/``spatial``/``truncated``) — online learning; the carried RTRL sensitivities then belong to
older weights, the usual RTRL online approximation. ``"sequence"`` accumulates the segment gradients over
the batch and applies one step at the end — only the gradient *estimate* differs between modes (Zucchet et al.'s
comparison). Loss normalisation: with ``update="sequence"`` each segment's summed loss is divided by the
number of targets in the whole batch, so the accumulated gradient is that of the batch mean loss (the
``rtrl-segment`` / ``bptt`` identity); with ``update="segment"`` by the number of targets in the segment
(a per-segment mean; segments without targets are not learned from).

Loss: cross-entropy for class targets, per-bit binary cross-entropy for bit targets (``SequenceBatch.kind``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as Fn
from torch import Tensor, nn

from r2ac.cores import make_core
from r2ac.online.common import require_core
from r2ac.tasks.sequence import SequenceBatch

MODES = ("bptt", "tbptt", "rtrl-segment", "rtrl-online", "spatial", "truncated")
UPDATES = ("segment", "sequence")


def core_learning_for(mode: str) -> str:
    """The core ``learning`` a mode needs (``bptt`` works with either; we build it as ``tbptt``)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return "rtrl" if mode.startswith("rtrl") else "tbptt"


class SequenceModel(nn.Module):
    """[encoder: Linear(input_size, encoder_size)] -> core -> readout: Linear(core.output_size, output_size)."""

    def __init__(self, core: str, input_size: int, hidden_size: int, output_size: int, learning: str = "tbptt",
                 encoder_size: Optional[int] = None, **core_options):
        super().__init__()
        require_core(core, learning)
        self.encoder = nn.Linear(input_size, encoder_size) if encoder_size else None
        self.core = make_core(core, encoder_size or input_size, hidden_size, learning=learning, **core_options)
        self.readout = nn.Linear(self.core.output_size, output_size)

    def initial_state(self, batch_size: int):
        return self.core.initial_state(batch_size)

    def forward(self, x: Tensor, state, reset: Tensor, return_state: bool = True):
        u = self.encoder(x) if self.encoder is not None else x
        h, state = self.core(u, state, reset, return_state=return_state)
        return self.readout(h), state


def build_model(core: str, batch_or_sizes, hidden_size: int, mode: str, encoder_size: Optional[int] = None,
                seed: Optional[int] = None, **core_options) -> SequenceModel:
    """A ``SequenceModel`` whose core learns as ``mode`` needs. ``batch_or_sizes``: a ``SequenceBatch`` or
    (input_size, output_size). ``seed`` seeds the initialisation (same seed -> same weights in any mode)."""
    if isinstance(batch_or_sizes, SequenceBatch):
        sizes = (batch_or_sizes.input_size, batch_or_sizes.output_size)
    else:
        sizes = tuple(batch_or_sizes)
    if seed is not None:
        torch.manual_seed(seed)
    return SequenceModel(core, sizes[0], hidden_size, sizes[1], learning=core_learning_for(mode),
                         encoder_size=encoder_size, **core_options)


@dataclass
class Tensors:
    x: Tensor
    y: Tensor
    mask: Tensor
    kind: str

    @property
    def n_targets(self) -> int:
        per = self.y.shape[-1] if self.kind == "bits" else 1
        return int(self.mask.sum()) * per


def to_tensors(batch: SequenceBatch, dtype=torch.float32, device="cpu") -> Tensors:
    y = torch.as_tensor(batch.y, device=device)
    return Tensors(x=torch.as_tensor(batch.x, device=device).to(dtype),
                   y=y.to(dtype) if batch.kind == "bits" else y.long(),
                   mask=torch.as_tensor(batch.mask, device=device), kind=batch.kind)


def summed_loss(logits: Tensor, y: Tensor, mask: Tensor, kind: str) -> Tuple[Tensor, int]:
    """Sum over the masked targets of the per-target loss, and their number."""
    m = mask.to(logits.dtype)
    if kind == "class":
        ce = Fn.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(mask.shape)
        return (ce * m).sum(), int(mask.sum())
    bce = Fn.binary_cross_entropy_with_logits(logits, y, reduction="none")
    return (bce * m[..., None]).sum(), int(mask.sum()) * y.shape[-1]


def segments(T: int, k: int) -> Iterator[Tuple[int, int]]:
    for s in range(0, T, k):
        yield s, min(s + k, T)


class SequenceLearner:
    """Trains a ``SequenceModel`` on batches of sequences with one of ``MODES`` (see the module doc).

    Defaults follow Irie et al. 2024, App. B.1 where the papers state them: Adam, gradient-norm clipping at 1.0.
    ``amsgrad``: AMSGrad's steps (the RL learners' default, ``learner.adam_amsgrad``).
    """

    def __init__(self, model: SequenceModel, mode: str, k: int = 1, lr: float = 1e-3, clip: Optional[float] = 1.0,
                 update: str = "segment", betas=(0.9, 0.999), eps: float = 1e-8, amsgrad: bool = False):
        need = core_learning_for(mode)
        if mode != "bptt" and model.core.learning != need:
            raise ValueError(f"mode {mode!r} needs a core with learning={need!r}, got {model.core.learning!r} "
                             f"(build the model with build_model(..., mode={mode!r}))")
        if update not in UPDATES:
            raise ValueError(f"update must be one of {UPDATES}, got {update!r}")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        self.model, self.mode, self.update, self.clip = model, mode, update, clip
        self.k = 1 if mode in ("rtrl-online", "spatial") else k
        self.opt = torch.optim.Adam(model.parameters(), lr=lr, betas=betas, eps=eps, amsgrad=amsgrad)
        self.updates = 0

    # -- gradients -----------------------------------------------------------------------------------
    def _dtype(self):
        return next(self.model.parameters()).dtype

    def _step(self) -> None:
        if self.clip is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.opt.step()
        self.model.core.project_()
        self.opt.zero_grad(set_to_none=True)
        self.updates += 1

    def _backward(self, loss_sum: Tensor, n: int, total: int, learn: bool) -> None:
        if n == 0:
            return
        per_segment = learn and self.update == "segment"
        (loss_sum / (n if per_segment else total)).backward()
        if per_segment:
            self._step()

    def run_batch(self, batch, learn: bool = True) -> float:
        """Forward/backward over a batch in this learner's mode. With ``learn``: apply the updates
        (per segment or once at the end, see ``update``); without: leave the accumulated gradient of the
        batch mean loss in ``.grad`` (``update="sequence"`` normalisation) and change no weight. Returns
        the batch mean loss."""
        t = batch if isinstance(batch, Tensors) else to_tensors(batch, self._dtype())
        T, B = t.mask.shape
        total = t.n_targets
        model = self.model
        reset = torch.zeros(T, B, dtype=torch.bool, device=t.x.device)
        state = model.initial_state(B)
        loss_total = 0.0
        if not learn or self.update == "sequence":
            self.opt.zero_grad(set_to_none=True)
        if self.mode == "truncated":
            states = [state]  # states[s] = the (detached) state before step s
            for s in range(T):
                lo = max(0, s - self.k)
                out, _ = model(t.x[lo:s + 1], states[lo], reset[lo:s + 1], return_state=False)
                loss, n = summed_loss(out[-1:], t.y[s:s + 1], t.mask[s:s + 1], t.kind)
                loss_total += float(loss.detach())
                self._backward(loss, n, total, learn)
                with torch.no_grad():
                    states.append(model(t.x[s:s + 1], states[s], reset[s:s + 1])[1])
                if lo > 0:
                    states[lo - 1] = None  # no longer needed
        else:
            k = T if self.mode == "bptt" else self.k
            for s, e in segments(T, k):
                out, state = model(t.x[s:e], state, reset[s:e])
                loss, n = summed_loss(out, t.y[s:e], t.mask[s:e], t.kind)
                loss_total += float(loss.detach())
                self._backward(loss, n, total, learn)
        if learn and self.update == "sequence":
            self._step()
        return loss_total / max(total, 1)

    def gradient(self, batch) -> Dict[str, Tensor]:
        """The gradient estimate of this mode for the batch mean loss (no update)."""
        self.run_batch(batch, learn=False)
        return {n: p.grad.clone() for n, p in self.model.named_parameters() if p.grad is not None}

    # -- evaluation ------------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, batch) -> Dict[str, float]:
        """Loss and accuracies on a batch (full forward, no learning): ``loss`` (mean per target),
        ``acc`` (per target: symbol / bit / step), ``seq_acc`` (all targets of a sequence right) and, for
        class targets, ``avg_logit_acc`` (logits averaged over each sequence's target steps, Zucchet et al.'s
        inference for ListOps) and ``last_acc`` (the prediction at each sequence's last target step)."""
        t = batch if isinstance(batch, Tensors) else to_tensors(batch, self._dtype())
        T, B = t.mask.shape
        reset = torch.zeros(T, B, dtype=torch.bool, device=t.x.device)
        out, _ = self.model(t.x, self.model.initial_state(B), reset, return_state=False)
        loss, n = summed_loss(out, t.y, t.mask, t.kind)
        m = t.mask
        res = {"loss": float(loss) / max(n, 1)}
        if t.kind == "class":
            right = (out.argmax(-1) == t.y) & m
            res["acc"] = float(right.sum()) / max(int(m.sum()), 1)
            res["seq_acc"] = float(((right | ~m).all(0) & m.any(0)).float().mean())
            avg = (out * m[..., None]).sum(0) / m.sum(0).clamp_min(1)[:, None]
            label = t.y[m.float().argmax(0), torch.arange(B)]
            res["avg_logit_acc"] = float((avg.argmax(-1) == label).float().mean())
            last = T - 1 - m.flip(0).float().argmax(0)
            b = torch.arange(B)
            res["last_acc"] = float((out[last, b].argmax(-1) == t.y[last, b]).float().mean())
        else:
            right = ((out > 0) == (t.y > 0.5)) & m[..., None]
            res["acc"] = float(right.sum()) / max(n, 1)
            res["seq_acc"] = float(((right | ~m[..., None]).all(-1).all(0)).float().mean())
        return res


def fit(learner: SequenceLearner, make_batch: Callable[[int], SequenceBatch], batches: int,
        eval_batch: Optional[SequenceBatch] = None, eval_every: int = 0,
        time_limit: Optional[float] = None, log: Optional[Callable[[Dict], None]] = None) -> List[Dict]:
    """Train on ``make_batch(i)`` for ``batches`` batches (or until ``time_limit`` seconds); evaluate on
    ``eval_batch`` every ``eval_every`` batches and at the end. Returns the evaluation rows."""
    import time

    rows: List[Dict] = []
    t0 = time.perf_counter()
    train_losses: List[float] = []

    def _eval(i):
        row = {"batch": i, "updates": learner.updates, "seconds": time.perf_counter() - t0,
               "train_loss": float(np.mean(train_losses[-max(eval_every, 1):])) if train_losses else float("nan")}
        if eval_batch is not None:
            row.update({f"eval_{k}": v for k, v in learner.evaluate(eval_batch).items()})
        rows.append(row)
        if log:
            log(row)

    i = 0
    for i in range(1, batches + 1):
        train_losses.append(learner.run_batch(make_batch(i)))
        if eval_every and i % eval_every == 0:
            _eval(i)
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            break
    if not rows or rows[-1]["batch"] != i:
        _eval(i)
    return rows
