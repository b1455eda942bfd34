"""r2ac.envs over external simulators: real ale-py Atari, real procgen, and the DeepMind Lab adapter
against a fake ``deepmind_lab`` module that implements the documented Python API."""

import sys
import types

import numpy as np
import pytest

from r2ac.envs import make_vec_env
from r2ac.envs.atari import atari_rom_id
from r2ac.envs.dmlab import DMLAB_ACTION_SET

from test_envs import check_episode_accounting, check_step_types, run_random

# --------------------------------------------------------------------------------------------------
# Atari (real ale-py, Breakout ROM)
# --------------------------------------------------------------------------------------------------


def test_atari_rom_ids():
    assert atari_rom_id("Breakout") == "breakout"
    assert atari_rom_id("MsPacman") == "ms_pacman"
    assert atari_rom_id("ALE/MsPacman-v5") == "ms_pacman"
    assert atari_rom_id("SpaceInvadersNoFrameskip-v4") == "space_invaders"
    assert atari_rom_id("Qbert") == "qbert" and atari_rom_id("ms_pacman") == "ms_pacman"
    for game in ("Gravitar", "MsPacman", "Qbert", "Seaquest", "Solaris", "Skiing"):
        venv = make_vec_env(f"atari:{game}", 1, 0)
        assert venv.observation_shape == (4, 84, 84)
        venv.close()
    with pytest.raises(ValueError, match="unknown Atari game 'NotAGame'.*breakout"):
        make_vec_env("atari:NotAGame", 1, 0)
    with pytest.raises(ValueError, match="repeat_action_probability"):
        make_vec_env("atari:Breakout", 1, 0, repeat_action_probability=1.5)


def test_atari_breakout_stack_repeat_and_noop_starts():
    venv = make_vec_env("atari:Breakout", 8, 0)
    assert venv.observation_shape == (4, 84, 84) and venv.observation_dtype == np.uint8
    assert venv.num_actions == 4                                  # minimal action set
    obs = venv.reset()
    assert obs.shape == (8, 4, 84, 84) and obs.dtype == np.uint8
    assert (obs[:, :3] == 0).all() and (obs[:, 3] > 0).any()      # fresh stack: only the newest frame
    frames = None
    rng = np.random.default_rng(0)
    for t in range(30):
        keep = obs.copy()
        nobs, r, d, info = venv.step(rng.integers(0, 4, size=8))
        check_step_types(venv, nobs, r, d, info)
        np.testing.assert_array_equal(obs, keep)                  # returned arrays are not reused
        live = ~d
        # the stack shifts by one agent step: oldest frame dropped, newest appended
        np.testing.assert_array_equal(nobs[live, :3], obs[live, 1:])
        if frames is not None:
            np.testing.assert_array_equal(info["episode_frame_number"][live] - frames[live], 4)
        frames = info["episode_frame_number"]
        obs = nobs
    venv.close()
    # no-op starts: the episodes start after different numbers of frames; without them they do not
    starts = []
    for noop_max in (30, 0):
        venv = make_vec_env("atari:Breakout", 8, 1, noop_max=noop_max)
        venv.reset()
        _, _, _, info = venv.step(np.zeros(8, dtype=np.int64))
        starts.append(info["episode_frame_number"] - 4)
        venv.close()
    assert len(set(starts[0])) > 2 and starts[0].max() <= 30 + 4   # no-ops are raw frames
    assert len(set(starts[1])) == 1


def test_atari_done_on_game_over_and_episode_accounting():
    venv = make_vec_env("atari:Breakout", 2, 3)
    lives_before_done = []
    prev_lives = None
    n_done = 0
    ret = np.zeros(2)
    for _, _, obs, r, d, info in run_random(venv, 1500, seed=1):
        ret += r
        if d.any():
            lives_before_done.extend(prev_lives[d])
            np.testing.assert_allclose(info["episode_return"][d], ret[d])
            assert (obs[d, :3] == 0).all()                        # fresh first observation
            assert (info["lives"][d] == 5).all()                  # a new game
            ret[d] = 0
            n_done += d.sum()
        prev_lives = info["lives"]
    assert n_done >= 2 and set(lives_before_done) == {1}          # game over: the last life was lost


def test_atari_episodic_life_and_options():
    venv = make_vec_env("atari:Breakout", 1, 0, episodic_life=True)
    life_losses = games = 0
    game_ret = 0.0
    for _, _, _, r, d, info in run_random(venv, 600, seed=2):
        game_ret += r[0]
        if d[0] and not info["game_over"][0]:
            life_losses += 1
            assert np.isnan(info["game_return"][0]) and info["lives"][0] < 5
        if info["game_over"][0]:
            games += 1
            assert info["game_return"][0] == pytest.approx(game_ret)
            game_ret = 0.0
    assert life_losses >= 4 and games >= 1
    venv = make_vec_env("atari:Breakout", 2, 0, full_action_space=True, repeat_action_probability=0.25)
    assert venv.num_actions == 18
    venv.reset()
    venv.step(np.array([0, 17]))
    venv.close()


def test_atari_seed_determinism():
    def rollout(seed):
        return [(o.copy(), r.copy()) for _, _, o, r, _, _ in
                run_random(make_vec_env("atari:Breakout", 2, seed), 60, seed=4)]

    a, b, c = rollout(5), rollout(5), rollout(6)
    for (oa, ra), (ob, rb) in zip(a, b):
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(ra, rb)
    assert any(not np.array_equal(x[0], y[0]) for x, y in zip(a, c))


# --------------------------------------------------------------------------------------------------
# ProcGen (real procgen)
# --------------------------------------------------------------------------------------------------


def test_procgen_chaser_shapes_actions_accounting():
    venv = make_vec_env("procgen:chaser", 4, 0)
    assert venv.observation_shape == (3, 64, 64) and venv.observation_dtype == np.uint8
    assert venv.num_actions == 15
    obs = venv.reset()
    assert obs.shape == (4, 3, 64, 64) and obs.dtype == np.uint8 and obs.flags.c_contiguous
    assert check_episode_accounting(venv, 400) > 0
    venv.close()


def test_procgen_options_and_determinism():
    def rollout(seed, **kw):
        venv = make_vec_env("procgen:chaser", 2, seed, **kw)
        out = [(o.copy(), r.copy(), d.copy()) for _, _, o, r, d, _ in run_random(venv, 40, seed=1)]
        venv.close()
        return out

    a, b, c = rollout(3), rollout(3), rollout(4)
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v)
    assert any(not np.array_equal(x[0], y[0]) for x, y in zip(a, c))
    easy = rollout(3, distribution_mode="easy", num_levels=1, start_level=7)
    assert easy[0][0].shape == (2, 3, 64, 64)


# --------------------------------------------------------------------------------------------------
# DeepMind Lab against a fake deepmind_lab module (documented API)
# --------------------------------------------------------------------------------------------------


class FakeLab:
    """Implements the documented ``deepmind_lab.Lab`` API. Episodes last ``EPISODE_FRAMES`` frames;
    each frame's reward is 1 while moving forward (action[3] == 1), else 0. RGB_INTERLEAVED frames
    encode (frame count, reset seed % 251, row index) in (R, G, B)."""

    EPISODE_FRAMES = 20
    instances = []

    def __init__(self, level, observations, config=None, renderer="software", level_cache=None):
        assert observations == ["RGB_INTERLEAVED"]
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in config.items())
        self.level, self.config, self.renderer = level, dict(config), renderer
        self.height, self.width = int(config.get("height", 240)), int(config.get("width", 320))
        self.frames, self.seed, self.running, self.closed = 0, None, False, False
        self.actions, self.num_steps, self.seeds = [], [], []
        FakeLab.instances.append(self)

    def reset(self, episode=-1, seed=None):
        self.frames, self.seed, self.running = 0, seed, True
        self.seeds.append(seed)

    def is_running(self):
        return self.running

    def observations(self):
        assert self.running, "DMLab has no observations once the episode has ended"
        o = np.zeros((self.height, self.width, 3), np.uint8)
        o[..., 0] = self.frames % 256
        o[..., 1] = self.seed % 251
        o[..., 2] = np.arange(self.height)[:, None] % 256
        return {"RGB_INTERLEAVED": o}

    def step(self, action, num_steps=1):
        assert self.running and isinstance(action, np.ndarray)
        assert action.dtype == np.intc and action.shape == (7,)
        self.actions.append(action.copy())
        self.num_steps.append(num_steps)
        reward = 0.0
        for _ in range(num_steps):
            self.frames += 1
            reward += float(action[3] == 1)
            if self.frames >= self.EPISODE_FRAMES:
                self.running = False
                break
        return reward

    def close(self):
        self.closed = True


@pytest.fixture
def fake_dmlab(monkeypatch):
    module = types.ModuleType("deepmind_lab")
    module.Lab = FakeLab
    module.runfiles = []
    module.set_runfiles_path = lambda p: module.runfiles.append(p)
    FakeLab.instances = []
    monkeypatch.setitem(sys.modules, "deepmind_lab", module)
    return module


def test_dmlab_adapter_against_fake_module(fake_dmlab):
    venv = make_vec_env("dmlab:rooms_watermaze", 3, 0, runfiles_path="/opt/lab")
    assert fake_dmlab.runfiles == ["/opt/lab"]
    labs = FakeLab.instances
    assert len(labs) == 3
    assert all(lab.level == "contributed/dmlab30/rooms_watermaze" for lab in labs)
    assert labs[0].config["width"] == "96" and labs[0].config["height"] == "72"
    assert venv.observation_shape == (3, 72, 96) and venv.num_actions == 9
    obs = venv.reset()
    assert obs.shape == (3, 3, 72, 96) and obs.dtype == np.uint8
    np.testing.assert_array_equal(obs[0, 2, :, 5], np.arange(72))       # HWC -> CHW
    assert (obs[:, 0] == 0).all()                                         # frame count 0
    for b, lab in enumerate(labs):
        assert (obs[b, 1] == lab.seed % 251).all()
    # 20 frames per episode at repeat 4: 5 agent steps; actions cycle through all 9
    ret = np.zeros(3)
    for t in range(5):
        a = (np.arange(3) + 3 * t) % 9
        obs, r, d, info = venv.step(a)
        check_step_types(venv, obs, r, d, info)
        for b, lab in enumerate(labs):
            np.testing.assert_array_equal(lab.actions[-1], DMLAB_ACTION_SET[a[b]])
            assert lab.num_steps[-1] == 4
        np.testing.assert_array_equal(r, np.where(DMLAB_ACTION_SET[a][:, 3] == 1, 4.0, 0.0))
        ret += r
        assert d.all() == (t == 4)
        if t < 4:
            assert (obs[:, 0] == 4 * (t + 1)).all()
    # episode end: reset with a new seed at once, obs is the new episode's first frame
    assert all(len(lab.seeds) == 2 and lab.seeds[0] != lab.seeds[1] for lab in labs)
    assert (obs[:, 0] == 0).all()
    for b, lab in enumerate(labs):
        assert (obs[b, 1] == lab.seed % 251).all()
    np.testing.assert_array_equal(info["episode_return"], ret)
    np.testing.assert_array_equal(info["episode_length"], 5)
    venv.close()
    assert all(lab.closed for lab in labs)


def test_dmlab_action_set_is_impalas():
    forward, backward, strafe_l, strafe_r, look_l, look_r, fwd_l, fwd_r, fire = DMLAB_ACTION_SET
    assert forward.tolist() == [0, 0, 0, 1, 0, 0, 0] and backward.tolist() == [0, 0, 0, -1, 0, 0, 0]
    assert strafe_l.tolist() == [0, 0, -1, 0, 0, 0, 0] and strafe_r.tolist() == [0, 0, 1, 0, 0, 0, 0]
    assert look_l.tolist() == [-20, 0, 0, 0, 0, 0, 0] and look_r.tolist() == [20, 0, 0, 0, 0, 0, 0]
    assert fwd_l.tolist() == [-20, 0, 0, 1, 0, 0, 0] and fwd_r.tolist() == [20, 0, 0, 1, 0, 0, 0]
    assert fire.tolist() == [0, 0, 0, 0, 1, 0, 0]


def test_dmlab_options_and_determinism(fake_dmlab):
    venv = make_vec_env("dmlab:contributed/dmlab30/rooms_keys_doors_puzzle", 2, 7, width=32, height=24,
                        action_repeat=2, config={"allowHoldOutLevels": "true", "mixerSeed": 0x600D5EED})
    lab = FakeLab.instances[0]
    assert lab.level == "contributed/dmlab30/rooms_keys_doors_puzzle"
    assert lab.config["allowHoldOutLevels"] == "true" and lab.config["mixerSeed"] == str(0x600D5EED)
    assert venv.observation_shape == (3, 24, 32)
    venv.reset()
    venv.step(np.array([0, 8]))
    assert lab.num_steps == [2]
    seeds = [lab.seeds[0] for lab in FakeLab.instances]
    make_vec_env("dmlab:rooms_keys_doors_puzzle", 2, 7).reset()
    assert [lab.seeds[0] for lab in FakeLab.instances[2:]] == seeds
    with pytest.raises(ValueError, match="renderer"):
        make_vec_env("dmlab:rooms_watermaze", 1, 0, renderer="gpu")


def test_dmlab_missing_module_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepmind_lab", None)     # makes `import deepmind_lab` fail
    with pytest.raises(ImportError) as err:
        make_vec_env("dmlab:rooms_select_nonmatching_object", 1, 0)
    msg = str(err.value)
    assert "no pip wheel" in msg and "Python 3.11" in msg
    assert "docker compose -f docker/docker-compose.yml" in msg
