"""examples/which_rule.py, the seventeenth user-written Gymnasium task: a rule frame (yellow or magenta) first, black
frames, then a grey query with one coloured square in one of three places; the query pays the colour under the
first rule and the place under the second, the two never agree, every rule, colour and place comes up, bad options
are refused."""

import numpy as np
import pytest

from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query, span_frames

_example = import_user_module("examples.which_rule")
COLOURS, RULES, QUERY, WhichRule = _example.COLOURS, _example.RULES, _example.QUERY, _example.WhichRule

TASK = "gym:examples.which_rule:WhichRule"


def read_query(frame: np.ndarray, light: int = 3):
    """(colour, place) of the one ``light`` x ``light`` square on a channels-last grey query frame."""
    square = ~(frame == QUERY).all(axis=-1)
    ys, xs = np.nonzero(square)
    assert square.sum() == light * light and np.ptp(ys) == light - 1 and np.ptp(xs) == light - 1
    colours = [c for c, rgb in enumerate(COLOURS) if (frame[square] == rgb).all()]
    assert len(colours) == 1
    return colours[0], int(xs.min()) // (frame.shape[1] // 3)


def test_the_rule_frame_then_black_then_the_query_pays_what_the_rule_asks_for():
    from r2ac.envs import make_vec_env

    span, n = 6, 8
    venv = make_vec_env(TASK, n, 0, span=span)
    assert venv.observation_shape == (3, 16, 16) and venv.num_actions == 3
    frames = span_frames(venv, span)
    rules = []
    for e in range(n):
        matches = [r for r, rgb in enumerate(RULES) if (frames[0][e] == rgb[:, None, None]).all()]
        assert len(matches) == 1
        rules.append(matches[0])
        assert all(not f[e].any() for f in frames[1:])
    obs, reward, done, _ = venv.step(np.zeros(n, int))  # the query
    assert not reward.any() and not done.any()
    shown = [read_query(np.moveaxis(obs[e], 0, -1)) for e in range(n)]
    right = np.array([place if rule else colour for rule, (colour, place) in zip(rules, shown)])
    other = np.array([colour if rule else place for rule, (colour, place) in zip(rules, shown)])
    assert (right != other).all()
    answer_the_query(venv, right, other, episode_length=span + 1)


def test_every_rule_colour_place_and_height_comes_up_and_the_rules_never_agree():
    env = WhichRule(span=2)
    pairs, rules, heights = set(), [], set()
    for seed in range(600):
        env.reset(seed=seed)
        rules.append(env.rule)
        pairs.add((env.colour, env.place))
        heights.add(env.height)
        assert env.colour != env.place and env.answer == (env.place if env.rule else env.colour)
        env.step(0)
        frame, _, _, _, _ = env.step(0)
        assert read_query(frame) == (env.colour, env.place)
    assert pairs == {(c, p) for c in range(3) for p in range(3) if c != p} and heights == set(range(14))
    assert abs(np.mean(rules) - 0.5) < 0.07


def test_an_agent_that_keeps_no_rule_is_right_on_half_at_most():
    env = WhichRule(span=1)
    paid = {"colour": [], "place": []}
    for seed in range(400):
        env.reset(seed=seed)
        for read, answer in (("colour", env.colour), ("place", env.place)):
            paid[read].append(answer == env.answer)
    assert all(abs(np.mean(v) - 0.5) < 0.07 for v in paid.values())
    assert np.mean(np.array(paid["colour"]) | np.array(paid["place"])) == 1.0


@pytest.mark.parametrize("options, word", [({"span": 0}, "span"), ({"light": 0}, "light"),
                                           ({"light": 6}, "light")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        WhichRule(**options)
