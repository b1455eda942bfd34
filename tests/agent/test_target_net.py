"""``learner.target_tau``: V-trace bootstrapping from a slowly moving target network. The RTRL gradient with
it is checked against full BPTT in test_agent.py (``test_learner_gradient_with_a_target_network_...``)."""

import copy

import pytest
import torch

from r2ac.agent.a2c import A2CLearner, a2c_loss, nstep_returns
from r2ac.agent.actor import Actor
from r2ac.agent.learner import Learner, make_target_net, polyak_update, target_values
from r2ac.agent.losses import impala_targets
from r2ac.agent.nets import AgentNet
from r2ac.agent.trajectory import concat
from r2ac.config import ConfigError, load_config
from r2ac.envs import make_vec_env

M = 5


def _cfg(**kw):
    return load_config(None, [f"learner.{k}={v}" for k, v in kw.items()]).learner


def _setup(seed=0, n_traj=3):
    torch.manual_seed(seed)
    venv = make_vec_env("tmaze", 4, seed, corridor_length=3)
    net = AgentNet(venv.observation_shape, venv.num_actions, stem="mlp", stem_channels=[], stem_fc=8,
                   core="elstm", hidden_size=6, learning="rtrl").double()
    actor = Actor(copy.deepcopy(net), venv, M, seed=seed + 1)
    batch = concat([actor.rollout() for _ in range(n_traj)])
    return net, batch


def _inputs(b):
    return {k: b[k] for k in ("obs", "reward", "action", "done")}


def _random_batch(T=6, B=4, A=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(T + 1, B, A, generator=g, dtype=torch.float64)
    batch = {"reward": torch.randn(T + 1, B, generator=g, dtype=torch.float64),
             "done": torch.rand(T + 1, B, generator=g) < 0.2,
             "action": torch.randint(0, A, (T + 1, B), generator=g),
             "policy_logits": logits}
    # on-policy: the learner's pi(.|x_t) (row t) is the behaviour's of the step it chose (batch row t + 1)
    outputs = {"policy_logits": torch.cat([logits[1:], logits[-1:]]),
               "baseline": torch.randn(T + 1, B, generator=g, dtype=torch.float64)}
    boot = torch.randn(T + 1, B, generator=g, dtype=torch.float64)
    return outputs, batch, boot


def test_impala_targets_bootstrap_from_the_target_values_and_keep_the_learners_baseline():
    outputs, batch, boot = _random_batch()
    opts = dict(discount=0.9, reward_clip=0.0)
    # the target values equal to the learner's own: exactly IMPALA's targets
    same = impala_targets(outputs, batch, target_values=outputs["baseline"].clone(), **opts)
    plain = impala_targets(outputs, batch, **opts)
    assert torch.equal(same.vs, plain.vs) and torch.allclose(same.pg_advantages, plain.pg_advantages, atol=1e-14)
    # on-policy (rho = c = 1): v_s is the n-step return to the segment's end, bootstrapped from the target's
    # V(x_T) only, and the advantage is v_s' return minus the learner's V(x_s)
    ret = impala_targets(outputs, batch, target_values=boot, **opts)
    discounts = (~batch["done"][1:]).double() * 0.9
    expected = nstep_returns(batch["reward"][1:], discounts, boot[-1])
    assert torch.allclose(ret.vs, expected, atol=1e-12)
    assert torch.allclose(ret.pg_advantages, expected - outputs["baseline"][:-1], atol=1e-12)
    with pytest.raises(ValueError, match="target_values has shape"):
        impala_targets(outputs, batch, target_values=boot[:-1], **opts)


def test_impala_targets_with_target_values_off_policy_use_the_targets_values_in_every_delta():
    outputs, batch, boot = _random_batch(seed=1)
    outputs["policy_logits"] = outputs["policy_logits"] + torch.randn_like(outputs["policy_logits"])
    opts = dict(discount=0.95, reward_clip=0.0)
    ret = impala_targets(outputs, batch, target_values=boot, **opts)
    # v_s from the recursion of IMPALA's Remark 1 with the target's values, written out step by step
    T = boot.shape[0] - 1
    rhos = torch.exp(ret.log_rhos)
    rho, c = rhos.clamp(max=1.0), rhos.clamp(max=1.0)
    disc = (~batch["done"][1:]).double() * 0.95
    r = batch["reward"][1:]
    vs = torch.empty(T, boot.shape[1], dtype=torch.float64)
    nxt_v, nxt_acc = boot[-1], torch.zeros(boot.shape[1], dtype=torch.float64)
    for s in reversed(range(T)):
        acc = rho[s] * (r[s] + disc[s] * nxt_v - boot[s]) + disc[s] * c[s] * nxt_acc
        vs[s] = boot[s] + acc
        nxt_v, nxt_acc = boot[s], acc
    assert torch.allclose(ret.vs, vs, atol=1e-12)
    vs_next = torch.cat([vs[1:], boot[-1:]])
    assert torch.allclose(ret.pg_advantages, rho * (r + disc * vs_next - outputs["baseline"][:-1]), atol=1e-12)


def test_target_pg_false_takes_the_value_targets_from_the_target_and_the_advantages_from_the_learner():
    """learner.target_pg=false: v_s as with the target's values, A^pg exactly IMPALA's own (no target), on- and
    off-policy; the loss's value term follows the target's v_s, its policy term the own advantages."""
    for seed, shift in ((3, 0.0), (4, 1.0)):
        outputs, batch, boot = _random_batch(seed=seed)
        outputs["policy_logits"] = outputs["policy_logits"] + shift * torch.randn_like(outputs["policy_logits"])
        opts = dict(discount=0.9, reward_clip=0.0)
        split = impala_targets(outputs, batch, target_values=boot, target_pg=False, **opts)
        both = impala_targets(outputs, batch, target_values=boot, **opts)
        own = impala_targets(outputs, batch, **opts)
        assert torch.equal(split.vs, both.vs) and torch.equal(split.log_rhos, own.log_rhos)
        assert torch.equal(split.pg_advantages, own.pg_advantages)
        assert not torch.allclose(split.pg_advantages, both.pg_advantages, atol=1e-6)
        assert torch.equal(impala_targets(outputs, batch, target_pg=False, **opts).pg_advantages, own.pg_advantages)


def test_a2c_target_pg_false_keeps_its_own_advantages_and_the_targets_value_loss():
    outputs, batch, boot = _random_batch(seed=5)
    opts = dict(discount=0.9, reward_clip=0.0, entropy_cost=0.0)
    _, split = a2c_loss(outputs, batch, target_values=boot, target_pg=False, **opts)
    _, both = a2c_loss(outputs, batch, target_values=boot, **opts)
    _, own = a2c_loss(outputs, batch, **opts)
    assert split["baseline_loss"] == pytest.approx(both["baseline_loss"], rel=1e-12)
    assert split["pg_loss"] == pytest.approx(own["pg_loss"], rel=1e-12)
    assert split["pg_loss"] != pytest.approx(both["pg_loss"], rel=1e-6)


def test_a2c_returns_bootstrap_from_the_target_values():
    outputs, batch, boot = _random_batch(seed=2)
    outputs["baseline"].requires_grad_(True)
    _, with_target = a2c_loss(outputs, batch, discount=0.9, reward_clip=0.0, target_values=boot)
    _, own = a2c_loss(outputs, batch, discount=0.9, reward_clip=0.0, target_values=outputs["baseline"].detach())
    _, plain = a2c_loss(outputs, batch, discount=0.9, reward_clip=0.0)
    assert own["baseline_loss"] == pytest.approx(plain["baseline_loss"], rel=1e-12)
    assert with_target["baseline_loss"] != pytest.approx(plain["baseline_loss"], rel=1e-3)


def test_polyak_update_moves_parameters_by_tau_and_copies_buffers():
    net, _ = _setup()
    target = make_target_net(net)
    assert not any(p.requires_grad for p in target.parameters())
    before = [p.detach().clone() for p in target.parameters()]
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    polyak_update(target, net, 0.25)
    for b, t, s in zip(before, target.parameters(), net.parameters()):
        assert torch.allclose(t, b + 0.25 * (s - b), atol=1e-12)
    polyak_update(target, net, 1.0)
    assert all(torch.equal(t, s) for t, s in zip(target.parameters(), net.parameters()))


@pytest.mark.parametrize("learner_cls", [Learner, A2CLearner])
def test_learner_bootstraps_from_its_target_and_moves_it_after_each_update(learner_cls):
    net, batch = _setup()
    learner = learner_cls(net, _cfg(target_tau=0.5, learning_rate=1e-2, lr_schedule="constant"), 10**6)
    assert learner.target_net is not None
    assert learner_cls(copy.deepcopy(net), _cfg(target_tau=0), 10**6).target_net is None
    target0 = [p.detach().clone() for p in learner.target_net.parameters()]
    # the values it bootstraps from are the target's, run from the batch's shipped state
    with torch.no_grad():
        for p in learner.target_net.baseline.parameters():
            p.zero_()
    assert torch.equal(learner.target_values(_inputs(batch), batch), torch.zeros_like(batch["reward"]))
    with torch.no_grad():
        for p, p0 in zip(learner.target_net.parameters(), target0):
            p.copy_(p0)
    stats = learner.update(batch)
    assert learner.updates == 1 and "target_mean_value" in stats
    for t, t0, s in zip(learner.target_net.parameters(), target0, net.parameters()):
        assert torch.allclose(t, 0.5 * (t0 + s.detach()), atol=1e-12)
    assert any(not torch.equal(t, t0) for t, t0 in zip(learner.target_net.parameters(), target0))


@pytest.mark.parametrize("learner_cls", [Learner, A2CLearner])
def test_the_learners_target_pg_setting_reaches_its_loss(learner_cls):
    """learner.target_pg=false in a learner: its policy term is the learner's without a target network, its
    value term the one with the target's values (the target moved away from the weights here)."""
    net, batch = _setup(seed=2)
    split = learner_cls(copy.deepcopy(net), _cfg(target_tau=0.5, target_pg="false"), 10**6)
    both = learner_cls(copy.deepcopy(net), _cfg(target_tau=0.5), 10**6)
    plain = learner_cls(copy.deepcopy(net), _cfg(target_tau=0), 10**6)
    with torch.no_grad():
        for p in list(split.target_net.parameters()) + list(both.target_net.parameters()):
            p.add_(0.5)
    out, _ = net(_inputs(batch), batch["initial_state"], return_state=False)
    boot = split.target_values(_inputs(batch), batch)
    _, s_split = split.loss(out, batch, target_values=boot)
    _, s_both = both.loss(out, batch, target_values=boot)
    _, s_plain = plain.loss(out, batch)
    assert s_split["pg_loss"] == pytest.approx(s_plain["pg_loss"], rel=1e-12)
    assert s_split["baseline_loss"] == pytest.approx(s_both["baseline_loss"], rel=1e-12)
    assert s_split["baseline_loss"] != pytest.approx(s_plain["baseline_loss"], rel=1e-3)


def test_target_network_goes_into_the_learners_state_and_back():
    net, batch = _setup()
    learner = Learner(net, _cfg(target_tau=0.1), 10**6)
    for _ in range(3):
        learner.update(batch)
    state = copy.deepcopy(learner.state_dict())
    assert "target_net" in state
    fresh = Learner(copy.deepcopy(net), _cfg(target_tau=0.1), 10**6)
    with torch.no_grad():
        for p in fresh.net.parameters():
            p.add_(1.0)
    fresh.load_state_dict(state)
    assert all(torch.equal(a, b) for a, b in zip(fresh.target_net.state_dict().values(),
                                                  learner.target_net.state_dict().values()))
    # a checkpoint from a run without the target network: the target starts as the loaded weights
    del state["target_net"]
    older = Learner(copy.deepcopy(net), _cfg(target_tau=0.1), 10**6)
    older.load_state_dict(state)
    assert all(torch.equal(a, b) for a, b in zip(older.target_net.parameters(), older.net.parameters()))
    # a run without it saves none
    assert "target_net" not in Learner(copy.deepcopy(net), _cfg(target_tau=0), 10**6).state_dict()


@pytest.mark.parametrize("value", ["-0.1", "1.5"])
def test_target_tau_out_of_range_is_refused(value):
    with pytest.raises(ConfigError, match="target_tau"):
        load_config(None, [f"learner.target_tau={value}"])


def test_a_run_with_a_target_network_checkpoints_it_and_resumes_from_it(tmp_path):
    from r2ac.checkpoint import load_latest_checkpoint
    from r2ac.runtime.local import train

    def cfg(*extra):
        return load_config("configs/quickstart.yaml", [
            f"run_dir={tmp_path}", "env.num_envs=8", "learner.batch_size=8", "model.hidden_size=8",
            "logger.tensorboard=false", "logger.progress_bar=false", "checkpoint.interval_s=.inf",
            *extra])  # learner.target_tau: the default, 0.05

    assert train(cfg("total_steps=1200"))["status"] == "finished"
    ck = load_latest_checkpoint(str(tmp_path))
    target, weights = ck["extra"]["learner"]["target_net"], ck["model"]
    assert target.keys() == weights.keys()
    moved = [k for k in weights if not torch.equal(target[k], weights[k])]
    assert moved  # it lags the weights
    s = train(cfg("total_steps=2400"), resume=True)
    assert s["status"] == "finished"
    ck2 = load_latest_checkpoint(str(tmp_path))
    updates = ck2["extra"]["learner"]["updates"] - ck["extra"]["learner"]["updates"]
    assert updates > 0
    rows = open(tmp_path / "metrics.csv").read().splitlines()
    assert "target_mean_value" in rows[0].split(",")  # (that resume loads the saved target: the test above)


def test_target_tau_1_follows_the_weights_and_trains_as_without_a_target():
    """At 1 the target is the weights after each update, so each update's targets are those of 0."""
    net, batch = _setup(seed=3)
    a = Learner(copy.deepcopy(net), _cfg(target_tau=0, learning_rate=1e-2), 10**6)
    b = Learner(copy.deepcopy(net), _cfg(target_tau=1, learning_rate=1e-2), 10**6)
    for _ in range(3):
        sa, sb = a.update(batch), b.update(batch)
        assert sa["baseline_loss"] == pytest.approx(sb["baseline_loss"], rel=1e-9)
    for pa, pb in zip(a.net.parameters(), b.net.parameters()):
        assert torch.allclose(pa, pb, rtol=1e-9, atol=1e-12)


def test_target_warmup_steps_follow_the_weights_then_move_by_tau():
    """learner.target_warmup_steps: the updates that start before that many agent steps train exactly as
    without a target (the target is the weights after each); the next moves the target by target_tau."""
    net, batch = _setup(seed=4)
    per_update = (batch["reward"].shape[0] - 1) * batch["reward"].shape[1]
    a = Learner(copy.deepcopy(net), _cfg(target_tau=0, learning_rate=1e-2), 10**6)
    b = Learner(copy.deepcopy(net), _cfg(target_tau=0.1, target_warmup_steps=2 * per_update, learning_rate=1e-2),
                10**6)
    for _ in range(2):
        sa, sb = a.update(batch), b.update(batch)
        assert sa["baseline_loss"] == pytest.approx(sb["baseline_loss"], rel=1e-9)
        assert all(torch.equal(t, w) for t, w in zip(b.target_net.parameters(), b.net.parameters()))
    before = [t.detach().clone() for t in b.target_net.parameters()]
    b.update(batch)  # at 2 * per_update steps: past the warm-up
    for t, t0, w in zip(b.target_net.parameters(), before, b.net.parameters()):
        assert torch.allclose(t, t0 + 0.1 * (w.detach() - t0), atol=1e-12)
    assert any(not torch.equal(t, w) for t, w in zip(b.target_net.parameters(), b.net.parameters()))


def _pixel_setup(stem, seed=0):
    torch.manual_seed(seed)
    venv = make_vec_env("cue", 4, seed, span=3, size=6)
    kw = {"stem_channels": [], "stem_fc": 8} if stem == "mlp" else {}
    net = AgentNet(venv.observation_shape, venv.num_actions, stem=stem, core="elstm", hidden_size=6,
                   learning="rtrl", running_centres="auto", **kw)
    actor = Actor(copy.deepcopy(net), venv, M, seed=seed + 1)
    return net, actor


@pytest.mark.parametrize("stem", ["none", "mlp"])
def test_the_target_network_runs_on_the_online_core_input_only_where_it_is_its_own(stem):
    """No weight before the core (stem none, running frame centres): after updates the target network's values
    from the online pass's core_input are exactly those of its own full pass (the polyak update copies the frame
    statistics after they last changed). A trainable stem: the target's own stem runs, so the values are its
    own full pass's too, and differ from what the online core_input would give."""
    net, actor = _pixel_setup(stem)
    if stem == "none":
        assert net.centre_frames and net.running_centres
    learner = Learner(net, _cfg(target_tau=0.5, learning_rate=1e-2, lr_schedule="constant"), 10**6)
    for _ in range(3):
        learner.update(actor.rollout())
        actor.set_weights(net.state_dict(), learner.updates)
    batch = actor.rollout()
    with torch.no_grad():
        out, _ = net(_inputs(batch), batch["initial_state"], return_state=False)
    own = target_values(learner.target_net, _inputs(batch), batch["initial_state"])
    via_learner = learner.target_values(_inputs(batch), batch, out)
    assert torch.equal(via_learner, own)
    from_online = target_values(learner.target_net, _inputs(batch), batch["initial_state"], out["core_input"])
    if stem == "none":
        assert torch.equal(from_online, own)
    else:
        assert not torch.allclose(from_online, own, atol=1e-6)
