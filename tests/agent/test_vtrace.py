"""V-trace against a direct, step-by-step evaluation of IMPALA's explicit sum (Eq. 1)."""

import math

import numpy as np
import pytest
import torch

from r2ac.agent.vtrace import (
    VTraceReturns,
    vtrace_from_importance_weights,
    vtrace_from_logits,
)


def _random_inputs(seed, T=7, B=5, log_rho_scale=1.0, done_prob=0.25):
    g = torch.Generator().manual_seed(seed)
    log_rhos = log_rho_scale * torch.randn(T, B, generator=g, dtype=torch.float64)
    dones = torch.rand(T, B, generator=g, dtype=torch.float64) < done_prob
    discounts = (~dones).double() * 0.9
    rewards = torch.randn(T, B, generator=g, dtype=torch.float64)
    values = torch.randn(T, B, generator=g, dtype=torch.float64)
    bootstrap_value = torch.randn(B, generator=g, dtype=torch.float64)
    return log_rhos, discounts, rewards, values, bootstrap_value


def _clip(x, threshold):
    return x if threshold is None else min(threshold, x)


def _explicit_vtrace(log_rhos, discounts, rewards, values, bootstrap_value, rho_bar, pg_rho_bar, c_bar, lam=1.0):
    """v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) delta_t V, one term at a time."""
    lr, gam, r, v, vb = (np.asarray(x, dtype=np.float64) for x in
                         (log_rhos, discounts, rewards, values, bootstrap_value))
    T, B = v.shape
    vs = np.zeros((T, B))
    adv = np.zeros((T, B))
    for b in range(B):
        V = list(v[:, b]) + [vb[b]]  # V(x_0) .. V(x_T)
        rho = [math.exp(lr[t, b]) for t in range(T)]
        for s in range(T):
            total = V[s]
            for t in range(s, T):
                weight = 1.0
                for i in range(s, t):
                    weight *= gam[i, b] * lam * _clip(rho[i], c_bar)
                delta = _clip(rho[t], rho_bar) * (r[t, b] + gam[t, b] * V[t + 1] - V[t])
                total += weight * delta
            vs[s, b] = total
        for s in range(T):
            v_next = vs[s + 1, b] if s + 1 < T else vb[b]
            adv[s, b] = _clip(rho[s], pg_rho_bar) * (r[s, b] + gam[s, b] * v_next - V[s])
    return vs, adv


@pytest.mark.parametrize(
    "thresholds",
    [
        (1.0, 1.0, 1.0),  # the IMPALA defaults: active for rho > 1
        (None, None, None),  # no clipping at all
        (2.0, 0.5, 0.7),  # different levels for rho, pg rho and c
        (100.0, 100.0, 100.0),  # thresholds present but inactive
    ],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vtrace_matches_explicit_sum(thresholds, seed):
    rho_bar, pg_rho_bar, c_bar = thresholds
    inputs = _random_inputs(seed)
    out = vtrace_from_importance_weights(
        *inputs, clip_rho_threshold=rho_bar, clip_pg_rho_threshold=pg_rho_bar, clip_c_threshold=c_bar
    )
    vs, adv = _explicit_vtrace(*inputs, rho_bar, pg_rho_bar, c_bar)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out.pg_advantages.numpy(), adv, rtol=1e-12, atol=1e-12)
    assert out.vs.dtype == torch.float64


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95])
@pytest.mark.parametrize("seed", [0, 1])
def test_vtrace_lambda_matches_explicit_sum(lam, seed):
    """c_s = lambda min(c_bar, rho_s) (Espeholt et al. 2018, Sec. 4.1), against the explicit sum; lambda = 0
    leaves the one-step target V(x_s) + rho_s delta_s."""
    inputs = _random_inputs(seed, log_rho_scale=0.7)
    out = vtrace_from_importance_weights(*inputs, clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0,
                                         clip_c_threshold=1.0, lam=lam)
    vs, adv = _explicit_vtrace(*inputs, 1.0, 1.0, 1.0, lam=lam)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out.pg_advantages.numpy(), adv, rtol=1e-12, atol=1e-12)
    full = vtrace_from_importance_weights(*inputs, clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0,
                                          clip_c_threshold=1.0)
    assert not torch.allclose(out.vs, full.vs)  # lambda < 1 changes the targets
    if lam == 0.0:
        log_rhos, discounts, rewards, values, bootstrap = inputs
        v_next = torch.cat([values[1:], bootstrap[None]])
        one_step = values + log_rhos.exp().clamp(max=1.0) * (rewards + discounts * v_next - values)
        torch.testing.assert_close(out.vs, one_step, rtol=1e-12, atol=1e-12)


def test_clipping_changes_result_when_active():
    """Sanity: the parametrised thresholds matter (large log-rhos make clipping bite)."""
    inputs = _random_inputs(3, log_rho_scale=2.0)
    clipped = vtrace_from_importance_weights(*inputs)
    unclipped = vtrace_from_importance_weights(
        *inputs, clip_rho_threshold=None, clip_pg_rho_threshold=None, clip_c_threshold=None
    )
    assert not torch.allclose(clipped.vs, unclipped.vs)
    assert not torch.allclose(clipped.pg_advantages, unclipped.pg_advantages)


def _n_step_return(rewards, discounts, bootstrap_value):
    """Forward walk: sum_t (prod_{i<t} gamma_i) r_t + (prod_i gamma_i) V(x_T), stopping at cuts."""
    T, B = rewards.shape
    out = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            ret, scale = 0.0, 1.0
            for t in range(s, T):
                ret += scale * float(rewards[t, b])
                scale *= float(discounts[t, b])
                if scale == 0.0:
                    break
            ret += scale * float(bootstrap_value[b])
            out[s, b] = ret
    return out


def test_on_policy_vtrace_is_n_step_return():
    _, discounts, rewards, values, bootstrap_value = _random_inputs(4, T=9, B=6, done_prob=0.2)
    assert (discounts == 0).any(), "the test should cross episode ends"
    out = vtrace_from_importance_weights(
        torch.zeros_like(values), discounts, rewards, values, bootstrap_value
    )
    expected = _n_step_return(rewards, discounts, bootstrap_value)
    np.testing.assert_allclose(out.vs.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_returns_are_detached():
    log_rhos, discounts, rewards, values, bootstrap_value = _random_inputs(5)
    values.requires_grad_(True)
    bootstrap_value.requires_grad_(True)
    log_rhos.requires_grad_(True)
    out = vtrace_from_importance_weights(log_rhos, discounts, rewards, values, bootstrap_value)
    assert not out.vs.requires_grad and not out.pg_advantages.requires_grad


def test_shapes_and_trailing_batch_dims():
    inputs = _random_inputs(6, T=4, B=3)
    out = vtrace_from_importance_weights(*inputs)
    assert isinstance(out, VTraceReturns)
    assert out.vs.shape == (4, 3) and out.pg_advantages.shape == (4, 3)
    # [T, B1, B2] works too and equals the flattened computation.
    reshaped = [x.reshape(4, 3, 1) for x in inputs[:4]] + [inputs[4].reshape(3, 1)]
    out3 = vtrace_from_importance_weights(*reshaped)
    assert out3.vs.shape == (4, 3, 1)
    torch.testing.assert_close(out3.vs.reshape(4, 3), out.vs)


@pytest.mark.parametrize("bad", ["log_rhos", "discounts", "rewards", "bootstrap_value"])
def test_mismatched_shapes_raise_clear_error(bad):
    names = ["log_rhos", "discounts", "rewards", "values", "bootstrap_value"]
    inputs = dict(zip(names, _random_inputs(7, T=4, B=3)))
    inputs[bad] = inputs[bad][..., :2] if bad != "bootstrap_value" else torch.zeros(4, 3)
    with pytest.raises(ValueError, match=bad):
        vtrace_from_importance_weights(**inputs)


def test_vtrace_from_logits_matches_importance_weights():
    g = torch.Generator().manual_seed(8)
    T, B, A = 6, 4, 5
    behaviour_logits = torch.randn(T, B, A, generator=g, dtype=torch.float64)
    target_logits = torch.randn(T, B, A, generator=g, dtype=torch.float64, requires_grad=True)
    actions = torch.randint(0, A, (T, B), generator=g)
    _, discounts, rewards, values, bootstrap_value = _random_inputs(8, T=T, B=B)
    out = vtrace_from_logits(
        behaviour_logits, target_logits, actions, discounts, rewards, values, bootstrap_value
    )
    log_pi = torch.log_softmax(target_logits.detach(), -1).gather(-1, actions[..., None])[..., 0]
    log_mu = torch.log_softmax(behaviour_logits, -1).gather(-1, actions[..., None])[..., 0]
    torch.testing.assert_close(out.log_rhos, log_pi - log_mu)
    torch.testing.assert_close(out.target_action_log_probs, log_pi)
    torch.testing.assert_close(out.behaviour_action_log_probs, log_mu)
    ref = vtrace_from_importance_weights(log_pi - log_mu, discounts, rewards, values, bootstrap_value)
    torch.testing.assert_close(out.vs, ref.vs)
    torch.testing.assert_close(out.pg_advantages, ref.pg_advantages)
    assert not out.log_rhos.requires_grad
