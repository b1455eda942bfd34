"""examples/first_guess.py, the sixteenth user-written Gymnasium task: a light grey frame where the first guess is
made, a hint frame whose colour says how many doors on from that guess the right one lies, black frames, a grey
query that pays only the right door; the hint alone says nothing of the door; the class declares that its
observation needs the previous action, and ``model.prev_action_input: auto`` reads that for ``gym:`` ids (a class,
a registered id) as for POPGym's; bad options and actions are refused."""

import gymnasium
import numpy as np
import pytest

from r2ac.envs import make_vec_env, needs_prev_action
from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query

_example = import_user_module("examples.first_guess")
DOORS, GUESS, HINTS, QUERY, FirstGuess = (_example.DOORS, _example.GUESS, _example.HINTS, _example.QUERY,
                                          _example.FirstGuess)

TASK = "gym:examples.first_guess:FirstGuess"


def hint_of(frame: np.ndarray) -> int:
    """The hint a (3, H, W) frame shows: the index in ``HINTS`` of its one colour (asserted)."""
    for k, rgb in enumerate(HINTS):
        if (frame == rgb[:, None, None]).all():
            return k
    raise AssertionError("a hint frame that is not one hint colour over the whole frame")


def test_guess_frame_hint_frame_black_frames_then_a_grey_query_that_pays_only_the_right_door():
    span, n = 7, 12
    venv = make_vec_env(TASK, n, 0, span=span, size=6)
    assert venv.observation_shape == (3, 6, 6) and venv.num_actions == DOORS
    obs = venv.reset()
    assert (obs == GUESS).all()
    guesses = np.arange(n) % DOORS
    obs, reward, done, _ = venv.step(guesses)
    assert not reward.any() and not done.any()
    doors = (guesses + np.array([hint_of(f) for f in obs])) % DOORS
    for _ in range(span - 2):  # black frames, whatever is done there
        obs, reward, done, _ = venv.step((doors + 1) % DOORS)
        assert not obs.any() and not reward.any() and not done.any()
    obs, reward, done, _ = venv.step(np.zeros(n, int))
    assert (obs == QUERY).all() and not reward.any() and not done.any()
    answer_the_query(venv, doors, (doors + 1) % DOORS, episode_length=span + 1)
    assert (venv.reset() == GUESS).all()  # the next episode starts with the guess's frame again


def test_every_door_hint_and_guess_come_up_and_the_hint_alone_says_nothing_of_the_door():
    env = FirstGuess(span=3)
    rng = np.random.default_rng(0)
    counts = np.zeros((DOORS, DOORS))  # [hint, door] with the first guess drawn at random
    fixed = np.zeros((DOORS, DOORS))  # [hint, door] with the first guess always door 0
    for seed in range(1500):
        for table, guess in ((counts, int(rng.integers(DOORS))), (fixed, 0)):
            env.reset(seed=seed)
            obs, *_ = env.step(guess)
            hint = hint_of(np.moveaxis(obs, -1, 0))
            assert hint == env.hint == (env.door - guess) % DOORS and env.guess == guess
            table[hint, env.door] += 1
    share = counts / counts.sum(axis=1, keepdims=True)
    assert (counts > 0).all() and np.abs(share - 1 / DOORS).max() < 0.07  # each hint leaves every door as likely
    assert (fixed == np.diag(np.diag(fixed))).all() and (np.diag(fixed) > 400).all()  # one guess always: hint = door


def test_the_class_declares_it_needs_the_previous_action_and_auto_reads_it_for_gym_ids():
    from r2ac.config import load_config
    from r2ac.runtime import build_net, resolve_model

    assert FirstGuess.obs_requires_prev_action is True
    assert needs_prev_action(TASK) and needs_prev_action("examples.first_guess:FirstGuess")
    assert not needs_prev_action("gym:examples.marked_light:MarkedLight")  # a class that does not declare it
    if "r2ac-test/FirstGuess-v0" not in gymnasium.registry:
        gymnasium.register("r2ac-test/FirstGuess-v0", entry_point="examples.first_guess:FirstGuess")
        gymnasium.register("r2ac-test/FirstGuessByFunction-v0", entry_point=lambda **kw: FirstGuess(**kw))
    assert needs_prev_action("gym:r2ac-test/FirstGuess-v0")  # a registered id: the class its entry point names
    assert not needs_prev_action("gym:r2ac-test/FirstGuessByFunction-v0")  # a function: nothing declared
    task = [f"env.id={TASK}", "env.options={span: 4}"]
    for overrides, expected in ((task, True), (task + ["model.prev_action_input=false"], False)):
        cfg = load_config("quickstart", overrides)
        assert cfg.model.prev_action_input == ("auto" if expected else False)
        assert resolve_model(cfg).prev_action_input is expected
        assert build_net(cfg, (3, 16, 16), DOORS).prev_action_input is expected
    with pytest.raises(ValueError, match="cannot import module 'examples.nope'"):
        needs_prev_action("gym:examples.nope:Nope")


def test_bad_options_and_actions_are_refused_by_name():
    with pytest.raises(ValueError, match="span must be >= 2"):
        FirstGuess(span=1)
    with pytest.raises(ValueError, match="size must be >= 1"):
        FirstGuess(size=0)
    env = FirstGuess(span=2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action must be a door, 0 .. 2, got 3"):
        env.step(3)
