"""examples/two_keys.py, the twentieth user-written Gymnasium task: a yellow key on the first frame, a blue one at
frame ``span // 2``, each followed by a frame that shows it taken, and a door at frame ``span`` that pays both keys
(``pay="both"``) or half for each (``pay="each"``); ``info["success"]`` (both taken) reaches the vector env's info at
the episode's end; bad options and actions are refused."""

import numpy as np
import pytest

from r2ac.envs import make_vec_env
from r2ac.envs.gym_env import import_user_module

_example = import_user_module("examples.two_keys")
THIRDS, FIRST, SECOND, DOOR, TwoKeys = (_example.THIRDS, _example.FIRST, _example.SECOND, _example.DOOR,
                                        _example.TwoKeys)

TASK = "gym:examples.two_keys:TwoKeys"


def third_of(frame: np.ndarray, rgb: np.ndarray, size: int, thing: int) -> int:
    """The third of a (3, H, W) frame that holds the one square of colour ``rgb`` on black (asserted)."""
    lit = (frame == rgb[:, None, None]).all(axis=0)
    ys, xs = np.nonzero(lit)
    assert lit.sum() == thing * thing and np.ptp(ys) == thing - 1 and (frame[:, ~lit] == 0).all()
    assert ys.min() >= 1 and ys.max() <= size - 2  # off the two bars' rows
    width = size // THIRDS
    assert xs.max() < THIRDS * width and xs.min() // width == xs.max() // width  # inside one third
    return int(xs.min() // width)


@pytest.mark.parametrize("pay", ["both", "each"])
def test_two_keys_bars_and_a_door_that_pays_as_told(pay):
    span, n, size, thing = 21, 12, 9, 2
    venv = make_vec_env(TASK, n, 0, span=span, size=size, thing=thing, pay=pay)
    assert venv.observation_shape == (3, size, size) and venv.num_actions == THIRDS
    obs = venv.reset()
    firsts = np.array([third_of(f, FIRST, size, thing) for f in obs])
    take1 = np.arange(n) % 2 == 0  # envs 0, 2, 4, ... take the first key
    take2 = (np.arange(n) // 2) % 2 == 0  # envs 0, 1, 4, 5, ... take the second
    obs, reward, done, info = venv.step(np.where(take1, firsts, (firsts + 1) % THIRDS))
    assert not reward.any() and not done.any() and "success" not in info
    for f, took in zip(obs, take1):  # the yellow bar along the top edge where the key was taken, black elsewhere
        assert (f[:, 0] == FIRST[:, None]).all() == took and not f[:, 1:].any() and f.any() == took
    for t in range(2, span // 2 + 1):  # black frames up to the second key's, whatever is done on them
        obs, reward, done, _ = venv.step(np.full(n, t % THIRDS))
        assert not reward.any() and not done.any() and (t == span // 2 or not obs.any())
    seconds = np.array([third_of(f, SECOND, size, thing) for f in obs])
    obs, reward, done, _ = venv.step(np.where(take2, seconds, (seconds + 2) % THIRDS))
    assert not reward.any() and not done.any()
    for f, took in zip(obs, take2):  # the blue bar along the bottom edge
        assert (f[:, -1] == SECOND[:, None]).all() == took and not f[:, :-1].any() and f.any() == took
    for _ in range(span // 2 + 1, span):
        obs, reward, done, _ = venv.step(np.zeros(n, int))
        assert not reward.any() and not done.any()
    assert (obs == DOOR).all()
    obs, reward, done, info = venv.step(np.ones(n, int))  # any action at the door
    assert done.all()
    both = take1 & take2
    want = both.astype(float) if pay == "both" else 0.5 * (take1.astype(float) + take2)
    np.testing.assert_array_equal(reward, want.astype(np.float32))
    np.testing.assert_array_equal(info["success"], both.astype(float))
    np.testing.assert_array_equal(info["first"], take1.astype(float))  # each key, as r2ac eval prints them
    np.testing.assert_array_equal(info["second"], take2.astype(float))
    np.testing.assert_allclose(info["episode_return"], want, rtol=1e-6)
    assert list(info["episode_length"]) == [span + 1] * n
    assert third_of(obs[0], FIRST, size, thing) in range(THIRDS)  # the next episode starts with a key again


def test_both_keys_in_every_third_drawn_apart():
    env = TwoKeys(span=10)
    counts = np.zeros((THIRDS, THIRDS))
    for seed in range(900):
        env.reset(seed=seed)
        counts[env.keys[0], env.keys[1]] += 1
    assert counts.min() > 60  # nine pairs, about 100 each: the second key is drawn apart from the first


def test_bad_options_and_actions_are_refused_by_name():
    with pytest.raises(ValueError, match="span must be >= 5"):
        TwoKeys(span=4)
    with pytest.raises(ValueError, match="pay must be one of"):
        TwoKeys(pay="first")
    with pytest.raises(ValueError, match="thing"):
        TwoKeys(size=9, thing=4)
    with pytest.raises(ValueError, match="size must be >= 3"):
        TwoKeys(size=2)
    env = TwoKeys(span=6)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action must name a third"):
        env.step(3)
