"""``runtime.overlap``: the local runtime's actor rolls out its next trajectory in a second thread while the
learner trains on its last one. The actors then act with the weights of one update before (policy lag 1);
the order of everything is fixed, so runs repeat bit for bit; an env that raises and a rejected trajectory are
handled as in the synchronous loop; algo=a2c refuses it."""

import csv

import gymnasium
import numpy as np
import pytest
import torch

from r2ac.checkpoint import load_latest_checkpoint
from r2ac.config import ConfigError, load_config
from r2ac.runtime.local import train


class Faulty(gymnasium.Env):
    """A 6-step episode with 4 float features; 1 for action 1 at the last step, 0.1 elsewhere. ``fail_after``:
    raise at that many steps of this instance (0 = never); ``nan_reward_every``: a NaN reward every that many
    steps (0 = never)."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, fail_after=0, nan_reward_every=0):
        self.fail_after, self.nan_reward_every = fail_after, nan_reward_every
        self.steps = self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), {}

    def step(self, action):
        self.steps += 1
        self.t += 1
        if self.fail_after and self.steps >= self.fail_after:
            raise RuntimeError(f"injected env failure after {self.steps} steps")
        done = self.t >= 6
        reward = 1.0 if done and action == 1 else 0.1
        if self.nan_reward_every and self.steps % self.nan_reward_every == 0:
            reward = float("nan")
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), reward, done, False, {}


def _cfg(run_dir, *extra):
    return load_config("configs/quickstart.yaml", [
        f"run_dir={run_dir}", "total_steps=1200", "env.num_envs=8", "learner.batch_size=8",
        "env.options={corridor_length: 4}", "learner.unroll_length=5", "model.hidden_size=8",
        "logger.log_interval_s=0.01", "logger.tensorboard=false", "logger.progress_bar=false",
        "checkpoint.interval_s=.inf", "logger.update_log=true", *extra])


def _lags(run_dir):
    with open(run_dir / "updates.csv", newline="") as f:
        return [float(r["policy_lag_mean"]) for r in csv.DictReader(f)]


def _weights(run_dir):
    return load_latest_checkpoint(str(run_dir))["model"]


@pytest.mark.parametrize("actors", [1, 2])
def test_overlapped_runs_act_one_update_behind_and_repeat_bit_for_bit(tmp_path, actors):
    a, b, s = tmp_path / "a", tmp_path / "b", tmp_path / "sync"
    for d, overlap in ((a, True), (b, True), (s, False)):
        summary = train(_cfg(d, f"runtime.overlap={str(overlap).lower()}", f"runtime.num_actors={actors}"))
        assert summary["status"] == "finished" and summary["step"] >= 1200
    # each trajectory is one batch: the synchronous loop's actors act with the weights of every update so far, the
    # overlapped loop's with those of all but the last (the rollout was made while the learner trained on the one
    # before it), whatever the number of actors
    lags, sync_lags = _lags(a), _lags(s)
    assert len(lags) == len(sync_lags) > 10
    assert lags[0] == 0.0 and set(lags[1:]) == {1.0} and set(sync_lags) == {0.0}
    wa, wb, ws = _weights(a), _weights(b), _weights(s)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(wa[k], ws[k]) for k in wa)


def test_an_env_that_raises_is_recreated_while_overlapped(tmp_path):
    s = train(_cfg(tmp_path, "runtime.overlap=true", "env.id=gym:test_overlap:Faulty", "env.options={}",
                   "env.options={fail_after: 23}", "env.desync=false"))
    # each env instance raises at its 23rd step: 4 good trajectories of 5 steps, then a failure, again and again
    assert s["status"] == "finished" and s["env_failures"] >= 3 and s["trajectories"] >= 4 * s["env_failures"]
    assert "injected env failure" in (tmp_path / "events.log").read_text()


def test_a_rejected_trajectory_restarts_the_actor_and_drops_the_rollout_that_went_on_from_it(tmp_path):
    # reward_input=false: a NaN reward reaches the learner's check instead of first poisoning the actor's state
    s = train(_cfg(tmp_path, "runtime.overlap=true", "env.id=gym:test_overlap:Faulty", "env.options={}",
                   "env.options={nan_reward_every: 37}", "model.reward_input=false", "total_steps=2400"))
    assert s["status"] == "finished" and s["rejected_trajectories"] >= 2
    assert s["lost_rollouts"] == s["rejected_trajectories"]  # one actor: its next rollout was in flight each time
    assert s["skipped_updates"] == 0  # never trained on a NaN
    assert all(torch.isfinite(v).all() for v in _weights(tmp_path).values())
    assert "reward has non-finite" in (tmp_path / "events.log").read_text()


def test_a2c_refuses_overlap(tmp_path):
    from r2ac.runtime.pipeline import check_a2c

    cfg = _cfg(tmp_path, "algo=a2c", "runtime.overlap=true")
    with pytest.raises(ConfigError, match="runtime.overlap=false"):
        check_a2c(cfg)
