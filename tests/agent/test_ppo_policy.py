"""A trained ``algo: ppo`` agent outside its training loop: ``r2ac.load`` / ``r2ac eval`` give a ``PPOPolicy`` that
acts as the PPO collector does (same inputs, same core state, same draws), the normaliser's saved statistics
used and left as they are; ``eval.interval_steps`` and ``eval.at_end`` run in PPO training (tiny, real envs; the
bench's fresh-env column for PPO runs: tests/agent/test_a2c_diagnostics.py)."""

import csv
import json
import math

import numpy as np
import pytest
import torch

from r2ac.agent.ppo import RolloutCollector, action_spec
from r2ac.config import load_config
from r2ac.envs import make_config_env

PENDULUM = ("gymc:Pendulum-v1", "{max_episode_steps: 6}")


def _cfg(tmp_path, *extra, env="tmaze", options="{corridor_length: 2}", name="run"):
    return load_config(None, ["algo=ppo", f"env.id={env}", "env.num_envs=3", f"env.options={options}",
                              "ppo.rollout_length=8", "ppo.epochs=1", "ppo.minibatches=2", "ppo.encoder=[8]",
                              "model.core=rtu", "model.hidden_size=4", "total_steps=48", f"run_dir={tmp_path / name}",
                              "logger.tensorboard=false", "logger.progress_bar=false", *extra])


@pytest.mark.parametrize("env,options", [("tmaze", "{corridor_length: 2}"), PENDULUM])
def test_ppo_policy_acts_as_the_collector(tmp_path, env, options):
    """Same weights, env seed and action seed: the policy's actions, values and episode starts over 3 rollouts are
    the collector's, with the previous reward, the previous action and the episode-start flag in the input
    (``ppo_input_spec`` builds the collector's input spec from the config)."""
    from r2ac.api import PPOPolicy
    from r2ac.runtime.ppo import build_ppo_net, ppo_input_spec

    cfg = _cfg(tmp_path, "model.reward_input=true", "model.prev_action_input=true", "model.episode_start_input=true",
               "ppo.normalize_observations=off", env=env, options=options)
    torch.manual_seed(0)
    venv = make_config_env(cfg.env, 3, 11)
    net = build_ppo_net(cfg, venv).double()
    with torch.no_grad():  # heads that are not near-uniform, so that the draws depend on the inputs
        for p in list(net.actor.parameters()) + list(net.critic.parameters()):
            p.add_(0.5 * torch.randn_like(p))
    continuous = action_spec(venv)[0] == "continuous"
    spec = ppo_input_spec(cfg, continuous)
    col = RolloutCollector(net, venv, cfg.ppo, generator=torch.Generator().manual_seed(5), reward_input=True,
                           prev_action_input=True, episode_start_input=True)
    assert col.inputs == spec and spec.reward_input and spec.prev_action_input and spec.episode_start_input
    rollouts = [col.collect() for _ in range(3)]
    venv.close()

    policy = PPOPolicy(net, cfg, inputs=spec, seed=5)
    env2 = make_config_env(cfg.env, 3, 11)
    obs, state, reward, done = env2.reset(), policy.initial_state(3), None, None
    starts = 0
    for ro in rollouts:
        for t in range(ro.length):
            action, state, out = policy.act_with_outputs(obs, state, reward=reward, done=done)
            torch.testing.assert_close(torch.as_tensor(action), ro.action[t].to(torch.as_tensor(action).dtype),
                                       rtol=0, atol=0)
            torch.testing.assert_close(out["baseline"].double(), ro.value[t].double(), rtol=1e-6, atol=1e-6)
            obs, reward, done, _ = env2.step(action)
            starts += int(ro.reset[t].sum())
    env2.close()
    assert starts > 3  # episodes ended inside the rollouts (T-maze: 4 steps; pendulum: 6)
    if continuous:
        a, _, out = policy.act_with_outputs(obs, state, reward=reward, done=done, greedy=True)
        assert a.dtype == np.float64 and a.shape == (3, 1)
        np.testing.assert_allclose(a, out["action_mean"].double().numpy(), rtol=1e-6)  # the mean (outputs: float32)


def test_ppo_policy_normalises_with_the_saved_statistics_and_leaves_them(tmp_path):
    from r2ac.api import PPOPolicy
    from r2ac.agent.ppo.rollout import network_input
    from r2ac.runtime.ppo import build_ppo_net, ppo_input_spec

    cfg = _cfg(tmp_path, env=PENDULUM[0], options=PENDULUM[1])
    venv = make_config_env(cfg.env, 2, 0)
    net = build_ppo_net(cfg, venv)
    spec = ppo_input_spec(cfg, True)
    assert spec.normalize_observations  # auto: on for Box actions
    with torch.no_grad():
        net.obs_rms.mean.copy_(torch.tensor([0.5, -0.2, 1.0], dtype=torch.float64))
        net.obs_rms.var.copy_(torch.tensor([0.1, 2.0, 4.0], dtype=torch.float64))
    saved = {k: v.clone() for k, v in net.obs_rms.state_dict().items()}
    policy = PPOPolicy(net, cfg, inputs=spec, greedy=True)
    obs = venv.reset()
    _, _, out = policy.act_with_outputs(obs)
    for k, v in net.obs_rms.state_dict().items():
        assert torch.equal(v, saved[k]), k
    x = torch.as_tensor(obs, dtype=torch.float32)
    first = torch.ones(2, dtype=torch.bool)
    xt = network_input(net, spec, x, torch.zeros(2), torch.zeros(2, 1), first)
    want, _ = net(xt[None], net.initial_state(2, sensitivities=False), first[None], sensitivities=False)
    torch.testing.assert_close(out["action_mean"], want["policy"][0])
    venv.close()


def test_ppo_runs_evaluate_in_training_and_through_r2ac_eval_and_load(tmp_path):
    """eval.interval_steps and eval.at_end in PPO training; then `r2ac eval` of the run (a row of eval.csv) and
    `r2ac.load` (a PPOPolicy that acts on one observation or a batch); Box actions too."""
    import r2ac
    from r2ac.api import PPOPolicy
    from r2ac.cli import main
    from r2ac.runtime.ppo import train_ppo

    summary = train_ppo(_cfg(tmp_path, "eval.interval_steps=24", "eval.interval_episodes=3", "eval.at_end=true",
                             "eval.sets=2", "eval.episodes=3"))
    run = tmp_path / "run"
    rows = list(csv.DictReader(open(run / "eval.csv")))
    assert [int(r["step"]) for r in rows] == [24, 48, 48]  # two periodic, then the one at the end
    assert all(0.0 <= float(r["mean"]) <= 1.0 for r in rows) and rows[-1]["sets"] == "2"
    assert summary["eval"]["sets"] == 2 and summary["eval"]["mean"] == float(rows[-1]["mean"])
    assert main(["eval", str(run), "--sets", "1", "--episodes", "6", "--seed", "3"]) == 0
    last = json.loads((run / "eval.json").read_text())
    assert last["step"] == 48 and len(last["episode_returns"]) == 6 and last["mode"] == "sampled"
    assert len(list(csv.DictReader(open(run / "eval.csv")))) == 4
    policy = r2ac.load(str(run), greedy=True)
    assert isinstance(policy, PPOPolicy) and "PPOPolicy(tmaze" in repr(policy)
    venv = make_config_env(policy.config.env, 2, 0)
    obs = venv.reset()
    a, state = policy.act(obs[0])
    assert np.ndim(a) == 0 and 0 <= int(a) < venv.num_actions and state.first.shape == (1,)
    a, _ = policy.act(obs)
    assert a.shape == (2,) and a.dtype == np.int64
    with pytest.raises(ValueError, match="initial_state"):
        policy.act(obs, state)
    venv.close()

    train_ppo(_cfg(tmp_path, env=PENDULUM[0], options=PENDULUM[1], name="pendulum"))
    from r2ac.evaluation import evaluate_run

    result = evaluate_run(str(tmp_path / "pendulum"), sets=1, episodes=3, greedy=True, log=False)
    assert result["mode"] == "greedy" and len(result["episode_returns"]) == 3
    assert all(math.isfinite(r) and r < 0 for r in result["episode_returns"])  # pendulum pays costs
