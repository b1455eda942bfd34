"""V-trace off-policy targets (Espeholt et al. 2018, "IMPALA", Sec. 4.1), as pure torch functions.

All tensors are time-major: ``[T, B]`` (or ``[T, *batch]``; any trailing batch shape works), where
index ``t`` is step ``x_t`` of a trajectory ``x_0 .. x_{T-1}`` taken by the behaviour policy ``mu``
and ``bootstrap_value`` is ``V(x_T)``. The target policy is ``pi``.

Definitions (IMPALA Eq. 1, with a per-step discount ``gamma_t``; ``gamma_t = 0`` ends the episode
after step t, so nothing of ``x_{t+1}`` onwards leaks into step t):

    rho_t   = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))           (truncated importance weight)
    c_i     = lambda min(c_bar, pi(a_i|x_i) / mu(a_i|x_i))      ("trace cutting" coefficient; lambda = 1
                                                               is IMPALA's V-trace, lambda < 1 its
                                                               lambda variant, Sec. 4.1)
    delta_t V = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))

    v_s = V(x_s) + sum_{t=s}^{T-1} ( prod_{i=s}^{t-1} gamma_i c_i ) delta_t V

which obeys the backward recursion (IMPALA Remark 1), with ``v_T = V(x_T)``:

    v_s - V(x_s) = delta_s V + gamma_s c_s (v_{s+1} - V(x_{s+1}))

The policy-gradient advantage at step s (IMPALA Sec. 4.2) uses its own clipping threshold:

    A_s = min(rho_bar_pg, pi(a_s|x_s) / mu(a_s|x_s)) (r_s + gamma_s v_{s+1} - V(x_s))

A threshold of ``None`` means "no clipping". Returns are targets: they are computed under
``torch.no_grad()`` and carry no autograd graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from r2ac.agent.distributions import categorical_log_prob

__all__ = [
    "VTraceReturns",
    "vtrace_from_importance_weights",
    "vtrace_from_logits",
]


@dataclass(frozen=True)
class VTraceReturns:
    """V-trace outputs, all detached and time-major.

    vs:              [T, B]  the V-trace targets v_s (regression targets for V(x_s)).
    pg_advantages:   [T, B]  A_s = clipped_pg_rho_s (r_s + gamma_s v_{s+1} - V(x_s)).
    log_rhos:        [T, B]  log pi(a_s|x_s) - log mu(a_s|x_s) (unclipped), when known.
    behaviour_action_log_probs / target_action_log_probs: [T, B], filled by ``vtrace_from_logits``.
    """

    vs: Tensor
    pg_advantages: Tensor
    log_rhos: Tensor | None = None
    behaviour_action_log_probs: Tensor | None = None
    target_action_log_probs: Tensor | None = None


def _check_shapes(log_rhos: Tensor, discounts: Tensor, rewards: Tensor, values: Tensor,
                  bootstrap_value: Tensor) -> None:
    """All step-wise inputs share one [T, *batch] shape; bootstrap_value has shape [*batch]."""
    if values.dim() < 1:
        raise ValueError(f"vtrace: values must be time-major [T, B], got shape {tuple(values.shape)}")
    expected = tuple(values.shape)
    for name, x in (("log_rhos", log_rhos), ("discounts", discounts), ("rewards", rewards)):
        if tuple(x.shape) != expected:
            raise ValueError(
                f"vtrace: {name} has shape {tuple(x.shape)} but values has shape {expected}; "
                "all step-wise inputs must be time-major with the same [T, B] shape"
            )
    if tuple(bootstrap_value.shape) != expected[1:]:
        raise ValueError(
            f"vtrace: bootstrap_value has shape {tuple(bootstrap_value.shape)}, expected "
            f"{expected[1:]} (values shape {expected} without its time dimension)"
        )


def _clip(x: Tensor, threshold: float | None) -> Tensor:
    """min(threshold, x); no clipping when threshold is None."""
    return x if threshold is None else torch.clamp(x, max=threshold)


def vtrace_from_importance_weights(
    log_rhos: Tensor,
    discounts: Tensor,
    rewards: Tensor,
    values: Tensor,
    bootstrap_value: Tensor,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
    clip_c_threshold: float | None = 1.0,
    lam: float = 1.0,
) -> VTraceReturns:
    """V-trace targets and policy-gradient advantages from log importance weights.

    log_rhos:        [T, B] log(pi(a_t|x_t) / mu(a_t|x_t)).
    discounts:       [T, B] gamma_t (0 where the episode ended at step t).
    rewards:         [T, B] r_t.
    values:          [T, B] V(x_t).
    bootstrap_value: [B]    V(x_T).
    clip_rho_threshold (rho_bar), clip_pg_rho_threshold (rho_bar_pg), clip_c_threshold (c_bar):
        truncation levels; ``None`` disables a truncation.
    lam: lambda in c_s = lambda min(c_bar, rho_s) (1: IMPALA's V-trace; on-policy, the lambda-return).

    Backward recursion, with acc_T = 0:

        delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))
        acc_s   = delta_s + gamma_s c_s acc_{s+1}          (acc_s = v_s - V(x_s))
        v_s     = V(x_s) + acc_s
        A_s     = rho_pg_s (r_s + gamma_s v_{s+1} - V(x_s)),   v_T = V(x_T)

    Everything is computed in the dtype of ``values`` under ``torch.no_grad()``.
    """
    _check_shapes(log_rhos, discounts, rewards, values, bootstrap_value)
    with torch.no_grad():
        dtype = values.dtype
        log_rhos, discounts, rewards, values, bootstrap_value = (
            x.detach().to(dtype) for x in (log_rhos, discounts, rewards, values, bootstrap_value)
        )
        rhos = torch.exp(log_rhos)
        clipped_rhos = _clip(rhos, clip_rho_threshold)
        cs = lam * _clip(rhos, clip_c_threshold)

        values_t_plus_1 = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
        deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)

        vs_minus_v = torch.empty_like(values)
        acc = torch.zeros_like(bootstrap_value)
        for s in reversed(range(values.shape[0])):
            acc = deltas[s] + discounts[s] * cs[s] * acc
            vs_minus_v[s] = acc
        vs = values + vs_minus_v

        vs_t_plus_1 = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], dim=0)
        clipped_pg_rhos = _clip(rhos, clip_pg_rho_threshold)
        pg_advantages = clipped_pg_rhos * (rewards + discounts * vs_t_plus_1 - values)

    return VTraceReturns(vs=vs, pg_advantages=pg_advantages, log_rhos=log_rhos)


def vtrace_from_logits(
    behaviour_logits: Tensor,
    target_logits: Tensor,
    actions: Tensor,
    discounts: Tensor,
    rewards: Tensor,
    values: Tensor,
    bootstrap_value: Tensor,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
    clip_c_threshold: float | None = 1.0,
    lam: float = 1.0,
) -> VTraceReturns:
    """V-trace for categorical policies given as logits.

    behaviour_logits (mu), target_logits (pi): [T, B, A]; actions: [T, B] int64; the rest as in
    ``vtrace_from_importance_weights``, to which this delegates with

        log_rhos = log pi(a_t|x_t) - log mu(a_t|x_t).

    All returned tensors are detached (the policy-gradient loss recomputes log pi(a|x) with grad).
    """
    if tuple(behaviour_logits.shape) != tuple(target_logits.shape):
        raise ValueError(
            f"vtrace_from_logits: behaviour_logits shape {tuple(behaviour_logits.shape)} != "
            f"target_logits shape {tuple(target_logits.shape)}"
        )
    with torch.no_grad():
        behaviour_log_probs = categorical_log_prob(behaviour_logits.detach(), actions)
        target_log_probs = categorical_log_prob(target_logits.detach(), actions)
        log_rhos = target_log_probs - behaviour_log_probs
    returns = vtrace_from_importance_weights(
        log_rhos, discounts, rewards, values, bootstrap_value,
        clip_rho_threshold=clip_rho_threshold,
        clip_pg_rho_threshold=clip_pg_rho_threshold,
        clip_c_threshold=clip_c_threshold,
        lam=lam,
    )
    return VTraceReturns(
        vs=returns.vs,
        pg_advantages=returns.pg_advantages,
        log_rhos=returns.log_rhos,
        behaviour_action_log_probs=behaviour_log_probs,
        target_action_log_probs=target_log_probs,
    )
