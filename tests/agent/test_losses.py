"""IMPALA loss on a hand-computed example, gradient routing, GAE against its definition, PPO clipping."""

import math

import numpy as np
import pytest
import torch

from r2ac.agent.distributions import categorical_entropy
from r2ac.agent.losses import (
    baseline_loss,
    categorical_entropy_bonus,
    entropy_bonus,
    gae_advantages,
    impala_loss,
    normalize_advantages,
    policy_gradient_loss,
    ppo_clipped_surrogate_loss,
    ppo_loss,
    ppo_value_loss,
    step_rewards,
)

LN2 = math.log(2.0)


def _hand_example(reward_last=5.0):
    """T+1 = 3 steps, B = 1, A = 2, uniform policies (rho = 1)."""
    learner_outputs = {
        "policy_logits": torch.zeros(3, 1, 2, dtype=torch.float64, requires_grad=True),
        "baseline": torch.tensor([[0.5], [1.0], [2.0]], dtype=torch.float64, requires_grad=True),
    }
    batch = {
        "reward": torch.tensor([[9.0], [1.0], [reward_last]], dtype=torch.float64),  # row 0 unused
        "done": torch.tensor([[True], [False], [True]]),  # row 0 unused
        "action": torch.tensor([[1], [0], [1]]),
        "policy_logits": torch.zeros(3, 1, 2, dtype=torch.float64, requires_grad=True),
    }
    return learner_outputs, batch


def test_impala_loss_hand_computed():
    # After the [1:] / [:-1] shift: V = (0.5, 1.0), bootstrap 2.0, rewards (1, clip(5) = 1),
    # discounts (0.9, 0 because the episode ends at the last step).
    #   v_1 = r_1 + 0 = 1;  v_0 = r_0 + 0.9 v_1 = 1.9
    #   baseline advantages v - V = (1.4, 0)    -> baseline loss 0.5 * 1.96 = 0.98
    #   pg advantages r + gamma v_next - V = (1.9 - 0.5, 1 - 1) = (1.4, 0)
    #   pg loss = -log(1/2) * 1.4 = 1.4 ln 2;  entropy loss = 2 * (-ln 2)
    learner_outputs, batch = _hand_example()
    total, stats = impala_loss(learner_outputs, batch, discount=0.9, baseline_cost=0.5,
                               entropy_cost=0.01, reward_clip=1.0)
    pg, bl, ent = 1.4 * LN2, 0.98, -2 * LN2
    expected_total = pg + 0.5 * bl + 0.01 * ent
    assert total.item() == pytest.approx(expected_total, abs=1e-12)
    assert stats["total_loss"] == pytest.approx(expected_total, abs=1e-12)
    assert stats["pg_loss"] == pytest.approx(pg, abs=1e-12)
    assert stats["baseline_loss"] == pytest.approx(bl, abs=1e-12)
    assert stats["entropy_loss"] == pytest.approx(ent, abs=1e-12)
    assert stats["entropy"] == pytest.approx(LN2, abs=1e-12)
    assert stats["mean_value"] == pytest.approx(0.75, abs=1e-12)
    assert stats["mean_abs_advantage"] == pytest.approx(0.7, abs=1e-12)
    assert stats["mean_rho"] == pytest.approx(1.0, abs=1e-12)


def test_truncation_value_is_folded_into_the_cut_steps_reward():
    """Hand example with the last step cut by a time limit and V(final observation) = 3 reported: rewards
    (1, clip(5) + 0.9 * 3 = 3.7), the trace still cut there: v_1 = 3.7, v_0 = 1 + 0.9 * 3.7 = 4.33;
    baseline advantages (3.83, 2.7); the learner's own outputs get the gradient (the folded value none).
    Off (the default, truncation_bootstrap=False) or without the key, the hand example's loss."""
    learner_outputs, batch = _hand_example()
    batch["truncation_value"] = torch.tensor([[7.0], [0.0], [3.0]], dtype=torch.float64, requires_grad=True)
    r = step_rewards(batch, torch.float64, 0.9, 1.0, truncation_bootstrap=True)
    assert torch.allclose(r, torch.tensor([[1.0], [3.7]], dtype=torch.float64), atol=1e-12)
    assert not r.requires_grad
    total, stats = impala_loss(learner_outputs, batch, discount=0.9, baseline_cost=0.5, entropy_cost=0.0,
                               truncation_bootstrap=True)
    bl = 0.5 * (3.83 ** 2 + 2.7 ** 2)
    assert stats["baseline_loss"] == pytest.approx(bl, abs=1e-12)
    assert stats["pg_loss"] == pytest.approx((3.83 + 2.7) * LN2, abs=1e-12)
    total.backward()
    assert batch["truncation_value"].grad is None and learner_outputs["baseline"].grad is not None
    off, _ = impala_loss(learner_outputs, batch, discount=0.9, baseline_cost=0.5, entropy_cost=0.0)
    plain_outputs, plain = _hand_example()
    ref, _ = impala_loss(plain_outputs, plain, discount=0.9, baseline_cost=0.5, entropy_cost=0.0)
    assert off.item() == pytest.approx(ref.item(), abs=1e-12)
    assert torch.equal(step_rewards(plain, torch.float64, 0.9, 1.0, truncation_bootstrap=True),
                       step_rewards(batch, torch.float64, 0.9, 1.0))
    from r2ac.agent.a2c import a2c_loss  # the A2C reference folds it the same way: returns (4.33, 3.7)

    _, a2c = a2c_loss(learner_outputs, batch, discount=0.9, baseline_cost=0.5, entropy_cost=0.0,
                      truncation_bootstrap=True)
    assert a2c["baseline_loss"] == pytest.approx(0.5 * (3.83 ** 2 + 2.7 ** 2) / 2, abs=1e-12)


def test_impala_loss_reward_clip_off():
    # reward_clip = 0 disables clipping: v_1 = 5, v_0 = 1 + 4.5 = 5.5; adv = (5.0, 4.0).
    learner_outputs, batch = _hand_example(reward_last=5.0)
    _, stats = impala_loss(learner_outputs, batch, discount=0.9, reward_clip=0.0)
    assert stats["baseline_loss"] == pytest.approx(0.5 * (25.0 + 16.0), abs=1e-12)
    assert stats["pg_loss"] == pytest.approx(9.0 * LN2, abs=1e-12)


def test_impala_pg_gradient_flows_only_into_target_logits():
    learner_outputs, batch = _hand_example()
    total, _ = impala_loss(learner_outputs, batch, discount=0.9, baseline_cost=0.0,
                           entropy_cost=0.0)
    total.backward()
    logits_grad = learner_outputs["policy_logits"].grad
    assert logits_grad is not None and logits_grad[:-1].abs().sum() > 0
    assert torch.all(logits_grad[-1] == 0)  # the bootstrap step has no policy term
    assert batch["policy_logits"].grad is None  # behaviour logits: no gradient
    base_grad = learner_outputs["baseline"].grad
    assert base_grad is None or torch.all(base_grad == 0)  # pg advantages are constants

    # Expected gradient: d(-A log softmax(l)[a]) / dl = -A (onehot(a) - pi); step 0: A = 1.4, a = 0.
    torch.testing.assert_close(logits_grad[0, 0], torch.tensor([-0.7, 0.7], dtype=torch.float64))


def test_entropy_bonus_floor_values_and_gradient():
    h = torch.tensor([0.05, 0.2, 0.7, 1.1], dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(entropy_bonus(h), h)  # floor 0: the plain bonus
    b = entropy_bonus(h, 0.3)
    torch.testing.assert_close(b, torch.tensor([0.05, 0.2, 0.3, 0.3], dtype=torch.float64))
    b.sum().backward()  # the plain bonus's gradient below the floor, none above it
    torch.testing.assert_close(h.grad, torch.tensor([1.0, 1.0, 0.0, 0.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="floor must be >= 0"):
        entropy_bonus(h, -0.1)


def test_categorical_entropy_bonus_floor_is_a_fraction_of_ln_a():
    logits = torch.tensor([[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]], dtype=torch.float64)
    h, bonus = categorical_entropy_bonus(logits, 0.5)
    assert h[0].item() == pytest.approx(math.log(3), abs=1e-12)
    torch.testing.assert_close(bonus, torch.stack([h[0].new_tensor(0.5 * math.log(3)), h[1]]))  # h[1] < 0.55
    torch.testing.assert_close(categorical_entropy_bonus(logits)[1], h)
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"fraction of ln A in \[0, 1\]"):
            categorical_entropy_bonus(logits, bad)


def _floor_example_grad(entropy_cost, entropy_floor):
    """The hand example with step 0 made certain (logits (4, 0), H ~ 0.07) and step 1 leaning (logits
    (0.5, 0), H ~ 0.66), on-policy; returns (d loss / d learner logits, stats)."""
    learner_outputs, batch = _hand_example()
    logits = torch.zeros(3, 1, 2, dtype=torch.float64)
    logits[0, 0] = torch.tensor([4.0, 0.0], dtype=torch.float64)
    logits[1, 0] = torch.tensor([0.5, 0.0], dtype=torch.float64)
    learner_outputs["policy_logits"] = logits.clone().requires_grad_()
    batch["policy_logits"] = logits
    total, stats = impala_loss(learner_outputs, batch, discount=0.9, baseline_cost=0.0, entropy_cost=entropy_cost,
                               entropy_floor=entropy_floor)
    total.backward()
    return learner_outputs["policy_logits"].grad, stats


def test_impala_loss_entropy_floor_acts_only_on_steps_below_it():
    g_plain, _ = _floor_example_grad(1.0, 0.0)
    g_pg_only, _ = _floor_example_grad(0.0, 0.0)
    g_floor, stats = _floor_example_grad(1.0, 0.3 / LN2)  # a floor of 0.3 nats: 0.3 / ln 2 of ln A
    h0, h1 = (categorical_entropy(torch.tensor(z, dtype=torch.float64)).item() for z in ([4.0, 0.0], [0.5, 0.0]))
    assert h0 < 0.3 < h1
    for t in (0, 1):  # both steps' plain bonus gradients are not nil
        assert not torch.allclose(g_plain[t], g_pg_only[t])
    torch.testing.assert_close(g_floor[0], g_plain[0])    # below the floor: the plain bonus
    torch.testing.assert_close(g_floor[1], g_pg_only[1])  # above it: the policy gradient alone
    assert stats["entropy_loss"] == pytest.approx(-(h0 + 0.3), abs=1e-12)
    assert stats["entropy"] == pytest.approx((h0 + h1) / 2, abs=1e-12)  # the true mean entropy


def test_policy_gradient_loss_detaches_advantages():
    logits = torch.randn(4, 3, 5, requires_grad=True)
    advantages = torch.randn(4, 3, requires_grad=True)
    actions = torch.randint(0, 5, (4, 3))
    policy_gradient_loss(logits, actions, advantages).backward()
    assert logits.grad is not None and advantages.grad is None
    with pytest.raises(ValueError, match="advantages shape"):
        policy_gradient_loss(logits, actions, torch.zeros(4, 2))


def test_baseline_grad():
    adv = torch.tensor([[1.0, -2.0]], requires_grad=True)
    loss = baseline_loss(adv)
    assert loss.item() == pytest.approx(2.5)
    loss.backward()
    torch.testing.assert_close(adv.grad, adv.detach())


def test_impala_loss_shape_errors():
    learner_outputs, batch = _hand_example()
    batch["reward"] = batch["reward"][:2]
    with pytest.raises(ValueError, match="reward"):
        impala_loss(learner_outputs, batch)
    del batch["action"]
    with pytest.raises(KeyError, match="action"):
        impala_loss(learner_outputs, batch)


# -------------------------------------------------------------------------------------------- GAE

def _gae_direct(rewards, values, dones, bootstrap_value, gamma, lam):
    """A_t = sum_l (prod_{k<l} gamma lam (1 - d_{t+k})) delta_{t+l}, one term at a time."""
    r, v, d, vb = (np.asarray(x, dtype=np.float64) for x in (rewards, values, dones, bootstrap_value))
    T, B = v.shape
    out = np.zeros((T, B))
    for b in range(B):
        V = list(v[:, b]) + [vb[b]]
        deltas = [r[t, b] + gamma * (1.0 - d[t, b]) * V[t + 1] - V[t] for t in range(T)]
        for t in range(T):
            total = 0.0
            for l in range(T - t):
                weight = 1.0
                for k in range(l):
                    weight *= gamma * lam * (1.0 - d[t + k, b])
                total += weight * deltas[t + l]
            out[t, b] = total
    return out


@pytest.mark.parametrize("lam", [0.0, 0.95, 1.0])
def test_gae_matches_definition(lam):
    g = torch.Generator().manual_seed(11)
    T, B = 8, 5
    rewards = torch.randn(T, B, generator=g, dtype=torch.float64)
    values = torch.randn(T, B, generator=g, dtype=torch.float64)
    dones = torch.rand(T, B, generator=g, dtype=torch.float64) < 0.25
    bootstrap_value = torch.randn(B, generator=g, dtype=torch.float64)
    assert dones.any()
    adv = gae_advantages(rewards, values, dones, bootstrap_value, discount=0.97, gae_lambda=lam)
    expected = _gae_direct(rewards, values, dones, bootstrap_value, 0.97, lam)
    np.testing.assert_allclose(adv.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_gae_shape_error():
    with pytest.raises(ValueError, match="bootstrap_value"):
        gae_advantages(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2, dtype=torch.bool),
                       torch.zeros(3), 0.99, 0.95)


# -------------------------------------------------------------------------------------------- PPO

def _surrogate_grad(ratio, advantage, eps=0.2):
    log_probs = torch.tensor([math.log(ratio)], dtype=torch.float64, requires_grad=True)
    old = torch.zeros(1, dtype=torch.float64)
    adv = torch.tensor([advantage], dtype=torch.float64)
    loss = ppo_clipped_surrogate_loss(log_probs, old, adv, clip_eps=eps)
    loss.backward()
    return loss.item(), log_probs.grad.item()


@pytest.mark.parametrize(
    "ratio, advantage, clipped",
    [
        (1.3, 1.0, True),  # above 1 + eps with A > 0: clipped, no gradient
        (0.7, -1.0, True),  # below 1 - eps with A < 0: clipped, no gradient
        (1.3, -1.0, False),  # above 1 + eps with A < 0: unclipped (pessimistic) term
        (0.7, 1.0, False),  # below 1 - eps with A > 0: unclipped term
        (1.1, 1.0, False),  # inside the trust region
        (0.9, -1.0, False),
    ],
)
def test_ppo_clip_behaviour(ratio, advantage, clipped):
    loss, grad = _surrogate_grad(ratio, advantage)
    if clipped:
        bound = 1.2 if ratio > 1 else 0.8
        assert loss == pytest.approx(-bound * advantage, abs=1e-12)
        assert grad == 0.0
    else:
        assert loss == pytest.approx(-ratio * advantage, abs=1e-12)
        # d(-r A)/d log pi = -r A
        assert grad == pytest.approx(-ratio * advantage, abs=1e-12)


def test_ppo_clip_exactly_at_boundary():
    # At r = 1 + eps both terms are equal: the loss is continuous there.
    loss_in, _ = _surrogate_grad(1.2 - 1e-9, 1.0)
    loss_out, _ = _surrogate_grad(1.2 + 1e-9, 1.0)
    assert loss_in == pytest.approx(-1.2, abs=1e-8) and loss_out == pytest.approx(-1.2, abs=1e-8)


def test_ppo_value_loss_clipping():
    old = torch.tensor([0.0, 0.0, 0.0], dtype=torch.float64)
    returns = torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)
    values = torch.tensor([0.5, 2.0, 0.5], dtype=torch.float64, requires_grad=True)
    # unclipped: 0.5 * mean((0.5-1)^2, (2-1)^2, (0.5+1)^2) = 0.5 * mean(0.25, 1, 2.25)
    assert ppo_value_loss(values, old, returns).item() == pytest.approx(0.5 * 3.5 / 3)
    # clipped (eps 0.2): V_c = (0.2, 0.2, 0.2): (V_c - R)^2 = (0.64, 0.64, 1.44);
    # max with unclipped = (0.64, 1, 2.25)
    loss = ppo_value_loss(values, old, returns, clip_eps=0.2, reduction="sum")
    assert loss.item() == pytest.approx(0.5 * (0.64 + 1.0 + 2.25))
    loss.backward()
    # element 0 takes the clipped term (no gradient); elements 1, 2 the unclipped one: (V - R)
    torch.testing.assert_close(values.grad, torch.tensor([0.0, 1.0, 1.5], dtype=torch.float64))


def test_ppo_loss_combines_pieces():
    g = torch.Generator().manual_seed(12)
    N, A = 16, 4
    logits = torch.randn(N, A, generator=g, requires_grad=True)
    actions = torch.randint(0, A, (N,), generator=g)
    old_log_probs = torch.log_softmax(torch.randn(N, A, generator=g), -1).gather(
        -1, actions[:, None])[:, 0]
    raw = torch.randn(N, generator=g) * 3 + 1
    advantages = normalize_advantages(raw)
    assert advantages.mean().abs() < 1e-6 and (advantages.std() - 1).abs() < 1e-5
    values = torch.randn(N, generator=g, requires_grad=True)
    old_values, returns = torch.randn(N, generator=g), torch.randn(N, generator=g)
    log_probs = torch.log_softmax(logits, -1).gather(-1, actions[:, None])[:, 0]
    ent = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1)
    total, stats = ppo_loss(log_probs, old_log_probs, raw, values, old_values, returns, ent, clip_eps=0.2,
                            value_clip_eps=0.2, value_cost=0.5, entropy_cost=0.01)  # normalises raw
    expected = (ppo_clipped_surrogate_loss(log_probs, old_log_probs, advantages, 0.2)
                + 0.5 * ppo_value_loss(values, old_values, returns, 0.2) - 0.01 * ent.mean())
    assert total.item() == pytest.approx(expected.item(), rel=1e-6)
    assert set(stats) == {"pg_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"}
    assert 0.0 <= stats["clip_fraction"] <= 1.0 and stats["approx_kl"] >= 0.0
    unnormalised, _ = ppo_loss(log_probs, old_log_probs, raw, values, old_values, returns, ent, normalize=False)
    assert unnormalised.item() != pytest.approx(total.item())
    with pytest.raises(ValueError, match="reduction"):
        ppo_value_loss(values, old_values, returns, reduction="avg")


# --------------------------------------------------------------------------------------------------
# held_answer: where the loss's own terms hold a choice of known stake
# --------------------------------------------------------------------------------------------------

def test_held_answer_is_softmax_of_stake_over_weight_without_penalty_or_floor():
    from r2ac.agent.losses import held_answer

    for stake, c, A in [(0.1, 0.05, 3), (1.0, 0.25, 2), (0.3, 0.1, 5)]:
        odds = math.exp(stake / c)
        assert held_answer(stake, c, actions=A)["p"] == pytest.approx(odds / (odds + A - 1), abs=1e-6)


def test_held_answer_settles_where_the_penalty_balances_the_stake():
    from r2ac.agent.losses import held_answer

    for stake, lam, A in [(0.1, 0.001, 3), (1.0, 0.01, 4)]:
        out = held_answer(stake, 0.0, logit_penalty=lam, actions=A)
        p, g = out["p"], out["gap"]
        assert stake * p * (1 - p) == pytest.approx(lam * g * (A - 1) / A, rel=1e-4)  # d/dg of both terms
    # within a margin there is no pull: the gap goes past it (the right logit's offset is g (A - 1) / A)
    assert held_answer(0.1, 0.0, logit_penalty=0.001, actions=3, margin=10.0)["gap"] > 15.0
    assert held_answer(1.0, 0.05, 0.001, 3, 0.9)["p"] > held_answer(0.1, 0.05, 0.001, 3, 0.9)["p"]


def test_held_answer_agrees_with_minimising_the_losses_own_terms_over_free_logits():
    """The same optimum from the loss's functions (categorical_entropy_bonus with its floor, centred_logit_penalty)
    over A free logits, minimised by L-BFGS: the one-gap family loses nothing."""
    from r2ac.agent.losses import categorical_entropy_bonus, centred_logit_penalty, held_answer

    for stake, c, lam, floor in [(0.1, 0.05, 0.001, 0.9), (0.3, 0.05, 0.001, 0.9), (0.1, 0.01, 0.001, 0.9),
                                 (0.5, 0.1, 0.0, 0.0)]:
        z = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([z], max_iter=500, tolerance_grad=1e-12, tolerance_change=1e-14,
                                line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = -(torch.softmax(z, 0)[0] * stake + c * categorical_entropy_bonus(z, floor)[1]
                     - lam * centred_logit_penalty(z))
            loss.backward()
            return loss

        opt.step(closure)
        want = held_answer(stake, c, lam, 3, floor)["p"]
        assert float(torch.softmax(z.detach(), 0)[0]) == pytest.approx(want, abs=2e-4)


def test_held_answer_refuses_what_is_not_a_choice():
    from r2ac.agent.losses import held_answer

    with pytest.raises(ValueError, match="needs >= 2 actions"):
        held_answer(1.0, 0.05, actions=1)
    with pytest.raises(ValueError, match="floor_fraction must be in"):
        held_answer(1.0, 0.05, floor_fraction=1.5)
    with pytest.raises(ValueError, match="must be >= 0"):
        held_answer(1.0, -0.05)
