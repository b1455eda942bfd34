"""examples/key_apples.py, the nineteenth user-written Gymnasium task: a key to take on the first frame, a frame that
shows it taken, apples that pay on the way when reached for, and a door at frame ``span`` that pays only a taken
key; its ``info["success"]`` reaches the vector env's info at the episode's end (r2ac logs it as
``episode_success``), the return counts the apples too; bad options and actions are refused."""

import numpy as np
import pytest

from r2ac.envs import make_vec_env
from r2ac.envs.gym_env import import_user_module

_example = import_user_module("examples.key_apples")
THIRDS, KEY, APPLE, DOOR, KeyApples = (_example.THIRDS, _example.KEY, _example.APPLE, _example.DOOR,
                                       _example.KeyApples)

TASK = "gym:examples.key_apples:KeyApples"


def third_of(frame: np.ndarray, rgb: np.ndarray, size: int) -> int:
    """The third of a (3, H, W) frame that holds the one square of colour ``rgb`` on black (asserted)."""
    lit = (frame == rgb[:, None, None]).all(axis=0)
    ys, xs = np.nonzero(lit)
    assert lit.sum() == 4 and np.ptp(ys) == 1 and np.ptp(xs) == 1 and (frame[:, ~lit] == 0).all()
    assert ys.min() >= 1  # below the top row, where the taken key's bar goes
    width = size // THIRDS
    assert xs.max() < THIRDS * width and xs.min() // width == xs.max() // width  # inside one third
    return int(xs.min() // width)


def test_key_bar_apples_then_a_door_that_pays_the_taken_key_and_reports_success():
    span, n, size = 40, 12, 9
    venv = make_vec_env(TASK, n, 0, span=span, size=size, thing=2, apple_rate=0.5, apple_reward=0.25)
    assert venv.observation_shape == (3, size, size) and venv.num_actions == THIRDS
    obs = venv.reset()
    keys = np.array([third_of(f, KEY, size) for f in obs])
    take = np.arange(n) % 2 == 0  # the even envs take the key, the odd reach into another third
    obs, reward, done, info = venv.step(np.where(take, keys, (keys + 1) % THIRDS))
    assert not reward.any() and not done.any() and "success" not in info
    for f, took in zip(obs, take):  # the bar along the top edge where the key was taken, black elsewhere
        assert (f[:, 0] == KEY[:, None]).all() == took and not f[:, 1:].any() and (f.any() == took)
    obs, reward, done, _ = venv.step(np.arange(n) % THIRDS)  # what is done on the bar's frame does nothing
    assert not reward.any() and not done.any()
    picked = np.zeros(n)
    apples_seen = 0
    for t in range(2, span):
        apples = [third_of(f, APPLE, size) if f.any() else -1 for f in obs]
        apples_seen += sum(a >= 0 for a in apples)
        # the first half of the envs reach for each apple, the rest reach elsewhere
        act = np.array([(a if a >= 0 else 0) if b < n // 2 else (a + 1) % THIRDS if a >= 0 else 0
                        for b, a in enumerate(apples)])
        obs, reward, done, _ = venv.step(act)
        want = np.array([0.25 if a >= 0 and b < n // 2 else 0.0 for b, a in enumerate(apples)], np.float32)
        np.testing.assert_array_equal(reward, want)
        picked += want
        assert not done.any()
    assert 0.3 < apples_seen / (n * (span - 2)) < 0.7  # apple_rate 0.5
    assert (obs == DOOR).all()
    obs, reward, done, info = venv.step(np.zeros(n, int))  # any action at the door
    assert done.all()
    np.testing.assert_array_equal(reward, np.where(take, 1.0, 0.0))
    np.testing.assert_array_equal(info["success"], take.astype(float))
    np.testing.assert_allclose(info["episode_return"], picked + take, rtol=1e-6)
    assert list(info["episode_length"]) == [span + 1] * n
    assert third_of(obs[0], KEY, size) in range(THIRDS)  # the next episode starts with a key again
    _, _, done, info = venv.step(np.zeros(n, int))
    assert not done.any() and "success" not in info


def test_every_third_holds_the_key_and_apples_come_at_their_rate_in_every_third():
    env = KeyApples(span=60, apple_rate=0.3)
    keys = np.zeros(THIRDS)
    apples = np.zeros(THIRDS)
    frames = 0
    for seed in range(300):
        env.reset(seed=seed)
        keys[env.key] += 1
        for _ in range(env.span):
            env.step(0)
            if 2 <= env.t < env.span:
                frames += 1
                apples[env.apple] += env.apple >= 0
        assert env.t == env.span
    assert (np.abs(keys / keys.sum() - 1 / THIRDS) < 0.08).all()
    assert abs(apples.sum() / frames - 0.3) < 0.02 and (np.abs(apples / apples.sum() - 1 / THIRDS) < 0.03).all()


def test_without_apples_it_is_key_to_door_and_the_return_is_the_success():
    env = KeyApples(span=5, apple_rate=0.0)
    for take in (True, False):
        env.reset(seed=1)
        total = 0.0
        _, r, *_ = env.step(env.key if take else (env.key + 2) % THIRDS)
        total += r
        for _ in range(env.span - 1):
            obs, r, term, _, info = env.step(env.t % THIRDS)
            total += r
            assert not term and (not obs.any() or env.t == env.span)
        _, r, term, _, info = env.step(1)
        total += r
        assert term and total == info["success"] == float(take) and info["apples"] == 0


def test_bad_options_and_actions_are_refused_by_name():
    with pytest.raises(ValueError, match="span must be >= 3"):
        KeyApples(span=2)
    with pytest.raises(ValueError, match="size must be >= 3"):
        KeyApples(size=2)
    with pytest.raises(ValueError, match=r"thing .* must be in 1 .. size // 3 \(5\)"):
        KeyApples(size=16, thing=6)
    with pytest.raises(ValueError, match="apple_rate must be a probability"):
        KeyApples(apple_rate=1.5)
    env = KeyApples(span=3)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action must name a third of the frame, 0 .. 2, got 3"):
        env.step(3)
