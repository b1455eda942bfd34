"""A trained IMPALA agent outside its training loop acts as its actors did: ``r2ac.api.Policy`` (what ``r2ac eval``,
``r2ac.load`` and the bench's fresh-env column play) gives the actor's logits and draws, step for step, on the same
weights, env seed and action seed (pixel frames through quickstart's auto inputs: centred frames, running centres,
extremes, centroids, the episode-start flag; and flat observations)."""

import pytest
import torch

from r2ac.agent.actor import Actor
from r2ac.api import Policy
from r2ac.config import load_config
from r2ac.envs import make_config_env
from r2ac.runtime.common import build_net


@pytest.mark.parametrize("env,options", [("cue", "{span: 6}"), ("cue", "{span: 6, obs: vector}"),
                                         ("gym:examples.two_keys:TwoKeys", "{span: 6}")])
def test_policy_acts_as_the_actor(tmp_path, env, options):
    cfg = load_config("configs/quickstart.yaml", [f"env.id={env}", f"env.options={options}", "env.num_envs=3",
                                                  "model.hidden_size=8", f"run_dir={tmp_path}"])
    torch.manual_seed(0)
    venv = make_config_env(cfg.env, 3, 11)
    net = build_net(cfg, venv.observation_shape, venv.num_actions)
    with torch.no_grad():  # heads far from uniform and running centres away from 0, so that both matter
        for p in net.parameters():
            p.add_(0.5 * torch.randn_like(p))
        if net.running_centres:
            other = make_config_env(cfg.env, 3, 99)
            net.observe_frames(torch.from_numpy(other.reset()).unsqueeze(0))
            other.close()
            assert net.centre_mean.abs().sum() > 0
    actor = Actor(net, venv, unroll_length=5, seed=5)
    trajs = [actor.rollout() for _ in range(4)]
    venv.close()

    policy = Policy(net, cfg, seed=5)
    env2 = make_config_env(cfg.env, 3, 11)
    obs, state, reward, done = env2.reset(), policy.initial_state(3), None, None
    starts = 0
    for traj in trajs:
        for t in range(1, traj["action"].shape[0]):  # frame t holds the action taken at step t - 1
            action, state, logits = policy.act_with_logits(obs, state, reward=reward, done=done)
            torch.testing.assert_close(logits, traj["policy_logits"][t], rtol=1e-5, atol=1e-5)
            assert torch.equal(torch.as_tensor(action), traj["action"][t])
            obs, reward, done, _ = env2.step(action)
            starts += int(traj["done"][t].sum())
    env2.close()
    assert starts >= 3  # episodes ended inside the rollouts (7 steps each)
