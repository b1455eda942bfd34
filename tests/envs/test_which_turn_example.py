"""examples/which_turn.py, the fourteenth user-written Gymnasium task: three lights of the three colours on three
frames among the span frames and nowhere else, a grey query showing one colour at its centre, the query pays only
the turn that colour took, every order, asked colour and frame comes up, bad options are refused."""

import numpy as np
import pytest

from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query, light_colour, light_task_frames

_example = import_user_module("examples.which_turn")
COLOURS, QUERY, WhichTurn = _example.COLOURS, _example.QUERY, _example.WhichTurn

TASK = "gym:examples.which_turn:WhichTurn"


def asked_colour(frame: np.ndarray) -> int:
    """The colour a (3, 10, 10) query frame shows: a 2x2 square at its centre, grey everywhere else."""
    centre = np.zeros((10, 10), bool)
    centre[4:6, 4:6] = True
    assert (frame[:, ~centre] == QUERY).all()
    matches = [c for c, rgb in enumerate(COLOURS) if (frame[:, centre] == rgb[:, None]).all()]
    assert len(matches) == 1
    return matches[0]


def test_three_lights_of_the_three_colours_then_the_query_pays_only_the_asked_colours_turn():
    span, n = 7, 8
    venv, frames = light_task_frames(TASK, span, n)
    orders = []
    for e in range(n):
        shown = [c for c in (light_colour(f[e], COLOURS) for f in frames) if c is not None]
        assert sorted(shown) == [0, 1, 2]
        orders.append(shown)
    obs, reward, done, _ = venv.step(np.zeros(n, int))  # the query
    assert not reward.any() and not done.any()
    turns = np.array([orders[e].index(asked_colour(obs[e])) for e in range(n)])
    answer_the_query(venv, turns, (turns + 1) % 3, episode_length=span + 1)


def test_every_order_asked_colour_and_frame_comes_up_and_the_turn_is_the_asked_colours_place():
    env = WhichTurn(span=5)
    orders, asked, when, turns = set(), set(), set(), []
    for seed in range(400):
        env.reset(seed=seed)
        orders.add(env.order)
        asked.add(env.asked)
        when |= set(env.times)
        assert env.times[0] < env.times[1] < env.times[2] and env.order[env.turn] == env.asked
        turns.append(env.turn)
    assert len(orders) == 6 and asked == {0, 1, 2} and when == set(range(5))
    assert all(abs(np.mean(np.array(turns) == k) - 1 / 3) < 0.08 for k in range(3))


def test_the_query_frame_is_grey_with_the_asked_colour_at_its_centre():
    env = WhichTurn(span=3, size=16, light=3)
    env.reset(seed=4)
    for _ in range(3):
        frame, reward, done, _, _ = env.step(0)
        assert reward == 0.0 and not done
    assert (frame[6:9, 6:9] == COLOURS[env.asked]).all()
    grey = np.ones((16, 16), bool)
    grey[6:9, 6:9] = False
    assert (frame[grey] == QUERY).all()
    _, reward, done, _, _ = env.step(env.turn)
    assert reward == 1.0 and done


@pytest.mark.parametrize("options, word", [({"span": 2}, "span"), ({"light": 0}, "light"),
                                           ({"light": 40}, "light")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        WhichTurn(**options)
