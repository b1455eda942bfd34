"""Actor-critic losses as pure functions of time-major tensors.

IMPALA (Espeholt et al. 2018, Sec. 4.2) with V-trace targets, and the pieces of PPO (Schulman et
al. 2017) with GAE (Schulman et al. 2016).

Reductions (a convention the learner must follow when choosing its learning rate):
  * IMPALA losses are **sums** over time and batch, as in IMPALA and torchbeast's monobeast; the
    published hyper-parameters (lr 0.0006, baseline cost 0.5, entropy cost 0.01, grad clip 40) were
    tuned for summed losses, so the gradient scales with T * B.
  * PPO losses are **means** over all samples by default (``reduction="mean"``), as in the PPO
    paper and CleanRL; pass ``reduction="sum"`` to sum instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import torch
from torch import Tensor

from r2ac.agent.distributions import categorical_entropy, categorical_log_prob
from r2ac.agent.vtrace import VTraceReturns, vtrace_from_logits

__all__ = [
    "baseline_loss",
    "categorical_entropy_bonus",
    "centred_logit_penalty",
    "gated_logit_penalty",
    "entropy_bonus",
    "episode_end_stats",
    "gae_advantages",
    "impala_loss",
    "normalize_advantages",
    "policy_gradient_loss",
    "ppo_clipped_surrogate_loss",
    "ppo_loss",
    "ppo_value_loss",
    "step_rewards",
]


# --------------------------------------------------------------------------------------------------
# IMPALA
# --------------------------------------------------------------------------------------------------

def policy_gradient_loss(logits: Tensor, actions: Tensor, advantages: Tensor) -> Tensor:
    """L_pg = - sum_{t,b} log pi(a_t|x_t) * A_t, with A_t treated as a constant.

    logits: [T, B, A] target-policy logits (gradient flows into these only); actions: [T, B];
    advantages: [T, B] (detached here). Summed over time and batch.
    """
    log_pi_a = categorical_log_prob(logits, actions)
    if tuple(advantages.shape) != tuple(log_pi_a.shape):
        raise ValueError(
            f"policy_gradient_loss: advantages shape {tuple(advantages.shape)} != actions shape "
            f"{tuple(log_pi_a.shape)}"
        )
    return -(log_pi_a * advantages.detach()).sum()


def clipped_policy_gradient_loss(logits: Tensor, actions: Tensor, advantages: Tensor, old_log_probs: Tensor,
                                 clip: float) -> Tensor:
    """PPO's clipped surrogate (Schulman et al. 2017, Eq. 7) as a loss summed over time and batch:
    L = - sum_{t,b} min(r_t A_t, clip(r_t, 1 - clip, 1 + clip) A_t), r_t = pi(a_t|x_t) / pi_old(a_t|x_t),
    with A_t and log pi_old detached. At r = 1 its gradient is ``policy_gradient_loss``'s; a step whose ratio
    has moved past the clip in the advantage's direction contributes no gradient."""
    log_pi_a = categorical_log_prob(logits, actions)
    if tuple(advantages.shape) != tuple(log_pi_a.shape) or tuple(old_log_probs.shape) != tuple(log_pi_a.shape):
        raise ValueError(
            f"clipped_policy_gradient_loss: advantages {tuple(advantages.shape)} and old_log_probs "
            f"{tuple(old_log_probs.shape)} must have the actions' shape {tuple(log_pi_a.shape)}")
    a = advantages.detach()
    ratio = torch.exp(log_pi_a - old_log_probs.detach())
    return -torch.min(ratio * a, ratio.clamp(1.0 - clip, 1.0 + clip) * a).sum()


def baseline_loss(advantages: Tensor) -> Tensor:
    """L_V = 0.5 * sum_{t,b} (v_t - V(x_t))^2, given advantages = v_t - V(x_t). Summed."""
    return 0.5 * advantages.pow(2).sum()


def episode_end_stats(ends: Tensor, values: Tensor, targets: Tensor, advantages: Tensor, ent: Tensor
                      ) -> dict[str, float]:
    """Diagnostics at the last step of each episode (where a delayed-cue task asks its question and pays):
    mean V(x_t), mean |v_t - V(x_t)|, mean |A_t| and mean entropy over the steps t with ``ends[t]``;
    {} when no episode ends in the batch. All inputs [T, B]."""
    m = ends.to(torch.bool)
    if not bool(m.any()):
        return {}
    with torch.no_grad():
        return {"end_value": values[m].mean().item(), "end_value_error": (targets - values)[m].abs().mean().item(),
                "end_abs_advantage": advantages[m].abs().mean().item(), "end_entropy": ent[m].mean().item()}


def batch_extremes(ends: Tensor, values: Tensor, targets: Tensor, advantages: Tensor, logits: Tensor
                   ) -> dict[str, float]:
    """The batch's extremes, for the per-update log (``logger.update_log``): V(x_t)'s min and max (and at the
    steps with ``ends[t]``, the episodes' last steps), the mean of v_t - V(x_t) with its sign (which way the
    targets pull the values), the largest |v_t - V(x_t)| and whether it lies at an episode's last step, the
    largest |A_t| and the largest centred logit |z - mean z|. [T, B] inputs, ``logits`` [T, B, A]."""
    with torch.no_grad():
        err = (targets - values).abs()
        worst = int(err.flatten().argmax())
        m = ends.to(torch.bool)
        out = {"value_min": values.min().item(), "value_max": values.max().item(),
               "value_error_mean": (targets - values).mean().item(), "value_error_max": err.max().item(),
               "value_error_max_at_end": float(m.flatten()[worst]),
               "abs_advantage_max": advantages.abs().max().item(),
               "centred_logit_max": (logits - logits.mean(-1, keepdim=True)).abs().max().item()}
        if bool(m.any()):
            out.update(end_value_min=values[m].min().item(), end_value_max=values[m].max().item())
        return out


def _require(mapping: Mapping[str, Tensor], keys: tuple[str, ...], what: str) -> None:
    missing = [k for k in keys if k not in mapping]
    if missing:
        raise KeyError(f"impala_loss: {what} is missing {missing}; it has {sorted(mapping)}")


def entropy_bonus(h: Tensor, floor: float = 0.0) -> Tensor:
    """The per-step entropy bonus: ``h`` itself, or with ``floor`` > 0 (nats), min(h, floor).

    The plain bonus pulls every step's policy toward uniform, a near-uniform one too, against whatever weak
    signal is forming there; min(h, floor) has zero gradient at the steps whose entropy is above the floor
    and the plain bonus's gradient below it, so it only keeps a policy from turning certain
    (docs/results.md, "An entropy floor")."""
    if floor < 0:
        raise ValueError(f"entropy_bonus: floor must be >= 0 (0 = off), got {floor}")
    return h.clamp(max=floor) if floor > 0 else h


def categorical_entropy_bonus(logits: Tensor, floor_fraction: float = 0.0) -> tuple[Tensor, Tensor]:
    """(H, bonus) per step of a categorical policy's ``logits`` [..., A]: the bonus is ``entropy_bonus`` with
    the floor ``floor_fraction`` * ln A (a fraction of the uniform policy's entropy; 0 = the plain bonus)."""
    if not 0.0 <= floor_fraction <= 1.0:
        raise ValueError(f"entropy floor must be a fraction of ln A in [0, 1] (0 = off), got {floor_fraction}")
    h = categorical_entropy(logits)
    return h, entropy_bonus(h, floor_fraction * math.log(logits.shape[-1]))


def centred_logit_penalty(logits: Tensor, margin: float = 0.0) -> Tensor:
    """Per step, half the squared norm of the centred logits: 0.5 * sum_a (z_a - mean_a z)^2. [..., A] -> [...].
    With ``margin`` m > 0 only the part of each centred logit beyond m counts: 0.5 * sum_a max(|z_a - mean_a
    z| - m, 0)^2, no pull at all on a policy whose logits all lie within m nats of their mean.

    Its gradient on a logit is the logit's offset from the mean, so it pulls on a certain policy as hard as on
    an uncertain one; the policy gradient and the entropy's gradient on logit z_a both carry a factor pi(a)
    (1 - pi(a)) that vanishes as a step's policy turns certain, so a step that answers wrongly with
    certainty is otherwise unlearned only at the rate at which the right answer is sampled (docs/results.md,
    "The copy task's middle bit"). Softmax is unchanged by a shift of all logits, hence the centring."""
    if not margin >= 0.0:
        raise ValueError(f"logit penalty margin must be >= 0 nats (0 = pull on every logit), got {margin}")
    z = logits - logits.mean(-1, keepdim=True)
    if margin > 0:
        z = torch.relu(z.abs() - margin)
    return 0.5 * z.pow(2).sum(-1)


LOGIT_PENALTY_WHERE = ("every_step", "below_floor")


def gated_logit_penalty(logits: Tensor, h: Tensor, margin: float = 0.0, where: str = "every_step",
                        floor_fraction: float = 0.0) -> tuple[Tensor, Tensor]:
    """(penalty, mask) per step: ``centred_logit_penalty``(logits, margin) where the pull acts, 0 elsewhere,
    and the mask of the steps where it acts (``logits`` [..., A], ``h`` [...] their entropies).

    ``where="every_step"`` pulls at every step. ``where="below_floor"`` pulls only at the steps whose entropy
    is below the entropy floor, ``floor_fraction`` * ln A (``learner.entropy_floor``), the steps where the
    policy is near certain and the floored bonus acts too. The mask is a constant of the step (no gradient
    flows through ``h``). Summed over every step, the pull acts at each step a memory is read from, while
    the answer it serves is paid at one query: on a task whose memory is held for hundreds of steps it pulls
    the heads off reading it at all of them (docs/results.md, "A first guess and a hint"); gated, it leaves
    the near-uniform steps alone and still pulls on answers given wrongly with certainty, but no longer
    shrinks the heads through every step, and the copy task's majority answers came back on one more seed of
    three (docs/results.md, "The copy task's middle bit", "The pull below the floor")."""
    if where not in LOGIT_PENALTY_WHERE:
        raise ValueError(f"logit penalty: where must be one of {LOGIT_PENALTY_WHERE}, got {where!r}")
    pen = centred_logit_penalty(logits, margin)
    if where == "every_step":
        return pen, torch.ones_like(pen, dtype=torch.bool)
    if not 0.0 < floor_fraction <= 1.0:
        raise ValueError("logit penalty where='below_floor' pulls only below the entropy floor, so it needs "
                         f"learner.entropy_floor in (0, 1] (a fraction of ln A), got {floor_fraction}; set "
                         "learner.entropy_floor or learner.logit_penalty_where=every_step")
    mask = h.detach() < floor_fraction * math.log(logits.shape[-1])
    return pen * mask.to(pen.dtype), mask


def max_abs_reward(rewards: Tensor, reward_clip: float = 0.0) -> float:
    """The largest |reward| of a batch after clipping to [-reward_clip, reward_clip] (no clipping if
    ``reward_clip`` <= 0), as the losses clip it."""
    r = rewards.abs().max()
    return float(r.clamp(max=reward_clip) if reward_clip > 0 else r)


def reward_unit(largest_abs_reward: float) -> float:
    """A task's reward unit for ``learner.entropy_cap``: the largest |reward| seen so far, 1 before any nonzero
    reward. Capped in these units, an entropy bonus cannot outweigh a decision's stake whether a task pays 1
    once (the delayed cue) or 1/51 at each of 51 steps (POPGym's RepeatFirstEasy)."""
    return largest_abs_reward if largest_abs_reward > 0 else 1.0


def held_answer(stake: float, entropy_weight: float, logit_penalty: float = 0.0, actions: int = 3,
                floor_fraction: float = 0.0, margin: float = 0.0, gap_max: float = 60.0) -> dict:
    """Where the IMPALA loss's own terms hold a choice of one right answer among ``actions`` that pays ``stake``
    (the others nothing): the logit gap g >= 0 of the right action over the others, and its probability p, that
    maximise the per-step objective p(g) * stake + entropy_weight * min(H(g), floor_fraction * ln A)
    - logit_penalty * 0.5 * sum_a max(|z_a - mean z| - margin, 0)^2 (floor 0: the plain bonus), with
    ``logit_penalty`` already times the reward unit u (as the learner weighs it). Returns {"gap", "p"}.

    The policy gradient's expectation is the gradient of p * stake, so this is where learning settles on a
    step whose stake is known: with no penalty and no floor, p = e^(s/c) / (e^(s/c) + A - 1) (softmax(s/c)).
    At quickstart's weights (c = 0.05, penalty 0.001, floor 0.9, u = 1) an answer worth 1 is held at p = 0.994,
    one worth 0.1 at p = 0.76 (docs/results.md, "Key and apples: the apples' share")."""
    if actions < 2:
        raise ValueError(f"held_answer: a choice needs >= 2 actions, got {actions}")
    if entropy_weight < 0 or logit_penalty < 0 or margin < 0:
        raise ValueError(f"held_answer: entropy_weight, logit_penalty and margin must be >= 0, got "
                         f"{entropy_weight}, {logit_penalty}, {margin}")
    if not 0.0 <= floor_fraction <= 1.0:
        raise ValueError(f"held_answer: floor_fraction must be in [0, 1] (0 = the plain bonus), got {floor_fraction}")

    def objective(g: Tensor) -> Tensor:
        z = torch.zeros(g.shape + (actions,), dtype=torch.float64)
        z[..., 0] = g
        logp = torch.log_softmax(z, -1)
        h = -(logp.exp() * logp).sum(-1)
        bonus = h.clamp(max=floor_fraction * math.log(actions)) if floor_fraction > 0 else h
        pull = 0.5 * torch.relu((z - z.mean(-1, keepdim=True)).abs() - margin).pow(2).sum(-1)
        return logp[..., 0].exp() * stake + entropy_weight * bonus - logit_penalty * pull

    lo, hi = 0.0, float(gap_max)
    for _ in range(4):  # a grid, then finer grids around its best point
        g = torch.linspace(lo, hi, 2001, dtype=torch.float64)
        i = int(objective(g).argmax())
        step = (hi - lo) / 2000
        lo, hi = max(0.0, float(g[i]) - step), float(g[i]) + step
    gap = 0.5 * (lo + hi)
    p = float(torch.softmax(torch.tensor([gap] + [0.0] * (actions - 1), dtype=torch.float64), 0)[0])
    return {"gap": gap, "p": p}


def step_rewards(batch: Mapping[str, Tensor], dtype: torch.dtype, discount: float, reward_clip: float,
                 truncation_bootstrap: bool = False) -> Tensor:
    """The rewards r_t of a loss's T steps ([T, B], from ``batch["reward"][1:]``), clipped to
    [-reward_clip, reward_clip] (no clipping at reward_clip <= 0). Where a time limit cut an episode and the
    actor reported V(final observation) (``batch["truncation_value"]``, 0 where nothing was cut), with
    ``truncation_bootstrap`` that step's reward gets + discount * V(final observation): partial-episode
    bootstrapping (Pardo et al. 2018, "Time limits in reinforcement learning"). The step stays an episode
    end for the trace (its discount is 0); what the cut episode would have earned after it enters as
    reward, so a policy is not taught that the clock running out ends its returns. The folded value is a
    constant of the loss (the acting weights' estimate): no gradient flows through it."""
    rewards = batch["reward"][1:].to(dtype)
    if reward_clip > 0:
        rewards = torch.clamp(rewards, -reward_clip, reward_clip)
    if truncation_bootstrap and "truncation_value" in batch:
        rewards = rewards + discount * batch["truncation_value"][1:].to(dtype).detach()
    return rewards


def impala_targets(
    learner_outputs: Mapping[str, Tensor],
    batch: Mapping[str, Tensor],
    discount: float = 0.99,
    reward_clip: float = 1.0,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
    clip_c_threshold: float | None = 1.0,
    vtrace_lambda: float = 1.0,
    truncation_bootstrap: bool = False,
    target_values: Tensor | None = None,
    target_pg: bool = True,
) -> VTraceReturns:
    """The V-trace targets, policy-gradient advantages and target-policy log-probabilities of ``impala_loss``
    (layout there), detached: behaviour = batch policy_logits[1:], target = learner policy_logits[:-1].

    ``target_values`` ([T+1, B], ``learner.target_tau``): the V(x_s) and V(x_T) that V-trace bootstraps from,
    a target network's; the policy-gradient advantage keeps the learner's own V(x_s) as its baseline:
    A_s = rho_pg_s (r_s + gamma_s v_{s+1} - V(x_s)), v_{s+1} built on the target's values. With ``target_pg``
    false only the value targets v_s come from them: the advantages are those of the learner's own values, as
    without a target network."""
    baseline_all = learner_outputs["baseline"]
    values = baseline_all[:-1].detach()
    rewards = step_rewards(batch, values.dtype, discount, reward_clip, truncation_bootstrap)
    discounts = (~batch["done"][1:].to(torch.bool)).to(values.dtype) * discount
    if target_values is not None and tuple(target_values.shape) != tuple(baseline_all.shape):
        raise ValueError(f"impala_targets: target_values has shape {tuple(target_values.shape)}, expected "
                         f"{tuple(baseline_all.shape)} like learner_outputs['baseline'] ([T+1, B])")
    boot = baseline_all if target_values is None else target_values.detach().to(values.dtype)
    returns = vtrace_from_logits(
        behaviour_logits=batch["policy_logits"][1:],
        target_logits=learner_outputs["policy_logits"][:-1],
        actions=batch["action"][1:],
        discounts=discounts,
        rewards=rewards,
        values=boot[:-1].detach(),
        bootstrap_value=boot[-1].detach(),
        clip_rho_threshold=clip_rho_threshold,
        clip_pg_rho_threshold=clip_pg_rho_threshold,
        clip_c_threshold=clip_c_threshold,
        lam=vtrace_lambda,
    )
    if target_values is None:
        return returns
    if not target_pg:  # the advantages of the learner's own values (IMPALA's), the value targets of the target's
        own = impala_targets(learner_outputs, batch, discount, reward_clip, clip_rho_threshold, clip_pg_rho_threshold,
                             clip_c_threshold, vtrace_lambda, truncation_bootstrap)
        return dataclasses.replace(returns, pg_advantages=own.pg_advantages)
    with torch.no_grad():  # the same advantage with the learner's baseline: + rho_pg (Vbar(x_s) - V(x_s))
        rho_pg = torch.exp(returns.log_rhos)
        if clip_pg_rho_threshold is not None:
            rho_pg = torch.clamp(rho_pg, max=clip_pg_rho_threshold)
        advantages = returns.pg_advantages + rho_pg * (boot[:-1] - values)
    return dataclasses.replace(returns, pg_advantages=advantages)


def impala_loss(
    learner_outputs: Mapping[str, Tensor],
    batch: Mapping[str, Tensor],
    discount: float = 0.99,
    baseline_cost: float = 0.5,
    entropy_cost: float = 0.01,
    reward_clip: float = 1.0,
    entropy_floor: float = 0.0,
    logit_penalty: float = 0.0,
    logit_margin: float = 0.0,
    logit_penalty_where: str = "every_step",
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
    clip_c_threshold: float | None = 1.0,
    vtrace_lambda: float = 1.0,
    normalize_pg_advantages: bool = False,
    truncation_bootstrap: bool = False,
    targets: VTraceReturns | None = None,
    clip: float = 0.0,
    extremes: bool = False,
    target_values: Tensor | None = None,
    target_pg: bool = True,
) -> tuple[Tensor, dict[str, float]]:
    """IMPALA loss on one batch of M+1-step trajectories (torchbeast monobeast layout).

    Layout (time-major, length T+1 = M+1; row 0 repeats the last row of the previous trajectory):
      batch["reward"][t], batch["done"][t]: outcome of the step that produced obs[t]
          (done[t] True: the episode ended there and obs[t] is the first obs of a new episode);
      batch["action"][t], batch["policy_logits"][t] ([T+1, B, A]): the behaviour action and logits
          chosen at obs[t-1], i.e. the action whose outcome is reward[t], done[t];
      learner_outputs["policy_logits"][t] ([T+1, B, A]), learner_outputs["baseline"][t] ([T+1, B]):
          the learner's pi(.|obs[t]) and V(obs[t]).
    So step t of the loss pairs learner_outputs[t] with batch[t+1]:

        bootstrap_value = baseline[T]
        rewards   = clip(reward[1:], -reward_clip, reward_clip)   (no clipping if reward_clip <= 0)
                    + discount * truncation_value[1:] where present (``step_rewards``: time-limit cuts)
        discounts = (1 - done[1:]) * discount
        V-trace (behaviour = batch policy_logits[1:], target = learner policy_logits[:-1]; c_s scaled by
        ``vtrace_lambda``)
        (with ``normalize_pg_advantages`` A^pg is shifted and scaled to zero mean, unit std over the batch)
        L = L_pg(A^pg) + baseline_cost * 0.5 sum (v_s - V(x_s))^2 - entropy_cost * sum H_t
    (with ``entropy_floor`` > 0 the bonus is on min(H_t, entropy_floor * ln A): ``categorical_entropy_bonus``)
    (with ``logit_penalty`` > 0, + logit_penalty * sum ``centred_logit_penalty``(target logits, logit_margin),
    with ``logit_penalty_where="below_floor"`` only at the steps below the entropy floor: ``gated_logit_penalty``)
    ``targets`` (``impala_targets`` of an earlier pass over the same batch, ``learner.epochs``): the V-trace
    targets and advantages are those, not recomputed; with ``clip`` > 0, L_pg is PPO's clipped surrogate
    against that pass's policy (``clipped_policy_gradient_loss``), which at the first pass (ratio 1) has
    IMPALA's gradient. ``target_values`` ([T+1, B], a target network's V(x_t), ``learner.target_tau``): V-trace
    bootstraps from them instead (``impala_targets``; with ``target_pg`` false only for the value targets).

    All three terms are sums over time and batch. Returns (total_loss, stats) where stats holds
    python floats: total_loss, pg_loss, baseline_loss, entropy_loss, entropy (mean per step), logit_spread
    (the mean per step of ``centred_logit_penalty``, logged whether or not it is in the loss), logit_pull_frac
    (the fraction of steps the penalty pulls at: 1 unless ``logit_penalty_where`` gates it; 0 without it),
    mean_value (mean V(x_t) over the T steps), mean_abs_advantage (mean |A^pg|) and mean_rho
    (mean of the unclipped importance weights pi(a|x) / mu(a|x), a policy-lag gauge); with ``extremes``
    also ``batch_extremes`` and the importance weights' min and max (rho_min, rho_max).
    """
    _require(learner_outputs, ("policy_logits", "baseline"), "learner_outputs")
    _require(batch, ("reward", "done", "action", "policy_logits"), "batch")

    target_logits_all = learner_outputs["policy_logits"]
    baseline_all = learner_outputs["baseline"]
    if baseline_all.dim() < 2 or tuple(target_logits_all.shape[:-1]) != tuple(baseline_all.shape):
        raise ValueError(
            f"impala_loss: learner policy_logits {tuple(target_logits_all.shape)} must be "
            f"baseline {tuple(baseline_all.shape)} + [A], time-major [T+1, B]"
        )
    for key in ("reward", "done", "action"):
        if tuple(batch[key].shape) != tuple(baseline_all.shape):
            raise ValueError(
                f"impala_loss: batch[{key!r}] has shape {tuple(batch[key].shape)}, expected "
                f"{tuple(baseline_all.shape)} like learner_outputs['baseline'] ([T+1, B])"
            )
    if baseline_all.shape[0] < 2:
        raise ValueError("impala_loss: need T+1 >= 2 time steps (T steps + 1 bootstrap step)")

    target_logits = target_logits_all[:-1]
    values = baseline_all[:-1]
    actions = batch["action"][1:]
    if targets is None:
        targets = impala_targets(learner_outputs, batch, discount=discount, reward_clip=reward_clip,
                                 clip_rho_threshold=clip_rho_threshold,
                                 clip_pg_rho_threshold=clip_pg_rho_threshold, clip_c_threshold=clip_c_threshold,
                                 vtrace_lambda=vtrace_lambda, truncation_bootstrap=truncation_bootstrap,
                                 target_values=target_values, target_pg=target_pg)
    vtrace_returns = targets

    pg_adv = vtrace_returns.pg_advantages
    if normalize_pg_advantages:  # zero mean, unit std over the batch (not in IMPALA; an option)
        pg_adv = normalize_advantages(pg_adv)
    if clip > 0:
        if vtrace_returns.target_action_log_probs is None:
            raise ValueError("impala_loss: clip > 0 needs targets with the first pass's target_action_log_probs "
                             "(impala_targets)")
        pg_loss = clipped_policy_gradient_loss(target_logits, actions, pg_adv,
                                               vtrace_returns.target_action_log_probs, clip)
    else:
        pg_loss = policy_gradient_loss(target_logits, actions, pg_adv)
    v_loss = baseline_loss(vtrace_returns.vs - values)
    h, bonus = categorical_entropy_bonus(target_logits, entropy_floor)
    h_loss = -bonus.sum()
    total_loss = pg_loss + baseline_cost * v_loss + entropy_cost * h_loss
    z_pen = centred_logit_penalty(target_logits)
    pull_frac = 0.0
    if logit_penalty > 0:
        pen, pulled = gated_logit_penalty(target_logits, h, logit_margin, logit_penalty_where, entropy_floor)
        total_loss = total_loss + logit_penalty * pen.sum()
        pull_frac = pulled.to(h.dtype).mean().item()

    stats = {
        **episode_end_stats(batch["done"][1:], values, vtrace_returns.vs, vtrace_returns.pg_advantages, h),
        "total_loss": total_loss.item(),
        "pg_loss": pg_loss.item(),
        "baseline_loss": v_loss.item(),
        "entropy_loss": h_loss.item(),
        "entropy": h.mean().item(),
        "logit_spread": z_pen.mean().item(),
        "logit_pull_frac": pull_frac,
        "mean_value": values.mean().item(),
        "mean_abs_advantage": vtrace_returns.pg_advantages.abs().mean().item(),
        "mean_rho": vtrace_returns.log_rhos.exp().mean().item(),
    }
    if extremes:
        stats.update(batch_extremes(batch["done"][1:], values, vtrace_returns.vs, vtrace_returns.pg_advantages,
                                    target_logits),
                     rho_min=vtrace_returns.log_rhos.min().exp().item(),
                     rho_max=vtrace_returns.log_rhos.max().exp().item())
    return total_loss, stats


# --------------------------------------------------------------------------------------------------
# PPO
# --------------------------------------------------------------------------------------------------

def gae_advantages(
    rewards: Tensor,
    values: Tensor,
    dones: Tensor,
    bootstrap_value: Tensor,
    discount: float,
    gae_lambda: float,
) -> Tensor:
    """Generalised advantage estimates (Schulman et al. 2016, Eq. 16) with episode cuts.

    rewards, values, dones: [T, B]; bootstrap_value: [B] = V(x_T). Step t is (x_t, a_t, r_t, d_t):
    ``dones[t]`` True means the episode terminated with the transition at step t (r_t is its last
    reward), so V(x_{t+1}) is not bootstrapped and the trace is cut there. (This is the IMPALA loss's
    alignment after its [1:] shift: done[t] goes with reward[t] and the action at step t.)

        delta_t = r_t + gamma (1 - d_t) V(x_{t+1}) - V(x_t),            V(x_T) = bootstrap_value
        A_t     = sum_{l>=0} ( prod_{k=0}^{l-1} gamma lambda (1 - d_{t+k}) ) delta_{t+l}
                = delta_t + gamma lambda (1 - d_t) A_{t+1},              A_T = 0

    Time-limit truncation (not termination) should be handled by the caller (e.g. by folding
    gamma V(x_final) into r_t). Returns detached advantages [T, B]; returns are A_t + V(x_t).
    """
    if tuple(rewards.shape) != tuple(values.shape) or tuple(dones.shape) != tuple(values.shape):
        raise ValueError(
            f"gae_advantages: rewards {tuple(rewards.shape)}, values {tuple(values.shape)} and "
            f"dones {tuple(dones.shape)} must share one time-major [T, B] shape"
        )
    if tuple(bootstrap_value.shape) != tuple(values.shape[1:]):
        raise ValueError(
            f"gae_advantages: bootstrap_value has shape {tuple(bootstrap_value.shape)}, expected "
            f"{tuple(values.shape[1:])}"
        )
    with torch.no_grad():
        dtype = values.dtype
        values = values.detach()
        not_done = (~dones.to(torch.bool)).to(dtype)
        rewards = rewards.detach().to(dtype)
        values_t_plus_1 = torch.cat([values[1:], bootstrap_value.detach().to(dtype).unsqueeze(0)])
        deltas = rewards + discount * not_done * values_t_plus_1 - values
        advantages = torch.empty_like(values)
        acc = torch.zeros_like(values[0])
        for t in reversed(range(values.shape[0])):
            acc = deltas[t] + discount * gae_lambda * not_done[t] * acc
            advantages[t] = acc
    return advantages


def _reduce(x: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return x.mean()
    if reduction == "sum":
        return x.sum()
    raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")


def normalize_advantages(advantages: Tensor, eps: float = 1e-8) -> Tensor:
    """(A - mean(A)) / (std(A) + eps) over all elements (the usual PPO minibatch normalisation)."""
    return (advantages - advantages.mean()) / (advantages.std() + eps)


def ppo_clipped_surrogate_loss(
    log_probs: Tensor,
    old_log_probs: Tensor,
    advantages: Tensor,
    clip_eps: float = 0.2,
    reduction: str = "mean",
) -> Tensor:
    """PPO's clipped surrogate (Schulman et al. 2017, Eq. 7), as a loss to minimise.

        r_t = exp(log pi(a_t|x_t) - log pi_old(a_t|x_t))
        L   = - reduce_t min( r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t )

    Gradient flows only into ``log_probs``; it is zero where the clipped term is the smaller one
    (r_t > 1 + eps with A_t > 0, r_t < 1 - eps with A_t < 0).
    """
    ratio = torch.exp(log_probs - old_log_probs.detach())
    advantages = advantages.detach()
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    return -_reduce(torch.minimum(unclipped, clipped), reduction)


def ppo_value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    clip_eps: float | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Value regression, optionally clipped around the old values (as in OpenAI baselines' PPO2).

    Unclipped (clip_eps None):  L = reduce 0.5 (V - R)^2
    Clipped:                    V_c = V_old + clip(V - V_old, -eps, eps)
                                L = reduce 0.5 max((V - R)^2, (V_c - R)^2)
    """
    returns = returns.detach()
    unclipped = (values - returns).pow(2)
    if clip_eps is None:
        return 0.5 * _reduce(unclipped, reduction)
    old_values = old_values.detach()
    v_clipped = old_values + torch.clamp(values - old_values, -clip_eps, clip_eps)
    clipped = (v_clipped - returns).pow(2)
    return 0.5 * _reduce(torch.maximum(unclipped, clipped), reduction)


def ppo_loss(
    log_probs: Tensor,
    old_log_probs: Tensor,
    advantages: Tensor,
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    entropy: Tensor,
    clip_eps: float = 0.2,
    value_clip_eps: float | None = None,
    value_cost: float = 0.5,
    entropy_cost: float = 0.0,
    normalize: bool = True,
) -> tuple[Tensor, dict[str, float]]:
    """L = L_clip + value_cost * L_V - entropy_cost * mean(H), each a mean over the samples.

    log_probs: log pi(a_t|x_t) of the current policy (any distribution; gradient flows into these);
    old_log_probs, advantages, old_values, returns: from the rollout; values: the current V(x_t);
    entropy: the current policy's entropy per sample; all of one shape. ``normalize``: advantages
    normalised over the samples (:func:`normalize_advantages`, when there are at least 2). Returns
    (total_loss, stats) with stats: pg_loss, value_loss, entropy (mean), approx_kl (mean of
    (r - 1) - log r), clip_fraction (fraction with |r - 1| > clip_eps).
    """
    if normalize and advantages.numel() > 1:
        advantages = normalize_advantages(advantages)
    pg = ppo_clipped_surrogate_loss(log_probs, old_log_probs, advantages, clip_eps)
    v = ppo_value_loss(values, old_values, returns, value_clip_eps)
    total = pg + value_cost * v - entropy_cost * entropy.mean()
    with torch.no_grad():
        log_ratio = log_probs - old_log_probs
        ratio = log_ratio.exp()
        stats = {
            "pg_loss": pg.item(),
            "value_loss": v.item(),
            "entropy": entropy.mean().item(),
            "approx_kl": ((ratio - 1) - log_ratio).mean().item(),
            "clip_fraction": ((ratio - 1).abs() > clip_eps).to(torch.float32).mean().item(),
        }
    return total, stats
