"""r2ac.envs over external simulators: real ale-py Atari and real procgen. DeepMind Lab:
tests/envs/test_dmlab.py (real engine) and tests/envs/test_dmlab_fake.py (fake module)."""

import numpy as np
import pytest

from r2ac.envs import make_vec_env
from r2ac.envs.atari import atari_rom_id

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
