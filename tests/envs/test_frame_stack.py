"""``env.frame_stack`` (r2ac.envs.stack): the last k observations on the first axis, oldest first, zeros before
an episode's first, the same for the final observation of an episode that ended; every run path builds it."""

import numpy as np
import pytest

from r2ac.config import ConfigError, load_config
from r2ac.envs import FrameStackVecEnv, make_config_env, make_vec_env
from r2ac.envs.base import VecEnv


class Counter(VecEnv):
    """Env b shows ``100 * b + t`` (t: the step of its episode, from 1) in every entry; episodes last
    ``length`` steps; the final observation of one that ended is ``-(100 * b + length)``."""

    def __init__(self, num_envs=3, shape=(2,), length=4, finals=True):
        self.num_envs, self.observation_shape, self.num_actions = num_envs, shape, 2
        self.observation_dtype = np.float32
        self.length, self.t, self.final_observations = length, np.zeros(num_envs, int), finals
        self.closed = False

    def _obs(self):
        ids = 100 * np.arange(self.num_envs) + self.t
        return np.broadcast_to(ids.reshape((-1,) + (1,) * len(self.observation_shape)),
                               (self.num_envs,) + self.observation_shape).astype(np.float32)

    def reset(self):
        self.t[:] = 1
        return self._obs()

    def desync(self, rng):
        self.t[:] = 1 + np.arange(self.num_envs)
        return self._obs()

    def step(self, actions):
        self.t += 1
        done = self.t > self.length
        info = {}
        if self.final_observations:
            final = -self._obs()
            final[done] = -(100 * np.arange(self.num_envs)[done] + self.length).reshape((-1,) + (1,) * len(
                self.observation_shape))
            info["final_observation"] = final
        self.t[done] = 1
        return self._obs(), np.zeros(self.num_envs, np.float32), done, info

    def close(self):
        self.closed = True


def firsts(obs, k):
    """The first entry of each of the k stacked observations, per env: [B, k]."""
    return obs.reshape(obs.shape[0], k, -1)[:, :, 0]


def test_vectors_stack_end_to_end_oldest_first_with_zeros_before_an_episodes_first():
    venv = FrameStackVecEnv(Counter(shape=(2,), length=4), 3)
    assert venv.observation_shape == (6,) and venv.num_envs == 3 and venv.num_actions == 2
    obs = venv.reset()
    assert obs.shape == (3, 6) and obs.dtype == np.float32
    np.testing.assert_array_equal(firsts(obs, 3)[1], [0, 0, 101])
    obs, _, done, _ = venv.step(np.zeros(3, int))
    np.testing.assert_array_equal(firsts(obs, 3)[1], [0, 101, 102])
    for _ in range(2):
        obs, _, done, _ = venv.step(np.zeros(3, int))
    np.testing.assert_array_equal(firsts(obs, 3)[2], [202, 203, 204])
    obs, _, done, info = venv.step(np.zeros(3, int))  # the episodes end; obs is the next one's first
    assert done.all()
    np.testing.assert_array_equal(firsts(obs, 3), [[0, 0, 1], [0, 0, 101], [0, 0, 201]])
    np.testing.assert_array_equal(firsts(info["final_observation"], 3)[2], [203, 204, -204])


def test_frames_stack_on_their_channels_and_envs_restart_apart():
    inner = Counter(shape=(2, 3, 3), length=3)
    venv = FrameStackVecEnv(inner, 2)
    assert venv.observation_shape == (4, 3, 3)
    venv.reset()
    obs = venv.desync(np.random.default_rng(0))  # env b now at step 1 + b: ends one step sooner per b
    np.testing.assert_array_equal(firsts(obs, 2), [[0, 1], [0, 102], [0, 203]])
    obs, _, done, _ = venv.step(np.zeros(3, int))
    assert list(done) == [False, False, True]
    np.testing.assert_array_equal(obs[0, :2], np.full((2, 3, 3), 1.0))  # channels 0-1: the older frame
    np.testing.assert_array_equal(obs[0, 2:], np.full((2, 3, 3), 2.0))
    np.testing.assert_array_equal(firsts(obs, 2), [[1, 2], [102, 103], [0, 201]])
    assert venv.final_observations is True  # what the env kind says, read through the stack
    venv.close()
    assert inner.closed


def test_k_one_is_the_env_itself_and_bad_stacks_are_refused_by_name():
    inner = Counter()
    assert make_config_env({"id": "tmaze", "frame_stack": 1}, 2, 0).observation_shape == make_vec_env(
        "tmaze", 2, 0).observation_shape
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="env.frame_stack must be an integer >= 1"):
            FrameStackVecEnv(inner, bad)
    with pytest.raises(ValueError, match=r"shape \(2, 3\) cannot be stacked.*env.frame_stack=1"):
        FrameStackVecEnv(Counter(shape=(2, 3)), 2)
    with pytest.raises(ValueError, match="Atari stacks its own frames"):
        make_config_env({"id": "atari:Pong", "frame_stack": 2}, 1, 0)
    with pytest.raises(ConfigError, match="frame_stack"):
        load_config("configs/quickstart.yaml", ["env.frame_stack=0"])


def test_the_ball_tasks_two_frames_are_one_observation():
    """examples/which_way.py with env.frame_stack=2: the second observation holds the ball where it was
    (channels 0-2) and where it moved (channels 3-5)."""
    cfg = load_config("configs/quickstart.yaml", ["env.id=gym:examples.which_way:WhichWay",
                                                  "env.options={span: 3, size: 12}", "env.frame_stack=2"])
    venv = make_config_env(cfg.env, 2, 0)
    assert venv.observation_shape == (6, 12, 12) and venv.observation_dtype == np.uint8
    first = venv.reset()
    assert not first[:, :3].any() and first[:, 3:].any()
    second, *_ = venv.step(np.zeros(2, int))
    np.testing.assert_array_equal(second[:, :3], first[:, 3:])
    assert second[:, 3:].any() and (second[:, 3:] != second[:, :3]).any()
    from r2ac.evaluation import _frame

    picture = _frame(second[0], venv.stacked_frames)  # a video shows the newest frame in its colours
    np.testing.assert_array_equal(picture[::picture.shape[0] // 12, ::picture.shape[1] // 12],
                                  second[0, 3:].transpose(1, 2, 0))
    venv.close()


def test_a_run_trains_on_stacked_frames_and_its_policy_acts_on_the_configs_env(tmp_path):
    import r2ac
    from r2ac.runtime.local import train

    cfg = load_config("configs/quickstart.yaml", [
        f"run_dir={tmp_path}", "total_steps=400", "env.num_envs=4", "learner.batch_size=4", "model.hidden_size=8",
        "env.id=gym:examples.which_way:WhichWay", "env.options={span: 3, size: 12}", "env.frame_stack=2",
        "logger.log_interval_s=0.01", "logger.tensorboard=false", "logger.progress_bar=false"])
    assert train(cfg)["status"] == "finished"
    policy = r2ac.load(str(tmp_path))
    assert policy.config.env.frame_stack == 2 and policy.net.stem.frame_shape == (6, 12, 12)
    venv = make_config_env(policy.config.env, 2, 0)
    action, _ = policy.act(venv.reset(), policy.initial_state(2))
    assert action.shape == (2,)
