"""The A2C reference learner, the learner's gradient diagnostics and ``r2ac bench memory``."""

import copy
import csv
import json
import math
import os

import pytest
import torch

from r2ac.agent.a2c import A2CLearner, a2c_loss, nstep_returns
from r2ac.agent.actor import Actor
from r2ac.agent.learner import Learner, gradient_diagnostics
from r2ac.agent.losses import impala_loss, max_abs_reward, reward_unit
from r2ac.agent.nets import AgentNet
from r2ac.agent.trajectory import concat
from r2ac.config import ConfigError, load_config
from r2ac.cores.rtrl import CarryRecorder
from r2ac.envs import make_vec_env

M = 6


def _batch(seed=0, dtype=torch.float64, learning="rtrl", K=3):
    torch.manual_seed(seed)
    venv = make_vec_env("cue", 4, seed, span=7, obs="vector")
    net = AgentNet(venv.observation_shape, venv.num_actions, stem="mlp", stem_channels=[], stem_fc=8, core="elstm",
                   hidden_size=5, learning=learning, core_options={"forget_bias_init": 1.0}).to(dtype)
    net.freeze_stem()
    actor = Actor(copy.deepcopy(net), venv, M, seed=seed)
    trajs = [actor.rollout() for _ in range(K)]
    return net, trajs


def _inputs(t):
    return {"obs": t["obs"], "reward": t["reward"], "action": t["action"], "done": t["done"]}


def test_nstep_returns_match_the_explicit_sum():
    g = torch.Generator().manual_seed(0)
    T, B = 7, 3
    r, d = torch.rand(T, B, generator=g, dtype=torch.float64), torch.rand(T, B, generator=g, dtype=torch.float64)
    boot = torch.rand(B, generator=g, dtype=torch.float64)
    G = nstep_returns(r, d, boot)
    for t in range(T):
        ref, disc = torch.zeros(B, dtype=torch.float64), torch.ones(B, dtype=torch.float64)
        for u in range(t, T):
            ref += disc * r[u]
            disc = disc * d[u]
        assert torch.allclose(G[t], ref + disc * boot, atol=1e-14)


@pytest.mark.parametrize("lam", [0.0, 0.6, 0.95])
def test_lambda_returns_are_gae_and_on_policy_vtrace(lam):
    """learner.vtrace_lambda in A2C: G_t - V(x_t) is GAE(lambda), sum_k (gamma lambda)^k delta_{t+k} with the
    discounts' episode ends; and the returns are on-policy V-trace's targets with the same lambda."""
    from r2ac.agent.vtrace import vtrace_from_importance_weights

    g = torch.Generator().manual_seed(1)
    T, B = 7, 3
    r, v = torch.randn(T, B, generator=g, dtype=torch.float64), torch.randn(T, B, generator=g, dtype=torch.float64)
    d = (torch.rand(T, B, generator=g, dtype=torch.float64) > 0.3).double() * 0.9
    boot = torch.randn(B, generator=g, dtype=torch.float64)
    G = nstep_returns(r, d, boot, v, lam)
    v_next = torch.cat([v[1:], boot[None]])
    delta = r + d * v_next - v
    for t in range(T):
        gae, w = torch.zeros(B, dtype=torch.float64), torch.ones(B, dtype=torch.float64)
        for u in range(t, T):
            gae += w * delta[u]
            w = w * d[u] * lam
        torch.testing.assert_close(G[t] - v[t], gae, rtol=1e-12, atol=1e-12)
    on_policy = vtrace_from_importance_weights(torch.zeros(T, B, dtype=torch.float64), d, r, v, boot, lam=lam)
    torch.testing.assert_close(G, on_policy.vs, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="needs the values"):
        nstep_returns(r, d, boot, lam=0.5)


@pytest.mark.parametrize("cls", [Learner, A2CLearner], ids=["impala", "a2c"])
def test_learner_vtrace_lambda_reaches_the_loss(cls):
    """learner.vtrace_lambda: the learners' loss is their loss function's with that lambda."""
    from r2ac.config import apply_overrides

    net, trajs = _batch()
    t = trajs[-1]
    with torch.no_grad():
        out, _ = net(_inputs(t), t["initial_state"], return_state=False)
    losses = {}
    for lam in (1.0, 0.5):
        cfg = apply_overrides(load_config(None), [f"learner.vtrace_lambda={lam}"]).learner
        learner = cls(copy.deepcopy(net), cfg, 10**6)
        loss, _ = learner.loss(out, t)
        fn = a2c_loss if cls is A2CLearner else impala_loss
        key = "lam" if cls is A2CLearner else "vtrace_lambda"
        ref, _ = fn(out, t, discount=cfg.discount, baseline_cost=cfg.baseline_cost,
                    entropy_cost=learner.entropy_weight(), reward_clip=cfg.reward_clip,
                    entropy_floor=cfg.entropy_floor, logit_penalty=learner.logit_penalty_weight(),
                    logit_margin=cfg.logit_margin, **{key: lam})
        assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
        losses[lam] = loss.item()
    assert losses[0.5] != pytest.approx(losses[1.0], rel=1e-9)


def test_on_policy_a2c_advantage_equals_vtrace_pg_advantage():
    """With the behaviour policy equal to the learner's (no lag), V-trace's targets are the n-step returns:
    the A2C and IMPALA losses see the same advantages; only the reduction (mean vs sum) differs."""
    net, trajs = _batch()
    t = trajs[-1]
    with torch.no_grad():
        out, _ = net(_inputs(t), t["initial_state"], return_state=False)
    t = dict(t, policy_logits=torch.cat([t["policy_logits"][:1], out["policy_logits"][:-1]]))
    _, si = impala_loss(out, t, discount=0.9, baseline_cost=0.0, entropy_cost=0.0, reward_clip=0.0)
    _, sa = a2c_loss(out, t, discount=0.9, baseline_cost=0.0, entropy_cost=0.0, reward_clip=0.0)
    assert math.isclose(si["mean_abs_advantage"], sa["mean_abs_advantage"], rel_tol=1e-12)
    assert math.isclose(si["pg_loss"], sa["pg_loss"] * M * 4, rel_tol=1e-9)


def test_a2c_loss_entropy_floor():
    """learner.entropy_floor reaches the A2C loss too: at 1 (the floor at ln A, above every entropy) it is the
    plain bonus; at a floor below every step's entropy the bonus has no gradient, as with no bonus."""
    net, trajs = _batch()
    t = trajs[-1]

    def grad(cost, floor):
        with torch.no_grad():
            o = net(_inputs(t), t["initial_state"], return_state=False)[0]
        out = {"policy_logits": o["policy_logits"].requires_grad_(), "baseline": o["baseline"]}
        loss, _ = a2c_loss(out, t, discount=0.9, baseline_cost=0.0, entropy_cost=cost, reward_clip=0.0,
                           entropy_floor=floor)
        loss.backward()
        return out["policy_logits"].grad

    g_plain = grad(1.0, 0.0)
    g_none = grad(0.0, 0.0)
    assert not torch.allclose(g_plain, g_none)
    torch.testing.assert_close(grad(1.0, 1.0), g_plain)
    torch.testing.assert_close(grad(1.0, 1e-3), g_none)  # an untrained policy: every H far above 1e-3 ln A


def test_reward_unit_is_the_largest_clipped_reward():
    r = torch.tensor([[0.0, -0.02], [0.01, 0.0]], dtype=torch.float64)
    assert max_abs_reward(r) == 0.02 and max_abs_reward(r, reward_clip=1.0) == 0.02
    assert max_abs_reward(torch.tensor([3.0, -5.0])) == 5.0 and max_abs_reward(torch.tensor([3.0, -5.0]), 1.0) == 1.0
    assert reward_unit(0.0) == 1.0 and reward_unit(0.02) == 0.02


@pytest.mark.parametrize("cls", [Learner, A2CLearner])
def test_entropy_cap_bounds_the_bonus_by_the_tasks_reward_unit(cls):
    """float64: with learner.entropy_cap an update is the uncapped update with entropy_cost replaced by
    min(entropy_cost, entropy_cap * u), u the largest |reward| trained on so far (row 0 of a trajectory, the
    previous one's last step, is not trained on; rewards count after reward_clip), 1 before any nonzero
    reward; u is kept across updates and in the learner's state."""
    net, trajs = _batch()
    batch = concat(trajs)
    batch["reward"] = torch.zeros_like(batch["reward"])
    batch["reward"][0, 2] = 5.0                     # row 0: not trained on
    batch["reward"][3, 1], batch["reward"][5, 0] = -1 / 32, 1 / 64  # exact in float32

    def learner(*overrides):
        cfg = load_config(None, ["learner.lr_schedule=constant", "learner.entropy_cost=0.5",
                                 "learner.entropy_floor=0", *overrides]).learner  # no floor: a gradient at any H
        return cls(copy.deepcopy(net), cfg, 10**6)

    capped = learner("learner.entropy_cap=2")
    assert capped.entropy_weight() == 0.5           # no reward seen: u = 1, min(0.5, 2)
    stats = capped.update(batch)
    assert capped.max_abs_reward == 1 / 32 and stats["entropy_weight"] == 2 / 32
    plain = learner("learner.entropy_cap=0", f"learner.entropy_cost={2 / 32}")
    assert plain.update(batch)["entropy_weight"] == 2 / 32
    grads = [[p.grad for p in x.net.trainable_parameters() if p.grad is not None] for x in (capped, plain)]
    assert len(grads[0]) == len(grads[1]) > 0
    for a, b in zip(*grads):  # the update's gradient (Adam's first step hides a gradient's scale)
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
    uncapped = learner("learner.entropy_cap=0")
    assert uncapped.update(batch)["entropy_weight"] == 0.5
    assert any(not torch.allclose(a.grad, b.grad) for a, b in zip(capped.net.trainable_parameters(),
                                                                   uncapped.net.trainable_parameters())
               if a.grad is not None)
    assert learner("learner.entropy_cap=64").update(batch)["entropy_weight"] == 0.5  # the cap above the cost

    quiet = dict(batch, reward=batch["reward"] * 0.1)  # a later batch of smaller rewards keeps the unit
    assert capped.update(quiet)["entropy_weight"] == 2 / 32
    loud = dict(batch, reward=batch["reward"] * 1000)  # 31.25 and 15.6, clipped to reward_clip = 1
    assert capped.update(loud)["entropy_weight"] == 0.5
    resumed = learner("learner.entropy_cap=2")
    resumed.load_state_dict(capped.state_dict())
    assert resumed.max_abs_reward == 1.0 and resumed.updates == 3
    old = {k: v for k, v in capped.state_dict().items() if k != "max_abs_reward"}  # a checkpoint from before
    resumed.load_state_dict(old)
    assert resumed.max_abs_reward == 0.0 and resumed.entropy_weight() == 0.5


def test_carry_recorder_splits_the_gradient_into_carry_and_segment():
    """float64: the recorded correction is exactly the RTRL gradient minus the truncated gradient of the same
    segment from the same state (sensitivities zeroed), and the diagnostics report its norm."""
    net, trajs = _batch()
    t = trajs[-1]
    assert any(v.abs().sum() > 0 for k, v in t["initial_state"].items() if k.startswith("dc_"))

    def grads(state):
        net.zero_grad()
        with CarryRecorder() as rec:
            out, _ = net(_inputs(t), state, return_state=False)
            impala_loss(out, t, discount=0.9)[0].backward()
        return {p: p.grad.clone() for p in net.core.recurrent_parameters()}, rec.corrections

    full, corr = grads(t["initial_state"])
    zeroed = {k: (v if k == "c" else torch.zeros_like(v)) for k, v in t["initial_state"].items()}
    trunc, _ = grads(zeroed)
    assert set(corr) == set(full)
    for p in full:
        assert torch.allclose(full[p] - trunc[p], corr[p], atol=1e-13, rtol=0)
    grads(t["initial_state"])
    d = gradient_diagnostics(net.core.recurrent_parameters(), corr, t["initial_state"], net.core.sensitivity_keys)
    ref = math.sqrt(sum(float(c.pow(2).sum()) for c in corr.values()))
    assert math.isclose(d["carry_grad_norm"], ref, rel_tol=1e-12) and d["segment_grad_norm"] > 0
    assert d["sensitivity_rms"] > 0
    assert CarryRecorder._active == []


def test_tbptt_learner_reports_no_carry():
    net, trajs = _batch(learning="tbptt", dtype=torch.float32)
    stats = Learner(net, load_config(None).learner, 10**6).update(concat(trajs))
    assert "carry_grad_norm" not in stats and "end_abs_advantage" in stats


@pytest.mark.parametrize("optimizer", ["rmsprop", "adam"])
def test_learners_train_and_report(optimizer):
    net, trajs = _batch(dtype=torch.float32)
    cfg = load_config(None, [f"learner.optimizer={optimizer}", "learner.learning_rate=1e-3"]).learner
    for cls in (Learner, A2CLearner):
        learner = cls(copy.deepcopy(net), cfg, 10**6)
        assert type(learner.optimizer).__name__ == {"rmsprop": "RMSprop", "adam": "Adam"}[optimizer]
        stats = learner.update(concat(trajs))
        assert learner.updates == 1 and stats["carry_grad_norm"] > 0 and stats["grad_norm"] > 0
        assert {"end_value", "end_abs_advantage", "end_entropy", "policy_lag_mean"} <= set(stats)


def test_amsgrad_steps_shrink_with_the_gradient_where_adam_does_not():
    """learner.adam_amsgrad: after large gradients, gradients 100x smaller move AMSGrad's weight by a small
    fraction of the rate, while Adam, whose second moment follows them down, takes full-size steps again."""
    from r2ac.agent.learner import make_optimizer

    def moves(amsgrad):
        w = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
        cfg = load_config(None, ["learner.learning_rate=0.01", f"learner.adam_amsgrad={amsgrad}"]).learner
        opt = make_optimizer([w], cfg)
        assert opt.defaults["amsgrad"] is amsgrad
        for g in [1.0] * 20 + [0.01] * 8000:
            w.grad = torch.tensor([g], dtype=torch.float64)
            before = float(w)
            opt.step()
        return abs(float(w) - before), opt.state_dict()["state"][0]

    adam, _ = moves(False)
    ams, state = moves(True)
    assert adam > 0.5 * 0.01 and ams < 0.15 * 0.01 and "max_exp_avg_sq" in state  # checkpointed with the optimizer


def test_adam_beta2_sets_how_long_the_second_moment_remembers():
    """learner.adam_beta2: 8000 updates after gradients drop 100-fold, 0.999's running mean has forgotten the
    large ones (full-size steps again) while 0.9999's still holds them (small steps)."""
    from r2ac.agent.learner import make_optimizer

    def last_move(beta2):
        w = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
        cfg = load_config(None, ["learner.learning_rate=0.01", f"learner.adam_beta2={beta2}",
                                 "learner.adam_amsgrad=false"]).learner  # plain Adam: AMSGrad keeps the largest
        opt = make_optimizer([w], cfg)
        assert opt.defaults["betas"] == (0.9, beta2)
        for g in [1.0] * 2000 + [0.01] * 8000:
            w.grad = torch.tensor([g], dtype=torch.float64)
            before = float(w)
            opt.step()
        return abs(float(w) - before)

    assert last_move(0.999) > 0.5 * 0.01 and last_move(0.9999) < 0.2 * 0.01
    with pytest.raises(ConfigError, match="adam_beta2"):
        load_config(None, ["learner.adam_beta2=1.0"])


def test_categorical_kl_and_the_lr_scale_rule():
    from r2ac.agent.distributions import categorical_kl
    from r2ac.agent.learner import adapt_lr_scale

    g = torch.Generator().manual_seed(0)
    p = torch.randn(4, 3, 5, generator=g, dtype=torch.float64)
    q = torch.randn(4, 3, 5, generator=g, dtype=torch.float64)
    ref = torch.distributions.kl_divergence(torch.distributions.Categorical(logits=p),
                                            torch.distributions.Categorical(logits=q))
    torch.testing.assert_close(categorical_kl(p, q), ref, rtol=1e-12, atol=1e-12)
    assert torch.equal(categorical_kl(p, p), torch.zeros(4, 3, dtype=torch.float64))
    # above twice the target: down by 1.5; below half: up by 1.5 but never above 1; in between: kept; floor
    assert adapt_lr_scale(1.0, 0.05, 0.01) == pytest.approx(1 / 1.5)
    assert adapt_lr_scale(0.5, 0.001, 0.01) == pytest.approx(0.75) and adapt_lr_scale(0.9, 0.0, 0.01) == 1.0
    assert adapt_lr_scale(0.5, 0.015, 0.01) == 0.5 and adapt_lr_scale(0.011, 1.0, 0.01) == 0.01


@pytest.mark.parametrize("cls", [Learner, A2CLearner], ids=["impala", "a2c"])
def test_kl_target_measures_each_update_and_scales_the_next_rate(cls):
    """learner.kl_target: update_kl is KL(pi_before || pi_after) on the batch, the policy from the same
    initial states before and after the step; above twice the target the next update's rate is 1/1.5 of the
    configured one (the optimizer's lr), and the factor is checkpointed. log_update_kl logs it, no control."""
    from r2ac.agent.distributions import categorical_kl

    net, trajs = _batch()
    batch = concat(trajs)
    inputs = _inputs(batch)
    cfg = load_config(None, ["learner.kl_target=1e-12", "learner.lr_schedule=constant"]).learner
    learner = cls(copy.deepcopy(net), cfg, 10**6)
    with torch.no_grad():
        before = learner.net(inputs, batch["initial_state"], return_state=False)[0]["policy_logits"]
    stats = learner.update(batch)
    with torch.no_grad():
        after = learner.net(inputs, batch["initial_state"], return_state=False)[0]["policy_logits"]
    kl = categorical_kl(before[:-1], after[:-1]).mean().item()
    assert stats["update_kl"] == pytest.approx(kl, rel=1e-9) and kl > 0
    assert stats["lr_scale"] == learner.lr_scale == pytest.approx(1 / 1.5)
    learner.update(batch)
    assert learner.optimizer.param_groups[0]["lr"] == pytest.approx(cfg.learning_rate / 1.5)
    assert learner.lr_scale == pytest.approx(1 / 1.5 ** 2)
    fresh = cls(copy.deepcopy(net), cfg, 10**6)
    fresh.load_state_dict(learner.state_dict())
    assert fresh.lr_scale == learner.lr_scale
    old = {k: v for k, v in learner.state_dict().items() if k != "lr_scale"}  # a checkpoint from before the key
    fresh.load_state_dict(old)
    assert fresh.lr_scale == 1.0
    logged = cls(copy.deepcopy(net), load_config(None, ["learner.log_update_kl=true"]).learner, 10**6)
    assert logged.update(batch)["update_kl"] > 0 and logged.lr_scale == 1.0
    assert "update_kl" not in cls(copy.deepcopy(net), load_config(None).learner, 10**6).update(batch)


def test_clipped_policy_gradient_loss():
    """PPO's clipped surrogate: its value by hand; at ratio 1 the gradient of the plain policy-gradient loss;
    no gradient from a step whose ratio moved past the clip in its advantage's direction."""
    from r2ac.agent.losses import clipped_policy_gradient_loss, policy_gradient_loss

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    actions = torch.randint(0, 4, (5, 3), generator=g)
    adv = torch.randn(5, 3, generator=g, dtype=torch.float64)
    log_pi = torch.log_softmax(logits, -1).gather(-1, actions[..., None])[..., 0]
    same = clipped_policy_gradient_loss(logits, actions, adv, log_pi.detach(), 0.2)
    assert same.item() == pytest.approx(-adv.sum().item(), rel=1e-12)
    g1, = torch.autograd.grad(same, logits)
    g2, = torch.autograd.grad(policy_gradient_loss(logits, actions, adv), logits)
    torch.testing.assert_close(g1, g2, rtol=1e-12, atol=1e-12)
    old = log_pi.detach() - torch.log(torch.tensor(1.5, dtype=torch.float64))  # ratio 1.5 everywhere
    loss = clipped_policy_gradient_loss(logits, actions, adv, old, 0.2)
    expect = -torch.min(1.5 * adv, 1.2 * adv).sum()
    assert loss.item() == pytest.approx(expect.item(), rel=1e-12)
    grad, = torch.autograd.grad(loss, logits)
    assert torch.all(grad[adv > 0] == 0) and torch.any(grad[adv < 0] != 0)  # past 1 + clip with A > 0: held


def test_learner_epochs_add_clipped_passes_with_the_first_passs_targets():
    """learner.epochs=2: after the first (IMPALA) step, one more step on the clipped surrogate against the
    first pass's policy with its V-trace targets, from the batch's initial state and sensitivities; the same
    as doing that second step by hand. epochs=1 is the plain learner; A2C refuses more passes."""
    from r2ac.agent.losses import impala_targets
    from r2ac.runtime.pipeline import check_a2c

    net, trajs = _batch()
    batch = concat(trajs)
    inputs = _inputs(batch)
    cfg = load_config(None, ["learner.epochs=2", "learner.clip=0.1", "learner.lr_schedule=constant"]).learner
    learner = Learner(copy.deepcopy(net), cfg, 10**6)
    stats = learner.update(batch)
    assert stats["passes"] == 2 and 0.0 <= stats["clip_fraction"] <= 1.0 and learner.updates == 1
    assert learner.optimizer.state_dict()["state"][0]["step"] == 2

    ref = Learner(copy.deepcopy(net), load_config(None, ["learner.lr_schedule=constant"]).learner, 10**6)
    with torch.no_grad():
        first = ref.net(inputs, batch["initial_state"], return_state=False)[0]
    ref.update(batch)
    targets = impala_targets(first, batch, discount=cfg.discount, reward_clip=cfg.reward_clip)
    ref.optimizer.zero_grad()
    out = ref.net(inputs, batch["initial_state"], return_state=False)[0]
    loss, _ = impala_loss(out, batch, discount=cfg.discount, baseline_cost=cfg.baseline_cost,
                          entropy_cost=ref.entropy_weight(), reward_clip=cfg.reward_clip,
                          entropy_floor=cfg.entropy_floor, logit_penalty=ref.logit_penalty_weight(),
                          logit_margin=cfg.logit_margin, targets=targets, clip=0.1)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(ref.net.trainable_parameters(), cfg.grad_norm_clip)
    ref.optimizer.step()
    ref.net.core.project_()
    for a, b in zip(learner.net.parameters(), ref.net.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="one pass"):
        A2CLearner(copy.deepcopy(net), cfg, 10**6).loss(out, batch, targets)
    with pytest.raises(ConfigError, match="learner.epochs=1"):
        check_a2c(load_config(None, ["algo=a2c", "env.num_envs=8", "learner.batch_size=8", "learner.epochs=2"]))


def test_a2c_config_is_checked(tmp_path):
    from r2ac.runtime.pipeline import run_training

    for bad, needle in ((["runtime.kind=ray"], "runtime.kind=local"),
                        (["learner.batch_size=4"], "learner.batch_size=32"),
                        (["runtime.num_actors=2"], "num_actors=1")):
        cfg = load_config("configs/quickstart.yaml", ["algo=a2c", f"run_dir={tmp_path}"] + bad)
        with pytest.raises(ConfigError, match=needle):
            run_training(cfg)


def test_bench_memory_runs_and_writes_tables(tmp_path, capsys):
    from r2ac.bench.memory import main

    out = tmp_path / "bm"
    assert main(["--tasks", "cue-vector", "--spans", "3", "--methods", "rtrl,a2c", "--seeds", "0",
                 "--minutes", "0.1", "--jobs", "2", "--out", str(out), "env.num_envs=8", "learner.batch_size=8",
                 "model.hidden_size=8", "logger.log_interval_s=0.5"]) == 0
    text = capsys.readouterr().out
    assert "cue-vector" in text and "a2c" in text and "median_solved_min" in text
    rows = list(csv.DictReader(open(out / "memory_runs.csv")))
    assert {r["method"] for r in rows} == {"rtrl", "a2c"} and all(float(r["steps"]) > 0 for r in rows)
    assert all(0.0 <= float(r["best"]) <= 1.0 for r in rows)
    # each run's final weights also played 3 episodes per fresh env (fresh.json, computed once)
    assert all(0.0 <= float(r["fresh"]) <= 1.0 for r in rows)
    fresh = json.loads((out / "runs" / "cue-vector-3-rtrl-s0" / "fresh.json").read_text())
    assert fresh["episodes"] == 24 and fresh["mean"] == pytest.approx(float(rows[0]["fresh"]))
    assert (out / "memory.png").stat().st_size > 0
    table = (out / "memory.md").read_text().splitlines()
    assert len(table) == 4 and table[2].startswith("| cue-vector | 3 | rtrl | ") and table[3].count("|") == 12
    # --report trains nothing: the table comes from the finished runs of the selection (a2c only here)
    before = {r["method"]: r["steps"] for r in rows}
    assert main(["--tasks", "cue-vector", "--spans", "3", "--methods", "a2c,tbptt", "--seeds", "0", "--report",
                 "--out", str(out), "env.num_envs=8", "learner.batch_size=8", "model.hidden_size=8"]) == 0
    rows = list(csv.DictReader(open(out / "memory_runs.csv")))
    assert [(r["method"], r["steps"]) for r in rows] == [("a2c", before["a2c"])]
    assert not (out / "runs" / "cue-vector-3-tbptt-s0").exists()
    with pytest.raises(SystemExit):
        main(["--tasks", "copy", "--spans", "3", "--report", "--out", str(out)])  # nothing finished there
    with pytest.raises(SystemExit):
        main(["--tasks", "nope", "--out", str(out)])


def short_held_out_run(task: str, spans: str, out, extra=()) -> list:
    """A 3-second RTRL run of a held-out task by ``r2ac bench memory`` (a tiny agent); its memory_runs.csv rows."""
    from r2ac.bench.memory import main

    assert main(["--tasks", task, "--spans", spans, "--methods", "rtrl", "--seeds", "0", "--minutes", "0.05",
                 "--jobs", "1", "--out", str(out), "env.num_envs=4", "learner.batch_size=4", "model.hidden_size=8",
                 "logger.log_interval_s=0.5", *extra]) == 0
    return list(csv.DictReader(open(out / "memory_runs.csv")))


def test_bench_memory_runs_held_out_popgym_tasks_at_their_own_span(tmp_path, capsys):
    """popgym:<Name> runs once, at its episode length whatever --spans says (RepeatFirstEasy: 51 steps),
    with full BPTT over that length for tbptt-full; a name POPGym lacks, or a task without a fixed episode
    length, is refused before any run starts."""
    from r2ac.bench.memory import METHODS, main, popgym_span, run_config

    out = tmp_path / "bm"
    rows = short_held_out_run("popgym:RepeatFirstEasy", "3,7", out)
    assert [(r["task"], r["span"], r["method"]) for r in rows] == [("popgym:RepeatFirstEasy", "51", "rtrl")]
    assert float(rows[0]["steps"]) > 0 and -1.0 <= float(rows[0]["fresh"]) <= 1.0
    assert (out / "runs" / "popgym-RepeatFirstEasy-51-rtrl-s0" / "metrics.csv").exists()
    cfg = run_config("configs/quickstart.yaml", "popgym:RepeatFirstEasy", 3, "tbptt-full", 0, str(tmp_path / "c"))
    assert (cfg.env.id, cfg.learner.unroll_length, cfg.model.learning) == ("popgym:RepeatFirstEasy", 51, "tbptt")
    # full BPTT's segments are whole episodes only with the envs in step; the other methods keep the default
    cue = {m: run_config("configs/quickstart.yaml", "cue-pixels", 100, m, 0, str(tmp_path / m)) for m in METHODS}
    assert not cue["tbptt-full"].env.desync and cue["tbptt-full"].learner.unroll_length == 102
    assert all(c.env.desync for m, c in cue.items() if m != "tbptt-full")
    # the feed-forward method drops the settings' eLSTM options and keeps its own core's from an override
    assert cue["feedforward"].model.core == "none" and cue["feedforward"].model.core_options == {}
    ff = run_config("configs/quickstart.yaml", "cue-pixels", 100, "feedforward", 0, str(tmp_path / "ff"),
                    ["model.core_options.contractive=false", "model.core_options.activation=tanh"])
    assert ff.model.core_options == {"activation": "tanh"}
    with pytest.raises(SystemExit):
        main(["--tasks", "popgym:Nope", "--out", str(out)])
    assert "unknown POPGym task 'Nope'" in capsys.readouterr().err
    # tasks that state no max_episode_length: Concentration's episode_length; HigherLower's deck of 52 cards,
    # dealt one a step to the last, measured by playing one episode
    assert popgym_span("popgym:ConcentrationEasy") == 104 and popgym_span("popgym:HigherLowerEasy") == 51


def test_bench_memory_runs_held_out_minigrid_tasks_at_their_max_steps(tmp_path, capsys):
    """minigrid:<Id> runs once, its span MiniGrid's max_steps (MemoryS7: 5 x 7^2 = 245), trained and evaluated
    on fresh envs; an id MiniGrid lacks is refused before any run starts, naming the Memory tasks."""
    pytest.importorskip("minigrid")
    from r2ac.bench.memory import main

    out = tmp_path / "mg"
    rows = short_held_out_run("minigrid:MemoryS7", "3", out)
    assert [(r["task"], r["span"], r["method"]) for r in rows] == [("minigrid:MemoryS7", "245", "rtrl")]
    assert float(rows[0]["steps"]) > 0 and 0.0 <= float(rows[0]["fresh"]) <= 1.0
    with pytest.raises(SystemExit):
        main(["--tasks", "minigrid:MemoryS99", "--out", str(out)])
    assert "unknown MiniGrid task 'MemoryS99'" in capsys.readouterr().err


def test_bench_memory_runs_a_users_gym_env_at_the_span_its_options_give(tmp_path, capsys):
    """gym:<module>:<class> (a user's own Gymnasium env, here examples/colour_patch.py) runs once, its span the
    length of a random episode under the env options the overrides give (span 5: 7 steps); a registered id
    takes its time limit; a module that does not import is refused before any run, naming the fix."""
    from r2ac.bench.memory import gym_span, main, override_env_options, run_config

    task = "gym:examples.colour_patch:ColourPatch"
    out = tmp_path / "user"
    rows = short_held_out_run(task, "3", out, ["env.options.span=5", "env.options.colours=3"])
    assert [(r["task"], r["span"], r["method"]) for r in rows] == [(task, "7", "rtrl")]
    assert float(rows[0]["steps"]) > 0 and 0.0 <= float(rows[0]["fresh"]) <= 1.0
    assert rows[0]["options"] == "colours=3 span=5"  # a variant of the task's defaults, as --compare reads it
    assert override_env_options("configs/quickstart.yaml", ["env.options.span=5", "learner.batch_size=4"]) == \
        {"span": 5}
    assert gym_span(task) == 152 and gym_span(task, {"span": 40}) == 42 and gym_span("gym:CartPole-v1") == 500
    cfg = run_config("configs/quickstart.yaml", task, 42, "tbptt-full", 0, str(tmp_path / "c"), ["env.options.span=40"])
    assert (cfg.env.id, cfg.env.options, cfg.learner.unroll_length) == (task, {"span": 40}, 42)
    with pytest.raises(SystemExit):
        main(["--tasks", "gym:no_such_module_here:Env", "--out", str(out)])
    assert "cannot import module 'no_such_module_here'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--tasks", task, "--out", str(out), "env.options.nope=1"])
    assert "rejected env options ['nope']" in capsys.readouterr().err


def test_square_sum_is_the_finite_check():
    from r2ac.agent.trajectory import square_sum

    t = torch.randn(4, 8, 9, dtype=torch.float64)
    assert math.isclose(square_sum(t), float(t.pow(2).sum()), rel_tol=1e-12)
    for bad in (float("nan"), float("inf"), -float("inf")):
        u = t.clone()
        u[1, 2, 3] = bad
        assert square_sum(u) is None
    big = torch.full((4,), 3e38)  # finite, but its norm overflows float32: not rejected
    assert square_sum(big) == math.inf
    mixed = torch.tensor([float("inf"), -float("inf")])
    assert square_sum(mixed) is None


def test_bench_memory_judge_and_step_budget(tmp_path):
    from r2ac.bench.memory import judge, run_config

    # climbs, crosses 0.9, wobbles below it, settles above 0.95, dips once to 0.93
    values = [0.3, 0.5, 0.91, 0.87, 0.92, 0.96, 1.0, 0.93, 1.0]
    curve = [(10.0 * i, 1000.0 * i, v) for i, v in enumerate(values)]
    j = judge(curve, 0.9)
    assert (j["solved_s"], j["solved_steps"], j["held"], j["settled"]) == (20.0, 2000.0, 0.87, 0.93)
    assert j["best"] == 1.0 and j["final"] == 1.0
    never = judge([(0.0, 0.0, 0.3), (1.0, 1.0, 0.5), (2.0, 2.0, 0.92)], 0.9)
    assert never["held"] == 0.92 and math.isnan(never["settled"])
    # the step budget: the config's total_steps by default (linear lr decay there), a given one, or none
    base = run_config("configs/quickstart.yaml", "cue-pixels", 100, "rtrl", 0, str(tmp_path / "r"))
    assert base.total_steps == 1_000_000 and base.learner.lr_schedule == "linear"
    given = run_config("configs/quickstart.yaml", "cue-pixels", 100, "rtrl", 0, str(tmp_path / "r"), steps=2_000_000)
    assert given.total_steps == 2_000_000 and given.learner.lr_schedule == "linear"
    none = run_config("configs/quickstart.yaml", "cue-pixels", 100, "rtrl", 0, str(tmp_path / "r"), steps=0)
    assert none.total_steps >= 10 ** 12 and none.learner.lr_schedule == "constant"
    # eLSTM options given to every method leave the feed-forward agent (no core, so no options) buildable
    ff = run_config("configs/quickstart.yaml", "cue-vector", 3, "feedforward", 0, str(tmp_path / "f"),
                    ["model.core_options.contractive=true"])
    assert ff.model.core == "none" and dict(ff.model.core_options) == {}
    rtrl = run_config("configs/quickstart.yaml", "cue-vector", 3, "rtrl", 0, str(tmp_path / "f"),
                      ["model.core_options.contractive=true"])
    assert dict(rtrl.model.core_options) == {"contractive": True}


def test_bench_memory_runs_the_runtime_the_overrides_name(tmp_path):
    from r2ac.bench.memory import run_config, runtime_train
    from r2ac.runtime import local, ray_runtime

    local_cfg = run_config("configs/quickstart.yaml", "cue-vector", 3, "rtrl", 0, str(tmp_path / "a"))
    ray_cfg = run_config("configs/quickstart.yaml", "cue-vector", 3, "rtrl", 0, str(tmp_path / "b"),
                         ["runtime.kind=ray", "runtime.num_actors=2"])
    assert local_cfg.runtime.kind == "local" and runtime_train(local_cfg) is local.train
    assert ray_cfg.runtime.kind == "ray" and runtime_train(ray_cfg) is ray_runtime.train


def test_bench_memory_trains_a_ppo_config(tmp_path, capsys):
    """--config configs/ppo/...: the bench trains algo=ppo runs with the PPO runtime (one process), judges their
    training success as for the others and plays their final weights on fresh envs (``r2ac.api.PPOPolicy``; the
    column was empty before 2026-12-04)."""
    from r2ac.bench.memory import main, run_config, runtime_train
    from r2ac.runtime.ppo import train_ppo

    cfg = run_config("configs/ppo/base.yaml", "cue-vector", 3, "rtrl", 0, str(tmp_path / "c"))
    assert cfg.algo == "ppo" and runtime_train(cfg) is train_ppo
    out = tmp_path / "bp"
    assert main(["--config", "configs/ppo/base.yaml", "--tasks", "cue-vector", "--spans", "3", "--methods", "rtrl",
                 "--seeds", "0", "--minutes", "0.1", "--steps", "0", "--out", str(out), "env.num_envs=4",
                 "model.hidden_size=8", "ppo.rollout_length=16", "ppo.epochs=1", "ppo.minibatches=2",
                 "logger.log_interval_s=0.5"]) == 0
    rows = list(csv.DictReader(open(out / "memory_runs.csv")))
    assert len(rows) == 1 and rows[0]["status"] == "stopped: time limit" and float(rows[0]["steps"]) > 0
    assert 0.0 <= float(rows[0]["best"]) <= 1.0
    fresh = json.loads((out / "runs" / "cue-vector-3-rtrl-s0" / "fresh.json").read_text())
    assert fresh["episodes"] == 3 * 4 and float(rows[0]["fresh"]) == pytest.approx(fresh["mean"])  # 3 per env
    run = json.loads((out / "runs" / "cue-vector-3-rtrl-s0" / "summary.json").read_text())
    assert run["algo"] == "ppo"


def test_bench_memory_success_over_a_fixed_number_of_episodes(tmp_path):
    """--window-episodes: rows weighted by the episodes that ended in them (the metrics' cumulative count),
    points only once the window is full; without counts, the 3-row window."""
    from r2ac.bench.memory import judge, read_success_curve

    path = tmp_path / "metrics.csv"
    rows = [(0, 100, 0.0, 10), (1, 200, 1.0, 40), (2, 300, 0.5, 60), (3, 400, 1.0, 160), (4, 500, "", 160)]
    path.write_text("wall_time,step,episode_return,episodes\n" + "".join(f"{t},{s},{r},{e}\n" for t, s, r, e in rows))
    curve = read_success_curve(str(path), window_episodes=50)
    # per row 10, 30, 20, 100 episodes; row 1: 30 + 10 < 50, no point; row 2: 20 at 0.5 + 30 at 1.0 -> 0.8;
    # row 3: 100 at 1.0
    assert [(t, s) for t, s, _ in curve] == [(2.0, 300.0), (3.0, 400.0)]
    assert [round(v, 6) for *_, v in curve] == [0.8, 1.0]
    assert judge(curve, 0.9, first=0)["solved_steps"] == 400.0
    assert len(read_success_curve(str(path), window_episodes=1000)) == 0
    rows3 = read_success_curve(str(path))  # 3-row window: means of the row means
    assert [round(v, 6) for *_, v in rows3] == [0.0, 0.5, 0.5, round(2.5 / 3, 6)]
    path.write_text("wall_time,step,episode_return\n0,1,0.5\n1,2,1.0\n")
    assert [v for *_, v in read_success_curve(str(path), window_episodes=50)] == [0.5, 0.75]


def test_bench_memory_table_rounds_the_lowest_success_down():
    from r2ac.bench.memory import markdown_table

    runs = [{"task": "cue-pixels", "span": 100, "method": "rtrl", "seed": s, "solved_s": 30.0 * (s + 1),
             "solved_steps": 2e5, "final": 1.0, "held": h, "settled": 0.951, "steps_per_s": 8000.0}
            for s, h in enumerate([0.8996, 0.93])]
    runs.append({"task": "cue-pixels", "span": 100, "method": "rtrl", "seed": 2, "solved_s": math.nan,
                 "solved_steps": math.nan, "final": 0.34, "held": math.nan, "settled": math.nan})
    row = markdown_table(runs).splitlines()[2]
    assert row.startswith("| cue-pixels | 100 | rtrl | 2/3 | 0.50, 1.00, - | 0.20, 0.20, - | 1.00, 1.00, 0.34 | "
                          "-, -, - |")  # no fresh-env return (runs of a bench before it had one)
    assert "| 0.899 | 0.951 |" in row  # 0.8996 is below the 0.9 threshold and must not read 0.90


def test_centred_logit_penalty_pulls_a_certain_policy():
    """0.5 * sum_a (z_a - mean z)^2: shift-invariant like softmax; its gradient is the centred logits, which
    does not vanish as the policy turns certain, where the entropy's gradient does."""
    from r2ac.agent.distributions import categorical_entropy
    from r2ac.agent.losses import centred_logit_penalty
    z = torch.tensor([[3.0, -1.0, 1.0], [20.0, 0.0, 0.0]], dtype=torch.float64, requires_grad=True)
    pen = centred_logit_penalty(z)
    zc = z.detach() - z.detach().mean(-1, keepdim=True)
    torch.testing.assert_close(pen, 0.5 * zc.pow(2).sum(-1))
    torch.testing.assert_close(centred_logit_penalty(z.detach() + 7.5), pen.detach())
    pen.sum().backward()
    torch.testing.assert_close(z.grad, zc)
    zz = z.detach().clone().requires_grad_()
    categorical_entropy(zz).sum().backward()
    assert zz.grad[1].abs().max() < 1e-6 < z.grad[1].abs().max() / 10  # certain: entropy flat, penalty not


def test_logit_penalty_margin_pulls_only_beyond_it():
    """With a margin m: 0.5 * sum_a max(|z_a - mean z| - m, 0)^2, zero (and flat) for logits within m of
    their mean, the margin-0 penalty at m = 0, still shift-invariant; its gradient is the centred excess."""
    from r2ac.agent.losses import centred_logit_penalty
    z = torch.tensor([[3.0, -1.0, 1.0], [20.0, 0.0, 0.0], [0.5, -0.5, 0.0]], dtype=torch.float64,
                     requires_grad=True)
    zc = z.detach() - z.detach().mean(-1, keepdim=True)
    excess = (zc.abs() - 2.0).clamp(min=0) * zc.sign()
    pen = centred_logit_penalty(z, 2.0)
    torch.testing.assert_close(pen, 0.5 * excess.pow(2).sum(-1))
    assert pen[0] == 0 == pen[2] and pen[1] > 0  # centred (2, -2, 0) and (0.5, -0.5, 0) lie within 2
    torch.testing.assert_close(centred_logit_penalty(z.detach() - 4.0, 2.0), pen.detach())
    torch.testing.assert_close(centred_logit_penalty(z.detach(), 0.0), centred_logit_penalty(z.detach()))
    pen.sum().backward()
    torch.testing.assert_close(z.grad, excess - excess.mean(-1, keepdim=True))
    assert z.grad[0].abs().max() == 0 == z.grad[2].abs().max()
    with pytest.raises(ValueError, match="margin"):
        centred_logit_penalty(z.detach(), -1.0)


@pytest.mark.parametrize("loss_fn", ["impala", "a2c"])
def test_logit_penalty_adds_its_term_to_the_loss(loss_fn):
    """float64: logit_penalty = w adds w * (sum, or mean for A2C) of the per-step penalty, and only that;
    the stats log its mean per step (logit_spread) with or without it."""
    from r2ac.agent.losses import centred_logit_penalty
    net, trajs = _batch()
    t = trajs[-1]
    with torch.no_grad():
        out, _ = net(_inputs(t), t["initial_state"], return_state=False)
    fn = impala_loss if loss_fn == "impala" else a2c_loss
    kw = dict(discount=0.9, baseline_cost=0.5, entropy_cost=0.01, reward_clip=0.0)
    l0, s0 = fn(out, t, **kw)
    l1, s1 = fn(out, t, logit_penalty=0.25, **kw)
    pen = centred_logit_penalty(out["policy_logits"][:-1])
    term = pen.sum() if loss_fn == "impala" else pen.mean()
    torch.testing.assert_close(l1 - l0, 0.25 * term, rtol=1e-12, atol=1e-12)
    assert s0["logit_spread"] == s1["logit_spread"] == pytest.approx(pen.mean().item(), rel=1e-12)
    margin = pen.detach().mul(2).sqrt().median().item() / 2  # half the steps' logits reach beyond it
    l2, s2 = fn(out, t, logit_penalty=0.25, logit_margin=margin, **kw)
    pen_m = centred_logit_penalty(out["policy_logits"][:-1], margin)
    assert 0 < pen_m.sum() < pen.sum()
    term_m = pen_m.sum() if loss_fn == "impala" else pen_m.mean()
    torch.testing.assert_close(l2 - l0, 0.25 * term_m, rtol=1e-12, atol=1e-12)
    assert s2["logit_spread"] == s0["logit_spread"]  # logged without the margin


@pytest.mark.parametrize("cls", [Learner, A2CLearner])
def test_logit_penalty_weight_is_in_the_tasks_reward_unit(cls):
    """learner.logit_penalty is weighted by the task's reward unit (as entropy_cap): an update with
    logit_penalty = w on rewards of largest size u is the loss with the penalty at w * u."""
    net, trajs = _batch()
    batch = concat(trajs)
    batch["reward"] = torch.zeros_like(batch["reward"])
    batch["reward"][3, 1] = -1 / 4
    cfg = load_config(None, ["learner.lr_schedule=constant", "learner.logit_penalty=2"]).learner
    lrn = cls(copy.deepcopy(net), cfg, 10**6)
    assert lrn.logit_penalty_weight() == 2.0          # no reward seen: u = 1
    lrn.update(batch)
    assert lrn.logit_penalty_weight() == 0.5
    assert load_config(None, []).learner.logit_penalty == 1e-3
    with pytest.raises(ConfigError, match="logit_penalty"):
        load_config(None, ["learner.logit_penalty=-1"])
    with pytest.raises(ConfigError, match="logit_margin"):
        load_config(None, ["learner.logit_margin=-1"])


@pytest.mark.parametrize("cls", [Learner, A2CLearner])
def test_learners_pass_the_logit_margin(cls, monkeypatch):
    """learner.logit_margin reaches the loss: an update's loss is the margined penalty's, not the plain one."""
    import r2ac.agent.a2c as a2c_mod
    import r2ac.agent.losses as losses_mod
    seen = []
    real = losses_mod.centred_logit_penalty

    def spy(logits, margin=0.0):
        seen.append(margin)
        return real(logits, margin)
    monkeypatch.setattr(losses_mod, "centred_logit_penalty", spy)
    monkeypatch.setattr(a2c_mod, "centred_logit_penalty", spy)
    net, trajs = _batch()
    cfg = load_config(None, ["learner.logit_penalty=0.01", "learner.logit_margin=1.5"]).learner
    cls(copy.deepcopy(net), cfg, 10**6).update(concat(trajs))
    assert 1.5 in seen


def test_logit_penalty_unlearns_a_certain_wrong_answer():
    """The mechanism on one softmax decision (exact expected gradient, plain gradient steps): an answer
    worth 1/3 that the policy gives wrongly with a logit gap of 15 stays wrong under the policy gradient and
    the floored entropy bonus of the defaults (their gradients carry pi(1 - pi) ~ 3e-7), and is put right
    with the centred-logit penalty at 1e-3 of the reward unit added."""
    from r2ac.agent.losses import categorical_entropy_bonus, gated_logit_penalty

    def train(penalty, steps=6000, margin=0.0, where="every_step"):
        z = torch.tensor([7.5, -7.5], dtype=torch.float64, requires_grad=True)  # action 1 is the right one
        for _ in range(steps):
            p = torch.softmax(z, -1)
            h, bonus = categorical_entropy_bonus(z, 0.9)
            pen, _ = gated_logit_penalty(z, h, margin, where, 0.9)
            loss = -(p[1] / 3) - 0.05 * bonus + penalty / 3 * pen
            (g,) = torch.autograd.grad(loss, z)
            with torch.no_grad():
                z -= g
        return torch.softmax(z, -1)[1].item()

    assert train(0.0) < 1e-5
    assert train(1e-3) > 0.99
    assert train(1e-3, margin=2.0) > 0.99  # pulled to within the margin, where the policy gradient acts
    assert train(1e-3, where="below_floor") > 0.99  # certain: below the floor, so pulled as at every step


def test_gated_logit_penalty_pulls_only_below_the_entropy_floor():
    """float64: where='every_step' is the plain per-step penalty at every step; 'below_floor' is the same
    penalty at the steps whose entropy is below floor_fraction * ln A and 0 (and flat) at the others: the
    mask carries no gradient, and a near-uniform step whose logits still spread is left alone."""
    from r2ac.agent.losses import categorical_entropy, centred_logit_penalty, gated_logit_penalty
    z = torch.tensor([[0.3, -0.2, 0.0], [9.0, 0.0, 0.0], [2.0, -1.0, 0.5], [0.0, 0.0, 0.0]],
                     dtype=torch.float64, requires_grad=True)
    h = categorical_entropy(z)
    floor = 0.9 * math.log(3)
    below = h.detach() < floor
    assert below.tolist() == [False, True, True, False]
    plain = centred_logit_penalty(z)
    pen, mask = gated_logit_penalty(z, h, 0.0, "every_step", 0.9)
    torch.testing.assert_close(pen, plain)
    assert mask.all()
    pen, mask = gated_logit_penalty(z, h, 0.0, "below_floor", 0.9)
    assert torch.equal(mask, below)
    torch.testing.assert_close(pen, plain * below)
    assert plain[0] > 0 == pen[0]  # spread, but above the floor: no pull
    pen.sum().backward()
    zc = z.detach() - z.detach().mean(-1, keepdim=True)
    torch.testing.assert_close(z.grad, zc * below[:, None])  # the plain penalty's gradient, masked: none via h
    pen_m, _ = gated_logit_penalty(z.detach(), h.detach(), 2.0, "below_floor", 0.9)
    torch.testing.assert_close(pen_m, centred_logit_penalty(z.detach(), 2.0) * below)
    with pytest.raises(ValueError, match="entropy_floor"):
        gated_logit_penalty(z.detach(), h.detach(), 0.0, "below_floor", 0.0)
    with pytest.raises(ValueError, match="where"):
        gated_logit_penalty(z.detach(), h.detach(), 0.0, "sometimes", 0.9)


@pytest.mark.parametrize("loss_fn", ["impala", "a2c"])
def test_logit_penalty_below_the_floor_in_the_loss(loss_fn):
    """float64: logit_penalty_where='below_floor' adds w * (sum, or mean for A2C) of the penalty at the
    steps below the entropy floor only, and logit_pull_frac logs their fraction (1 at every step, 0 off)."""
    from r2ac.agent.losses import categorical_entropy, centred_logit_penalty
    net, trajs = _batch()
    t = trajs[-1]
    with torch.no_grad():
        out, _ = net(_inputs(t), t["initial_state"], return_state=False)
    fn = impala_loss if loss_fn == "impala" else a2c_loss
    logits = out["policy_logits"][:-1]
    h = categorical_entropy(logits)
    floor = h.median().item() / math.log(logits.shape[-1])  # about half the steps lie below it
    kw = dict(discount=0.9, baseline_cost=0.5, entropy_cost=0.01, reward_clip=0.0, entropy_floor=floor)
    below = h < floor * math.log(logits.shape[-1])
    assert 0 < below.double().mean() < 1
    l0, s0 = fn(out, t, **kw)
    l1, s1 = fn(out, t, logit_penalty=0.25, logit_penalty_where="below_floor", **kw)
    pen = centred_logit_penalty(logits) * below
    term = pen.sum() if loss_fn == "impala" else pen.mean()
    torch.testing.assert_close(l1 - l0, 0.25 * term, rtol=1e-12, atol=1e-12)
    assert s1["logit_pull_frac"] == pytest.approx(below.double().mean().item(), rel=1e-12)
    assert s0["logit_pull_frac"] == 0.0
    assert fn(out, t, logit_penalty=0.25, **kw)[1]["logit_pull_frac"] == 1.0
    assert s1["logit_spread"] == s0["logit_spread"]  # logged at every step


@pytest.mark.parametrize("cls", [Learner, A2CLearner])
def test_learners_pass_where_the_pull_acts(cls, monkeypatch):
    """learner.logit_penalty_where reaches the loss, with the entropy floor it gates on; 'below_floor'
    without a floor is a config error naming both keys."""
    import r2ac.agent.a2c as a2c_mod
    import r2ac.agent.losses as losses_mod
    seen = []
    real = losses_mod.gated_logit_penalty

    def spy(logits, h, margin=0.0, where="every_step", floor_fraction=0.0):
        seen.append((where, floor_fraction))
        return real(logits, h, margin, where, floor_fraction)
    monkeypatch.setattr(losses_mod, "gated_logit_penalty", spy)
    monkeypatch.setattr(a2c_mod, "gated_logit_penalty", spy)
    net, trajs = _batch()
    cfg = load_config(None, ["learner.logit_penalty_where=below_floor", "learner.entropy_floor=0.8"]).learner
    stats = cls(copy.deepcopy(net), cfg, 10**6).update(concat(trajs))
    assert ("below_floor", 0.8) in seen
    assert 0.0 <= stats["logit_pull_frac"] <= 1.0
    assert load_config(None, []).learner.logit_penalty_where == "every_step"
    with pytest.raises(ConfigError, match="logit_penalty_where.*entropy_floor"):
        load_config(None, ["learner.logit_penalty_where=below_floor", "learner.entropy_floor=0"])
    with pytest.raises(ConfigError, match="logit_penalty_where"):
        load_config(None, ["learner.logit_penalty_where=never"])


def test_batch_extremes_name_the_worst_step():
    from r2ac.agent.losses import batch_extremes

    values = torch.tensor([[0.1, -2.0], [0.5, 0.3]])
    targets = torch.tensor([[0.0, 1.0], [0.5, 0.3]])  # the worst error, 3.0, at (0, 1)
    ends = torch.tensor([[False, True], [True, False]])
    logits = torch.tensor([[[1.0, -1.0], [0.0, 0.0]], [[3.0, 1.0], [0.0, 0.5]]])
    out = batch_extremes(ends, values, targets, targets - values, logits)
    assert out["value_min"] == pytest.approx(-2.0) and out["value_max"] == pytest.approx(0.5)
    assert out["value_error_max"] == pytest.approx(3.0) and out["value_error_max_at_end"] == 1.0
    assert out["value_error_mean"] == pytest.approx((-0.1 + 3.0) / 4)
    assert out["abs_advantage_max"] == pytest.approx(3.0) and out["centred_logit_max"] == pytest.approx(1.0)
    assert out["end_value_min"] == pytest.approx(-2.0) and out["end_value_max"] == pytest.approx(0.5)
    out = batch_extremes(torch.zeros(2, 2, dtype=torch.bool), values, values + 0.25, values, logits)
    assert out["value_error_max_at_end"] == 0.0 and "end_value_min" not in out


@pytest.mark.parametrize("cls", [Learner, A2CLearner])
def test_learner_detail_reports_each_parameters_gradient_and_step(cls):
    """logger.update_log sets ``Learner.detail``: the stats add each parameter's pre-clip gradient norm
    (their root sum of squares is the logged grad_norm), how far the update moved it, and the batch's
    extremes; without it none of them."""
    net, trajs = _batch(dtype=torch.float64)
    batch = concat(trajs)
    plain = cls(copy.deepcopy(net), load_config(None).learner, 10**6).update(batch)
    assert not any(k.startswith(("grad_norm/", "step_norm/")) for k in plain) and "value_max" not in plain
    learner = cls(copy.deepcopy(net), load_config(None, ["learner.grad_norm_clip=1e-3"]).learner, 10**6)
    learner.detail = True
    before = {n: p.detach().clone() for n, p in learner.net.named_parameters() if p.requires_grad}
    stats = learner.update(batch)
    names = sorted(before)
    assert sorted(k[len("grad_norm/"):] for k in stats if k.startswith("grad_norm/")) == names
    total = math.sqrt(sum(stats[f"grad_norm/{n}"] ** 2 for n in names))
    assert total == pytest.approx(stats["grad_norm"], rel=1e-9) and total > 1e-3  # pre-clip, as grad_norm
    for n, p in learner.net.named_parameters():
        if n in before:
            assert stats[f"step_norm/{n}"] == pytest.approx(float((p.detach() - before[n]).norm()), abs=1e-12)
    assert any(stats[f"step_norm/{n}"] > 0 for n in names)
    assert stats["value_min"] <= stats["mean_value"] <= stats["value_max"] and stats["value_error_max"] >= 0
    if cls is Learner:
        assert 0 < stats["rho_min"] <= stats["mean_rho"] <= stats["rho_max"]


@pytest.mark.parametrize("cls", [Learner, A2CLearner], ids=["impala", "a2c"])
def test_weight_decay_shrinks_the_weight_matrices_by_lr_times_the_rate_before_the_step(cls):
    """learner.weight_decay (AdamW's decoupled decay): one update moves every weight matrix by the same optimizer
    step as without decay, plus -lr * weight_decay times its old value; biases and the eLSTM's per-unit vectors
    (w_f, w_z, b_f, b_z) move as without decay."""
    net, trajs = _batch()
    batch = concat(trajs)
    lr, wd = 1e-3, 0.5
    moved = {}
    for rate in (0.0, wd):
        cfg = load_config(None, [f"learner.learning_rate={lr}", f"learner.weight_decay={rate}"]).learner
        learner = cls(copy.deepcopy(net), cfg, 10**6)
        learner.update(batch)
        moved[rate] = dict(learner.net.named_parameters())
    before = dict(net.named_parameters())
    decayed = {n for n, p in before.items() if p.requires_grad and p.dim() >= 2}
    assert {"core.F", "core.Z", "core.O", "core.W_o"} <= decayed
    for name, p in before.items():
        if not p.requires_grad:
            continue
        expected = moved[0.0][name] - (lr * wd * p if name in decayed else 0.0)
        torch.testing.assert_close(moved[wd][name], expected, rtol=0, atol=1e-12)
    with pytest.raises(ConfigError, match="weight_decay"):
        load_config(None, ["learner.weight_decay=-1"])


def test_fresh_envs_judge_each_seed_on_episodes_of_its_own(tmp_path, monkeypatch):
    """The fresh-env column: eval seed 12345 plus the run's seed (seed 0 keeps the episodes it always had), kept
    in fresh.json; so the seeds of a cell at chance no longer share one draw."""
    import r2ac.checkpoint
    import r2ac.evaluation
    from r2ac.bench.memory import FRESH_SEED, fresh_return
    from r2ac.config import save_config

    asked = []

    def fake_evaluate(run_dir, sets, episodes, seed, greedy, num_envs, video, log):
        asked.append((seed, episodes, greedy))
        return {"mean": 0.25 + seed % 7 / 100, "episodes": episodes, "step": 1}

    monkeypatch.setattr(r2ac.evaluation, "evaluate_run", fake_evaluate)
    monkeypatch.setattr(r2ac.checkpoint, "latest_checkpoint", lambda d: os.path.join(d, "checkpoints", "x"))
    for seed in (0, 2):
        run = tmp_path / f"s{seed}"
        run.mkdir()
        save_config(load_config("configs/quickstart.yaml", [f"seed={seed}", "env.num_envs=8"]), run / "config.yaml")
        assert fresh_return(str(run)) == pytest.approx(0.25 + (FRESH_SEED + seed) % 7 / 100)
        assert json.loads((run / "fresh.json").read_text())["seed"] == FRESH_SEED + seed
        assert fresh_return(str(run)) == pytest.approx(0.25 + (FRESH_SEED + seed) % 7 / 100)  # computed once
    assert asked == [(12345, 24, False), (12347, 24, False)]
