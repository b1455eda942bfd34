"""examples/look_first.py, the eighteenth user-written Gymnasium task: dim grey look-window frames first; the first
"look" taken on one of them shows the episode's colour on the next frame, and nothing else ever does; black frames,
then a grey query that pays the colour's name; every colour and place comes up, bad options are refused."""

import numpy as np
import pytest

from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query

_example = import_user_module("examples.look_first")
COLOURS, LOOK, QUERY, WINDOW, LookFirst = (_example.COLOURS, _example.LOOK, _example.QUERY, _example.WINDOW,
                                           _example.LookFirst)

TASK = "gym:examples.look_first:LookFirst"


def shown_colour(frame: np.ndarray, light: int = 4):
    """The index of the one ``light`` x ``light`` square of a colour on a channels-last black frame, or None for a
    frame with no colour on it (black, the window's grey or the query's); asserts it is one of the four."""
    if (frame == 0).all() or (frame == WINDOW).all() or (frame == QUERY).all():
        return None
    lit = frame.any(axis=-1)
    ys, xs = np.nonzero(lit)
    assert lit.sum() == light * light and np.ptp(ys) == light - 1 and np.ptp(xs) == light - 1
    colours = [c for c, rgb in enumerate(COLOURS) if (frame[lit] == rgb).all()]
    assert len(colours) == 1
    return colours[0]


def play(env, actions, seed: int = 0) -> list:
    """The frames of an episode of ``env`` (channels last, the reset's first) under ``actions`` (one per step
    before the query, 0 after them); asserts nothing pays or ends before the query."""
    frames = [env.reset(seed=seed)[0]]
    for t in range(env.span):
        frame, reward, done, _, _ = env.step(actions[t] if t < len(actions) else 0)
        assert reward == 0.0 and not done
        frames.append(frame)
    return frames


@pytest.mark.parametrize("look_at", [0, 1, 2])
def test_a_look_in_the_window_shows_the_colour_once_on_the_next_frame(look_at):
    env = LookFirst(span=8)
    actions = [0] * look_at + [LOOK, LOOK, LOOK, LOOK]  # only the first look counts
    frames = play(env, actions)
    assert env.looked_at == look_at
    shown = [shown_colour(f) for f in frames]
    assert shown == [None] * (look_at + 1) + [env.colour] + [None] * (env.span - look_at - 1)
    for t, f in enumerate(frames[:-1]):
        if t != look_at + 1:
            assert (f == (WINDOW if t < env.window else 0)).all()
    assert (frames[-1] == QUERY).all()


def test_no_look_or_a_look_after_the_window_shows_nothing():
    env = LookFirst(span=8)
    for actions in ([0] * 8, [1, 2, 0, LOOK, LOOK, LOOK]):
        frames = play(env, actions)
        assert env.looked_at == -1 and all(shown_colour(f) is None for f in frames)


def test_the_query_pays_the_colour_in_the_vector_env():
    from r2ac.envs import make_vec_env

    span, n = 6, 8
    venv = make_vec_env(TASK, n, 0, span=span)
    assert venv.observation_shape == (3, 16, 16) and venv.num_actions == 4
    obs = venv.reset()
    assert (obs == WINDOW).all()
    obs, reward, done, _ = venv.step(np.full(n, LOOK))
    assert not reward.any() and not done.any()
    colours = np.array([shown_colour(np.moveaxis(o, 0, -1)) for o in obs])
    for _ in range(span - 1):
        obs, reward, done, _ = venv.step(np.full(n, LOOK))
        assert not reward.any() and not done.any()
    assert (obs == QUERY).all()
    answer_the_query(venv, colours, (colours + 1) % 3, episode_length=span + 1)


def test_every_colour_and_place_comes_up_and_the_look_is_the_only_way_to_the_colour():
    env = LookFirst(span=4)
    colours, rows, columns = [], set(), set()
    for seed in range(500):
        play(env, [LOOK], seed)
        colours.append(env.colour)
        rows.add(env.corner[0])
        columns.add(env.corner[1])
    assert np.bincount(colours).min() > 130 and rows == columns == set(range(13))
    # a blind agent's best: every colour as likely as the others, chance 1/3 whatever it answers
    assert abs(np.mean(np.array(colours) == 0) - 1 / 3) < 0.07


def test_chance_looks_and_a_kept_colour_give_0_72():
    rng = np.random.default_rng(0)
    env, paid = LookFirst(span=5), []
    for seed in range(3000):
        frames = play(env, list(rng.integers(0, 4, 5)), seed)
        seen = [c for c in map(shown_colour, frames) if c is not None]
        paid.append(env.step(seen[0] if seen else int(rng.integers(3)))[1])
    assert abs(np.mean(paid) - (1 - 0.75 ** 3 + 0.75 ** 3 / 3)) < 0.03


@pytest.mark.parametrize("options, word", [({"window": 0}, "window"), ({"span": 3}, "span"),
                                           ({"light": 0}, "light"), ({"light": 17}, "light")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        LookFirst(**options)
