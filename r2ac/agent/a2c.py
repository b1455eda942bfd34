"""The reference learner: minimal synchronous advantage actor-critic (A2C; Mnih et al. 2016) with the same
network, cores (exact RTRL included) and trajectories as IMPALA.

It exists to measure, not to guess, what the IMPALA learner's machinery costs on a task: ``algo: a2c``
runs the local runtime with one actor whose whole env batch is one update (on-policy, no policy lag), and
replaces V-trace, summed losses and RMSProp by n-step returns, mean losses and Adam:

    G_t = r_{t+1} + gamma (1 - d_{t+1}) G_{t+1},   G_M = V(x_M)                    (n-step returns)
    A_t = G_t - V(x_t)
    L   = mean_t,b [ -log pi(a_t|x_t) A_t ] + c_V mean_t,b [ 0.5 (G_t - V(x_t))^2 ] - c_H mean_t,b H(pi(.|x_t))

(indices as in ``impala_loss``: learner output t pairs with batch step t + 1).
"""

from __future__ import annotations

from typing import Dict, Tuple

import torch
from torch import Tensor

from r2ac.agent.distributions import categorical_log_prob
from r2ac.agent.learner import Learner
from r2ac.agent.losses import (batch_extremes, categorical_entropy_bonus, centred_logit_penalty, episode_end_stats,
                               gated_logit_penalty, step_rewards)
from r2ac.agent.losses import normalize_advantages as normalize


@torch.no_grad()
def nstep_returns(rewards: Tensor, discounts: Tensor, bootstrap_value: Tensor, values: Tensor | None = None,
                  lam: float = 1.0) -> Tensor:
    """G_t = rewards[t] + discounts[t] G_{t+1}, G_T = bootstrap_value. [T, B] -> [T, B].

    With ``lam`` < 1 (and ``values`` = V(x_0 .. x_{T-1}) [T, B]) the lambda-return
    G_t = rewards[t] + discounts[t] ((1 - lam) V(x_{t+1}) + lam G_{t+1}), V(x_T) = bootstrap_value: the
    advantage G_t - V(x_t) is then GAE(lambda) (Schulman et al. 2016)."""
    if lam != 1.0 and values is None:
        raise ValueError("nstep_returns: lam < 1 needs the values V(x_t) the lambda-return mixes in")
    out = torch.empty_like(rewards)
    g = bootstrap_value
    for t in range(rewards.shape[0] - 1, -1, -1):
        if lam != 1.0:
            v_next = values[t + 1] if t + 1 < rewards.shape[0] else bootstrap_value
            g = (1.0 - lam) * v_next + lam * g
        g = rewards[t] + discounts[t] * g
        out[t] = g
    return out


def a2c_loss(outputs: Dict[str, Tensor], batch: Dict[str, Tensor], discount: float = 0.99,
             baseline_cost: float = 0.5, entropy_cost: float = 0.01, reward_clip: float = 1.0,
             normalize_advantages: bool = False, entropy_floor: float = 0.0,
             logit_penalty: float = 0.0, logit_margin: float = 0.0, logit_penalty_where: str = "every_step",
             truncation_bootstrap: bool = False, lam: float = 1.0, extremes: bool = False,
             target_values: Tensor | None = None, target_pg: bool = True) -> Tuple[Tensor, Dict[str, float]]:
    """The A2C loss above on one batch of M+1-step trajectories (means over time and batch); rewards as in
    the IMPALA loss (``step_rewards``: clipped, time-limit cuts bootstrapped); ``lam`` < 1: lambda-returns
    (``learner.vtrace_lambda``; on-policy V-trace with that lambda gives the same value targets);
    ``extremes``: the stats add ``batch_extremes``; ``target_values`` ([T+1, B], a target network's V(x_t),
    ``learner.target_tau``): the returns bootstrap from them, the advantage's baseline stays V(x_t); with
    ``target_pg`` false the advantage takes the returns of the learner's own values, the value loss the target's."""
    values = outputs["baseline"][:-1]
    logits = outputs["policy_logits"][:-1]
    rewards = step_rewards(batch, values.dtype, discount, reward_clip, truncation_bootstrap)
    discounts = (~batch["done"][1:].to(torch.bool)).to(values.dtype) * discount
    boot = (outputs["baseline"] if target_values is None else target_values.to(values.dtype)).detach()
    returns = nstep_returns(rewards, discounts, boot[-1], boot[:-1], lam)
    if target_values is not None and not target_pg:
        own = outputs["baseline"].detach()
        adv = nstep_returns(rewards, discounts, own[-1], own[:-1], lam) - values.detach()
    else:
        adv = returns - values.detach()
    pg_adv = normalize(adv) if normalize_advantages else adv
    pg_loss = -(categorical_log_prob(logits, batch["action"][1:]) * pg_adv).mean()
    v_loss = 0.5 * (returns - values).pow(2).mean()
    h, bonus = categorical_entropy_bonus(logits, entropy_floor)
    z_pen = centred_logit_penalty(logits)
    loss = pg_loss + baseline_cost * v_loss - entropy_cost * bonus.mean()
    pull_frac = 0.0
    if logit_penalty > 0:
        pen, pulled = gated_logit_penalty(logits, h, logit_margin, logit_penalty_where, entropy_floor)
        loss = loss + logit_penalty * pen.mean()
        pull_frac = pulled.to(h.dtype).mean().item()
    stats = {**episode_end_stats(batch["done"][1:], values, returns, adv, h), "total_loss": loss.item(),
             "pg_loss": pg_loss.item(), "baseline_loss": v_loss.item(), "entropy": h.mean().item(),
             "logit_spread": z_pen.mean().item(), "logit_pull_frac": pull_frac, "mean_value": values.mean().item(),
             "mean_abs_advantage": adv.abs().mean().item()}
    if extremes:
        stats.update(batch_extremes(batch["done"][1:], values, returns, adv, logits))
    return loss, stats


class A2CLearner(Learner):
    """The IMPALA ``Learner`` with its loss replaced by ``a2c_loss`` (optimizer from ``learner.optimizer``).
    Everything else (RTRL carry, clipping, skips, diagnostics, state) is shared."""

    def loss(self, outputs, batch, targets=None, target_values=None):
        if targets is not None:
            raise ValueError("the A2C learner makes one pass per batch (learner.epochs=1)")
        return a2c_loss(outputs, batch, discount=self.cfg.discount, baseline_cost=self.cfg.baseline_cost,
                        entropy_cost=self.entropy_weight(), reward_clip=self.cfg.reward_clip,
                        normalize_advantages=self.cfg.normalize_advantages, entropy_floor=self.cfg.entropy_floor,
                        logit_penalty=self.logit_penalty_weight(), logit_margin=self.cfg.logit_margin,
                        logit_penalty_where=self.cfg.logit_penalty_where,
                        truncation_bootstrap=self.cfg.truncation_bootstrap, lam=self.cfg.vtrace_lambda,
                        extremes=self.detail, target_values=target_values, target_pg=self.cfg.target_pg)
