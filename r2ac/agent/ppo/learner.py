"""The PPO learner with stored RTRL traces (Algorithm 1 of Elelimy et al. 2024): k epochs of m shuffled
minibatches of steps (or chunks of C steps), each run from its stored core state and traces, the PPO loss
(clipped surrogate, clipped value loss, entropy bonus), Adam and a global gradient-norm clip.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from r2ac.agent.learner import NonFiniteLossError
from r2ac.agent.losses import ppo_loss
from r2ac.agent.ppo.net import PPONet
from r2ac.agent.ppo.rollout import Rollout, compute_advantages, rerun_rollout

__all__ = ["PPOLearner", "evaluate_chunks", "gather", "ppo_objective"]

# --------------------------------------------------------------------------------------------------
# Loss on a minibatch of chunks
# --------------------------------------------------------------------------------------------------

def evaluate_chunks(net: PPONet, ro: Rollout, starts: Tensor, envs: Tensor, length: int):
    """Run the network over K chunks of ``length`` steps: chunk j covers steps starts[j] ..
    starts[j] + length - 1 of env envs[j] and starts from the stored state before starts[j] (with its
    RTRL sensitivities: identity 1 makes the gradient the untruncated one given those traces; without
    them, the gradient is truncated at the chunk start). Returns (outputs [length, K], index (t [length, K],
    b [K]))."""
    t = starts[None, :] + torch.arange(length, device=starts.device)[:, None]
    state = {k: v[starts, envs] for k, v in ro.states.items()}
    out, _ = net(ro.x[t, envs], state, ro.reset[t, envs], return_state=False)
    return out, (t, envs)


def ppo_objective(net: PPONet, out: Dict[str, Tensor], batch: Dict[str, Tensor], *, clip: float,
                  value_clip: float, value_cost: float, entropy_cost: float,
                  normalize_advantages: bool) -> Tuple[Tensor, Dict[str, float]]:
    """The PPO loss (``losses.ppo_loss``) of the network's outputs on a minibatch: log-probabilities and
    entropies from the network's action distribution; ``value_clip`` 0 = no value clipping. ``batch``:
    action, log_prob (old), advantages, returns, value (old), shaped like out."""
    return ppo_loss(net.log_prob(out["policy"], batch["action"]), batch["log_prob"], batch["advantages"],
                    out["value"], batch["value"], batch["returns"], net.entropy(out["policy"]), clip_eps=clip,
                    value_clip_eps=value_clip if value_clip else None, value_cost=value_cost,
                    entropy_cost=entropy_cost, normalize=normalize_advantages)


def gather(ro: Rollout, t: Tensor, b: Tensor) -> Dict[str, Tensor]:
    """The per-step training targets at (t [C, K], b [K])."""
    return {"action": ro.action[t, b], "log_prob": ro.log_prob[t, b], "advantages": ro.advantages[t, b],
            "returns": ro.returns[t, b], "value": ro.value[t, b]}


# --------------------------------------------------------------------------------------------------
# Learner
# --------------------------------------------------------------------------------------------------

class PPOLearner:
    """k epochs of m shuffled minibatches per rollout, Adam, global gradient-norm clip; optional refresh
    of the stored traces (and values, advantages) after every epoch but the last.

    A minibatch whose loss or gradient norm is not finite is skipped (no optimizer step); more than
    ``max_nonfinite_updates`` skipped in a row raise :class:`r2ac.agent.learner.NonFiniteLossError`."""

    def __init__(self, net: PPONet, cfg):
        """``cfg``: the ``ppo`` config section (epochs, minibatches, clip ranges, costs, Adam, GAE,
        refresh_traces, sequence_length / truncation_length, normalize_advantages, max_nonfinite_updates).

        The chunk length C of the minibatches is ``cfg.sequence_length``, or when that is 0: 1 with an RTRL
        core (the paper's per-step stored traces), ``cfg.truncation_length`` with TBPTT."""
        self.net = net
        self.cfg = cfg
        self.sequence_length = int(cfg.sequence_length) or (
            1 if net.core.learning == "rtrl" else int(cfg.truncation_length))
        if self.sequence_length < 1:
            raise ValueError(f"sequence_length must be >= 1, got {self.sequence_length}")
        self.optimizer = torch.optim.Adam(net.parameters(), lr=cfg.learning_rate, eps=cfg.adam_eps)
        self.updates = 0  # applied optimizer steps
        self.iterations = 0  # rollouts trained on
        self.skipped = 0  # minibatch updates skipped for a non-finite loss or gradient
        self.nonfinite_in_row = 0

    def chunks(self, L: int, B: int) -> int:
        C = self.sequence_length
        if L % C:
            raise ValueError(f"ppo.rollout_length {L} must be a multiple of the sequence length {C}")
        return (L // C) * B

    def refresh(self, ro: Rollout) -> None:
        """Recompute states, traces and values with the current weights; recompute advantages. (The
        collector's carried state, where the next rollout starts, stays as acting computed it.)"""
        new = rerun_rollout(self.net, ro)
        ro.states, ro.value, ro.final_value = new["states"], new["value"], new["final_value"]
        ro.final_state, ro.bootstrap_value = new["final_state"], new["bootstrap_value"]
        compute_advantages(ro, self.cfg.discount, self.cfg.gae_lambda)

    def update(self, ro: Rollout, generator: Optional[torch.Generator] = None) -> Dict[str, float]:
        L, B = ro.x.shape[:2]
        C = self.sequence_length
        n_chunks = self.chunks(L, B)
        m = min(self.cfg.minibatches, n_chunks)
        if ro.advantages is None:
            compute_advantages(ro, self.cfg.discount, self.cfg.gae_lambda)
        with torch.no_grad():
            y, v = ro.returns.flatten(), ro.value.flatten()
            explained = (1 - (y - v).var() / y.var()).item() if y.var() > 0 else float("nan")
        params = [p for p in self.net.parameters() if p.requires_grad]
        clip = self.cfg.grad_norm_clip if self.cfg.grad_norm_clip > 0 else math.inf
        sums: Dict[str, float] = {}
        count = 0
        self.net.train()
        for epoch in range(self.cfg.epochs):
            perm = torch.randperm(n_chunks, generator=generator).to(ro.x.device)
            for idx in torch.tensor_split(perm, m):
                starts, envs = (idx // B) * C, idx % B
                out, (t, b) = evaluate_chunks(self.net, ro, starts, envs, C)
                c = self.cfg
                loss, stats = ppo_objective(self.net, out, gather(ro, t, b), clip=c.clip, value_clip=c.value_clip,
                                            value_cost=c.value_cost, entropy_cost=c.entropy_cost,
                                            normalize_advantages=c.normalize_advantages)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
                if not math.isfinite(grad_norm) or not math.isfinite(loss.item()):
                    self.optimizer.zero_grad(set_to_none=True)
                    sums["skipped_updates"] = sums.get("skipped_updates", 0.0) + 1
                    self._skip("loss" if not math.isfinite(loss.item()) else "gradient")
                    continue
                self.optimizer.step()
                self.net.core.project_()
                self.nonfinite_in_row = 0
                self.updates += 1
                stats["grad_norm"] = grad_norm
                stats["loss"] = loss.item()
                for k, val in stats.items():
                    sums[k] = sums.get(k, 0.0) + val
                count += 1
            if self.cfg.refresh_traces and epoch < self.cfg.epochs - 1:
                self.refresh(ro)
        self.iterations += 1
        skipped = sums.pop("skipped_updates", 0.0)
        out = {k: val / max(count, 1) for k, val in sums.items()}
        out.update(explained_variance=explained, minibatches=float(m), skipped_updates=skipped,
                   updates=float(self.updates))
        return out

    def _skip(self, what: str) -> None:
        self.skipped += 1
        self.nonfinite_in_row += 1
        if self.nonfinite_in_row > self.cfg.max_nonfinite_updates:
            raise NonFiniteLossError(
                f"{self.nonfinite_in_row} non-finite {what} values in a row (ppo.max_nonfinite_updates="
                f"{self.cfg.max_nonfinite_updates}); the run stops with its last checkpoint kept. Lower "
                f"ppo.learning_rate or check the environment's rewards.")

    def state_dict(self) -> Dict:
        return {"optimizer": self.optimizer.state_dict(), "updates": self.updates, "iterations": self.iterations,
                "skipped": self.skipped}

    def load_state_dict(self, d: Dict) -> None:
        self.optimizer.load_state_dict(d["optimizer"])
        self.updates, self.iterations = int(d["updates"]), int(d["iterations"])
        self.skipped = int(d.get("skipped", 0))  # checkpoints from before the count
