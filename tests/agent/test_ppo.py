"""PPO with stored RTRL traces (Elelimy et al. 2024, Algorithm 1): exactness of the stored-trace gradient, the
optional refresh, GAE with time-limit bootstrapping, the memory guard and the runner (tiny, real envs)."""

import copy
import json
import math

import numpy as np
import pytest
import torch

from r2ac.agent.losses import gae_advantages
from r2ac.agent.ppo import (PPOLearner, PPONet, Rollout, RolloutCollector, action_spec, compute_advantages,
                            evaluate_chunks, gather, ppo_objective, rerun_rollout, trace_memory)
from r2ac.config import PPOConfig, load_config
from r2ac.envs import make_vec_env

L, B = 10, 3
OBJ = dict(clip=0.2, value_clip=0.5, value_cost=0.5, entropy_cost=0.01, normalize_advantages=True)
CORES = {"rtu": {}, "rtu_nonlinear": {"variant": "nonlinear", "activation": "tanh"},
         "elstm": {"forget_bias_init": 1.0}, "lru": {}}


def _setup(core="rtu", env="tmaze", learning="rtrl", seed=0, dtype=torch.float64, **env_opts):
    torch.manual_seed(seed)
    venv = make_vec_env(env, B, seed, **(env_opts or ({"corridor_length": 5} if env == "tmaze" else {})))
    kind, dim = action_spec(venv)
    name = core.split("_")[0]
    net = PPONet(int(np.prod(venv.observation_shape)), kind, dim, core=name, hidden_size=4, learning=learning,
                 core_options=CORES.get(core, {}), encoder=(6,), head_hidden=(5, 5)).to(dtype)
    with torch.no_grad():  # non-trivial heads (the default output gains are tiny)
        for p in list(net.actor.parameters()) + list(net.critic.parameters()):
            p.add_(0.3 * torch.randn_like(p))
    cfg = PPOConfig(rollout_length=L, normalize_observations="off", normalize_rewards="off")
    col = RolloutCollector(net, venv, cfg, generator=torch.Generator().manual_seed(seed))
    return net, venv, col


def _grads(net):
    return {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p)) for n, p in net.named_parameters()}


def _bptt_twin(net):
    """The same network with a TBPTT core (same parameters): full-sequence BPTT from a zero state."""
    twin = copy.deepcopy(net)
    twin.core.learning = "tbptt"
    return twin


def _bptt_gradient(net, rollouts, target):
    """One BPTT pass over all rollouts, concatenated in time from the episode starts (zero state, reset at
    t=0), with the PPO loss of the ``target``-th rollout's steps only."""
    twin = _bptt_twin(net)
    twin.zero_grad()
    x = torch.cat([r.x for r in rollouts])
    reset = torch.cat([r.reset for r in rollouts])
    assert reset[0].all()
    state = twin.initial_state(B, sensitivities=False)
    out, _ = twin(x, state, reset, return_state=False)
    sl = slice(target * L, (target + 1) * L)
    out = {k: v[sl] for k, v in out.items()}
    ro = rollouts[target]
    t = torch.arange(L)[:, None].expand(L, B)
    b = torch.arange(B)
    loss, _ = ppo_objective(twin, out, gather(ro, t, b), **OBJ)
    loss.backward()
    return _grads(twin), out


def _stored_trace_gradient(net, ro, length=1):
    """The learner's gradient: every step (or chunk) from its stored state with its stored traces."""
    net.zero_grad()
    n = (L // length) * B
    idx = torch.arange(n)
    out, (t, b) = evaluate_chunks(net, ro, (idx // B) * length, idx % B, length)
    loss, _ = ppo_objective(net, out, gather(ro, t, b), **OBJ)
    loss.backward()
    return _grads(net)


def _assert_grads_close(g1, g2, tol=1e-9):
    """Exact for the recurrent core's parameters and everything above it (heads, log-std). The encoder
    below the core is excluded: its traces (d state / d encoder weights, n x |encoder| per step) are not
    stored, so it learns from the loss at the current step (chunk) only, as in the paper."""
    assert g1.keys() == g2.keys()
    assert g1["encoder.0.weight"].abs().max() > 0
    for k in g1:
        if k.startswith("encoder."):
            continue
        scale = max(1.0, g2[k].abs().max().item())
        err = (g1[k] - g2[k]).abs().max().item()
        assert err <= tol * scale, f"{k}: max error {err:.3e}"
    assert any(g.abs().max() > 0 for k, g in g1.items() if k.startswith("core.")), "no recurrent gradient"


# --------------------------------------------------------------------------------------------------
# exactness
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("core", ["rtu", "rtu_nonlinear", "elstm", "lru"])
@pytest.mark.parametrize("length", [1, 5])
def test_stored_trace_gradient_equals_full_episode_bptt(core, length):
    """Weights fixed: the PPO-loss gradient from per-step stored states + traces (identity 1 per step, any
    order) equals one BPTT pass over the whole episodes computing the same per-step losses. The second
    rollout starts mid-episode from a state and traces carried over from the first."""
    net, venv, col = _setup(core)
    rollouts = [col.collect() for _ in range(3)]
    assert any(r.reset[1:].any() for r in rollouts) and not rollouts[1].reset[0].all()
    for r in rollouts:
        compute_advantages(r, 0.99, 0.95)
    for target in (0, 1, 2):
        ro = rollouts[target]
        g_bptt, out = _bptt_gradient(net, rollouts, target)
        # the stored log-probs and values are those of the full-sequence pass
        t = torch.arange(L)[:, None].expand(L, B)
        torch.testing.assert_close(ro.value, out["value"].detach(), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(ro.log_prob, net.log_prob(out["policy"], ro.action[t, torch.arange(B)]).detach(),
                                   rtol=1e-12, atol=1e-12)
        _assert_grads_close(_stored_trace_gradient(net, ro, length), g_bptt)
    venv.close()


def test_stored_trace_gradient_exact_with_gaussian_policy_and_time_limits():
    net, venv, col = _setup("rtu", **PENDULUM)
    rollouts = [col.collect() for _ in range(2)]
    assert rollouts[1].truncated.any()
    for r in rollouts:
        compute_advantages(r, 0.99, 0.95)
    g_bptt, _ = _bptt_gradient(net, rollouts, 1)
    g = _stored_trace_gradient(net, rollouts[1])
    assert g["log_std"].abs().max() > 0
    _assert_grads_close(g, g_bptt)
    venv.close()


def test_tbptt_core_chunk_gradient_is_truncated():
    """Without traces (GRU), a chunk's gradient stops at its start: it differs from full BPTT."""
    net, venv, col = _setup("gru", learning="tbptt")
    rollouts = [col.collect() for _ in range(2)]
    for r in rollouts:
        compute_advantages(r, 0.99, 0.95)
    g_bptt, _ = _bptt_gradient(net, rollouts, 1)
    g_chunks = _stored_trace_gradient(net, rollouts[1], length=5)
    err = max((g_chunks[k] - g_bptt[k]).abs().max().item() for k in g_bptt if k.startswith("core."))
    assert err > 1e-6
    venv.close()


# --------------------------------------------------------------------------------------------------
# refresh
# --------------------------------------------------------------------------------------------------


PENDULUM = dict(env="gymc:Pendulum-v1", max_episode_steps=4)  # Box actions, time limits with final obs


@pytest.mark.parametrize("core,env", [("rtu", {}), ("elstm", {}), ("rtu", PENDULUM)])
def test_refresh_with_unchanged_weights_reproduces_the_stored_rollout(core, env):
    net, venv, col = _setup(core, **env)
    col.collect()
    ro = col.collect()
    if env:
        assert ro.truncated.any() and (ro.final_value[ro.truncated] != 0).all()
    new = rerun_rollout(net, ro)
    for k in ro.states:
        torch.testing.assert_close(new["states"][k], ro.states[k], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(new["final_state"][k], ro.final_state[k], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(new["value"], ro.value, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(new["bootstrap_value"], ro.bootstrap_value, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(new["final_value"], ro.final_value, rtol=1e-12, atol=1e-12)
    venv.close()


@pytest.mark.parametrize("core", ["rtu", "elstm"])
def test_refresh_after_a_weight_change_gives_fresh_traces(core):
    net, venv, col = _setup(core)
    ro = col.collect()  # starts at an episode start: nothing before it
    compute_advantages(ro, 0.99, 0.95)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))
    learner = PPOLearner(net, PPOConfig(discount=0.99, gae_lambda=0.95))
    stale = {k: v.clone() for k, v in ro.states.items()}
    learner.refresh(ro)
    changed = [k for k in stale if k != "c" and not torch.allclose(stale[k], ro.states[k])]
    assert changed, "the weight change should move the traces"
    # fresh = a multi-step core pass with the new weights (closed-form transport, identity 2) from the start
    for t in (1, 4, L):
        _, st = net.core(net.encoder(ro.x[:t]), {k: v[0] for k, v in ro.states.items()}, ro.reset[:t])
        got = ro.final_state if t == L else {k: v[t] for k, v in ro.states.items()}
        for k in st:
            torch.testing.assert_close(got[k], st[k], rtol=1e-10, atol=1e-12)
    out, _ = net(ro.x, {k: v[0] for k, v in ro.states.items()}, ro.reset, return_state=False)
    torch.testing.assert_close(ro.value, out["value"].detach(), rtol=1e-12, atol=1e-12)
    # the refreshed advantages are GAE of the refreshed values
    adv = gae_advantages(ro.reward, ro.value, ro.done, ro.bootstrap_value, 0.99, 0.95)
    torch.testing.assert_close(ro.advantages, adv)
    # and the stored-trace gradient is again the exact BPTT gradient of the new weights
    g_bptt, _ = _bptt_gradient(net, [ro], 0)
    _assert_grads_close(_stored_trace_gradient(net, ro), g_bptt)
    venv.close()


# --------------------------------------------------------------------------------------------------
# GAE with time limits, the distribution, memory
# --------------------------------------------------------------------------------------------------


def test_gae_with_time_limit_bootstrap_matches_direct_sum():
    g, lam = 0.9, 0.8
    T, Bn = 7, 2
    gen = torch.Generator().manual_seed(0)
    r = torch.randn(T, Bn, generator=gen, dtype=torch.float64)
    v = torch.randn(T, Bn, generator=gen, dtype=torch.float64)
    done = torch.zeros(T, Bn, dtype=torch.bool)
    trunc = torch.zeros(T, Bn, dtype=torch.bool)
    done[2, 0] = True                     # terminated
    done[4, 1] = trunc[4, 1] = True       # cut by a time limit: bootstrap V(final obs)
    fv = torch.zeros(T, Bn, dtype=torch.float64)
    fv[4, 1] = 2.5
    boot = torch.tensor([0.3, -0.7], dtype=torch.float64)
    ro = Rollout(x=torch.zeros(T, Bn, 1), reset=torch.zeros(T, Bn, dtype=torch.bool), states={},
                 action=torch.zeros(T, Bn), log_prob=torch.zeros(T, Bn), value=v, reward=r, done=done, truncated=trunc,
                 final_x=torch.zeros(T, Bn, 1), final_value=fv, next_x=torch.zeros(Bn, 1),
                 next_reset=torch.zeros(Bn, dtype=torch.bool), final_state={},
                 bootstrap_value=boot)
    compute_advantages(ro, g, lam)
    for b in range(Bn):
        for t in range(T):
            total, w = 0.0, 1.0
            for u in range(t, T):
                nxt = boot[b] if u == T - 1 else v[u + 1, b]
                if done[u, b]:
                    nxt = fv[u, b] if trunc[u, b] else 0.0
                delta = r[u, b] + g * nxt - v[u, b]
                total += w * delta
                if done[u, b]:
                    break
                w *= g * lam
            assert abs(ro.advantages[t, b].item() - float(total)) < 1e-12
    torch.testing.assert_close(ro.returns, ro.advantages + v)


def test_gaussian_policy_log_prob_entropy_and_sampling():
    net = PPONet(3, "continuous", 2, core="rtu", hidden_size=3, learning="rtrl", log_std_init=-0.5).double()
    mean = torch.randn(4, 5, 2, dtype=torch.float64)
    a = net.sample(mean, torch.Generator().manual_seed(0))
    assert a.shape == (4, 5, 2)
    ref = torch.distributions.Normal(mean, torch.exp(net.log_std.detach()))
    torch.testing.assert_close(net.log_prob(mean, a), ref.log_prob(a).sum(-1))
    torch.testing.assert_close(net.entropy(mean), ref.entropy().sum(-1))


def test_trace_memory_of_the_rtu_per_step():
    # linear RTU: dc/dW1 only (dc/dW2 = i dc/dW1), 2nd + 4n floats; nonlinear: both, 4nd + 4n
    n, d = 7, 64
    net = PPONet(5, "discrete", 3, core="rtu", hidden_size=n, learning="rtrl", encoder=(d,))
    mem = trace_memory(net, 100, 4)
    assert mem["sensitivity_floats_per_step"] == 2 * n * d + 4 * n
    assert mem["hidden_floats_per_step"] == 2 * n
    assert mem["bytes"] == 100 * 4 * (2 * n * d + 6 * n) * 4
    net = PPONet(5, "discrete", 3, core="rtu", hidden_size=n, learning="rtrl", encoder=(d,),
                 core_options={"variant": "nonlinear"})
    assert trace_memory(net, 100, 4)["sensitivity_floats_per_step"] == 4 * n * d + 4 * n
    assert trace_memory(PPONet(5, "discrete", 3, core="gru", hidden_size=n, learning="tbptt"), 100, 4)[
        "sensitivity_floats_per_step"] == 0


# --------------------------------------------------------------------------------------------------
# the runner
# --------------------------------------------------------------------------------------------------


def _cfg(tmp_path, *extra, env="tmaze", options="{corridor_length: 2}"):
    return load_config(None, ["algo=ppo", f"env.id={env}", "env.num_envs=2", f"env.options={options}",
                              "ppo.rollout_length=8", "ppo.epochs=2", "ppo.minibatches=4", "ppo.encoder=[8]",
                              "model.core=rtu", "model.hidden_size=4",
                              "model.reward_input=false", "total_steps=32", f"run_dir={tmp_path / 'run'}",
                              "logger.tensorboard=false", "logger.progress_bar=false", *extra])


def test_train_ppo_run_dir_and_resume(tmp_path, capsys):
    from r2ac.runtime.ppo import train_ppo

    summary = train_ppo(_cfg(tmp_path))
    run = tmp_path / "run"
    assert summary["status"] == "finished" and summary["step"] == 32 and summary["iterations"] == 2
    assert summary["updates"] == 2 * 2 * 4
    for f in ("config.yaml", "metrics.csv", "learning_curve.png", "summary.json", "checkpoints/latest"):
        assert (run / f).exists(), f
    assert "sensitivity" in capsys.readouterr().out  # the memory line
    assert json.loads((run / "summary.json").read_text())["trace_memory_mb"] > 0
    with pytest.raises(FileExistsError):
        train_ppo(_cfg(tmp_path))
    summary = train_ppo(_cfg(tmp_path, "total_steps=64"), resume=True)
    assert summary["step"] == 64 and summary["iterations"] == 4 and summary["updates"] == 4 * 2 * 4
    from r2ac.checkpoint import load_latest_checkpoint

    ckpt = load_latest_checkpoint(str(run))
    assert ckpt["extra"]["learner"]["optimizer"]["state"]  # Adam moments kept across the resume
    rows = (run / "metrics.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + 4


def test_ppo_episode_start_input_marks_the_first_frame_of_each_episode(tmp_path):
    """model.episode_start_input for PPO: the network input has one more entry, 1 exactly on the frames that
    start an episode (the reset flags, T-maze episodes of 3 steps inside 8-step rollouts), and a run trains."""
    from r2ac.runtime.ppo import build_ppo_net, ppo_episode_start_value, train_ppo

    cfg = _cfg(tmp_path, "model.episode_start_input=true")
    venv = make_vec_env("tmaze", 2, 0, corridor_length=2)
    net = build_ppo_net(cfg, venv)
    assert net.input_size == build_ppo_net(_cfg(tmp_path), venv).input_size + 1
    col = RolloutCollector(net, venv, cfg.ppo, generator=torch.Generator().manual_seed(0),
                           episode_start_input=True)
    for _ in range(2):
        ro = col.collect()
        assert ro.reset.any() and not ro.reset.all()
        assert torch.equal(ro.x[..., -1], ro.reset.to(ro.x.dtype))
    assert train_ppo(cfg)["status"] == "finished"
    # model.episode_start_value: the flag's value (auto is 1 for PPO, whose input is not raw pixels)
    assert ppo_episode_start_value(cfg.model) == 1.0
    cfg3 = _cfg(tmp_path, "model.episode_start_input=true", "model.episode_start_value=3")
    assert ppo_episode_start_value(cfg3.model) == 3.0
    col = RolloutCollector(net, venv, cfg.ppo, generator=torch.Generator().manual_seed(0),
                           episode_start_input=True, episode_start_value=3.0)
    ro = col.collect()
    assert torch.equal(ro.x[..., -1], 3.0 * ro.reset.to(ro.x.dtype))
    # model.centre_frames is the IMPALA/A2C agent's: auto leaves PPO's input as it was, true is refused
    assert build_ppo_net(_cfg(tmp_path, "model.centre_frames=auto"), venv).input_size == net.input_size - 1
    for bad in ("model.centre_frames=true", "model.frame_spread=true", "model.running_centres=true"):
        with pytest.raises(ValueError, match="running_centres=true are for raw image frames"):
            build_ppo_net(_cfg(tmp_path, bad), venv)


def test_train_ppo_memory_budget_is_a_clear_error(tmp_path):
    from r2ac.runtime.ppo import TraceMemoryError, train_ppo

    with pytest.raises(TraceMemoryError, match="trace_memory_budget_mb"):
        train_ppo(_cfg(tmp_path, "ppo.trace_memory_budget_mb=0.001"))
    assert not (tmp_path / "run").exists()  # a run that cannot start leaves no run directory


def test_train_ppo_continuous_tbptt_refresh(tmp_path):
    """Box actions (Pendulum), GRU with TBPTT chunks of 4, and an RTU run with refresh_traces."""
    from r2ac.runtime.ppo import train_ppo

    pendulum = dict(env="gymc:Pendulum-v1", options="{max_episode_steps: 6}")
    s = train_ppo(_cfg(tmp_path, "model.core=gru", "model.learning=tbptt", "ppo.truncation_length=4", **pendulum))
    assert s["status"] == "finished" and s["ppo_options"]["sequence_length"] == 4
    assert s["ppo_options"]["normalize_observations"] and s["episodes"] > 0
    s = train_ppo(_cfg(tmp_path, "ppo.refresh_traces=true", f"run_dir={tmp_path / 'run2'}", **pendulum))
    assert s["status"] == "finished" and math.isfinite(s["recent_return"])


def test_train_ppo_that_crashes_writes_status_failed(tmp_path, monkeypatch):
    """Any exception ends the run with a checkpoint and a summary that says it failed (not "running")."""
    from r2ac.agent import ppo
    from r2ac.runtime.ppo import train_ppo
    from r2ac.checkpoint import load_latest_checkpoint

    def boom(self, ro, generator=None):
        raise RuntimeError("injected learner failure")

    monkeypatch.setattr(ppo.PPOLearner, "update", boom)
    with pytest.raises(RuntimeError, match="injected"):
        train_ppo(_cfg(tmp_path))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed: RuntimeError"
    assert load_latest_checkpoint(str(tmp_path / "run")) is not None


def _nonfinite_after(monkeypatch, good: int):
    """Make the PPO objective finite for its first ``good`` calls, then +inf."""
    from r2ac.agent.ppo import learner as ppo_learner

    real, calls = ppo_learner.ppo_objective, [0]

    def objective(*args, **kwargs):
        loss, stats = real(*args, **kwargs)
        calls[0] += 1
        return (loss if calls[0] <= good else loss * math.inf), stats

    monkeypatch.setattr(ppo_learner, "ppo_objective", objective)


def test_ppo_learner_skips_nonfinite_minibatches_and_counts_them_in_a_row(monkeypatch):
    net, venv, col = _setup("rtu", dtype=torch.float32)
    _nonfinite_after(monkeypatch, good=2)
    learner = PPOLearner(net, PPOConfig(epochs=1, minibatches=5, max_nonfinite_updates=3))
    stats = learner.update(col.collect(), torch.Generator().manual_seed(0))
    assert learner.updates == 2 and learner.skipped == 3 and stats["skipped_updates"] == 3
    assert learner.nonfinite_in_row == 3
    from r2ac.agent.learner import NonFiniteLossError

    with pytest.raises(NonFiniteLossError, match="ppo.max_nonfinite_updates=3"):
        learner.update(col.collect(), torch.Generator().manual_seed(0))
    assert learner.skipped == 4 and learner.updates == 2
    venv.close()


def test_train_ppo_stops_after_max_nonfinite_updates_with_checkpoint(tmp_path, monkeypatch):
    from r2ac.agent.learner import NonFiniteLossError
    from r2ac.runtime.ppo import train_ppo
    from r2ac.checkpoint import load_latest_checkpoint

    _nonfinite_after(monkeypatch, good=0)
    with pytest.raises(NonFiniteLossError, match="3 non-finite loss values in a row"):
        train_ppo(_cfg(tmp_path, "ppo.max_nonfinite_updates=2", "total_steps=1000"))
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "stopped: non-finite loss" and summary["skipped_updates"] == 3
    ckpt = load_latest_checkpoint(str(run))
    assert ckpt["extra"]["learner"]["skipped"] == 3 and ckpt["extra"]["learner"]["updates"] == 0


def test_compare_equalises_recurrent_parameters():
    from r2ac.experiments.ppo_compare import equal_hidden_sizes

    sizes = equal_hidden_sizes(6000, 64)
    assert sizes["rtu-rtrl"] == (46, 130 * 46)                       # 2n + 2nd
    h = sizes["gru-tbptt"][0]
    assert sizes["gru-tbptt"][1] == 3 * h * (64 + h) + 6 * h
    assert all(abs(n - 6000) / 6000 < 0.05 for _, n in sizes.values())


@pytest.mark.parametrize("bad", ["model.head_hidden=8", "model.head_input=true"])
def test_ppo_refuses_the_impala_head_options(tmp_path, bad):
    from r2ac.runtime.ppo import build_ppo_net

    venv = make_vec_env("tmaze", 2, 0, corridor_length=2)
    with pytest.raises(ValueError, match="PPO's actor and critic are their own"):
        build_ppo_net(_cfg(tmp_path, bad), venv)
