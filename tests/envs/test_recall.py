"""The long-credit recall tasks (r2ac.envs.recall): layout, rewards, chance levels, distractors, errors."""

import numpy as np
import pytest

from r2ac.envs import make_vec_env


def _run(venv, policy, steps):
    obs = venv.reset()
    ends = []
    for _ in range(steps):
        obs, reward, done, info = venv.step(policy(obs))
        ends += list(info["success"][done])
    return np.array(ends)


@pytest.mark.parametrize("obs", ["pixels", "vector"])
def test_cue_episode_layout_and_reward(obs):
    venv = make_vec_env("cue", 4, 0, span=3, obs=obs)
    o = venv.reset()
    cue = venv.cue.copy()
    assert venv.num_actions == 3
    if obs == "pixels":
        assert o.shape == (4, 3, 16, 16) and o.dtype == np.uint8
        assert (o.reshape(4, 3, -1).max(-1) > 0).any(1).all()  # the cue frame is coloured
    else:
        assert o.shape == (4, 4) and np.array_equal(o[np.arange(4), cue], np.ones(4))
    for t in range(1, 5):  # 3 blank frames, then the query
        o, r, d, info = venv.step(np.zeros(4, dtype=np.int64))
        assert not d.any() and not r.any()
        blank = o.reshape(4, -1)
        if t <= 3:
            assert blank.max() == 0
        else:
            assert (blank.min(1) > 0).all() if obs == "pixels" else (o[:, -1] == 1).all()
    o, r, d, info = venv.step(cue)  # answering with the cue pays 1 and ends the episode
    assert d.all() and np.array_equal(r, np.ones(4, dtype=np.float32))
    assert np.array_equal(info["success"], np.ones(4)) and np.array_equal(info["episode_length"], np.full(4, 5))


def test_cue_chance_and_oracle():
    venv = make_vec_env("cue", 64, 1, span=5, obs="vector")
    rng = np.random.default_rng(0)
    random = _run(venv, lambda o: rng.integers(0, 3, 64), 7 * 40)
    assert abs(random.mean() - 1 / 3) < 0.05
    memory = {}

    def oracle(o):  # remembers the one-hot of the first frame
        first = o[:, :3].max(1) == 1
        for b in np.flatnonzero(first):
            memory[b] = int(o[b, :3].argmax())
        return np.array([memory[b] for b in range(64)])
    assert _run(make_vec_env("cue", 64, 1, span=5, obs="vector"), oracle, 7 * 10).mean() == 1.0


def test_cue_distractors_fill_the_gap():
    venv = make_vec_env("cue", 8, 0, span=20, distractors=1.0)
    venv.reset()
    o, *_ = venv.step(np.zeros(8, dtype=np.int64))
    assert o.reshape(8, -1).std(1).min() > 30  # noise frames, not blank or solid colour
    assert make_vec_env("cue", 8, 0, span=20, distractors=0.0).step is not None


def test_cue_span_min_and_cue_delay_draw_each_episode_layout():
    venv = make_vec_env("cue", 256, 0, span=6, span_min=2, cue_delay=3, obs="vector")
    o = venv.reset()
    cue_steps, spans = [], []
    seen_cue = np.full(256, -1)
    t = np.zeros(256, dtype=np.int64)
    for _ in range(60):
        shown = o[:, :3].max(1) == 1
        seen_cue[shown] = o[shown, :3].argmax(1)
        query = o[:, -1] == 1
        cue_step, query_step = venv.cue_step.copy(), venv.query_step.copy()
        # the cue is shown at its drawn step only, the query at its drawn step only, blanks everywhere else
        assert np.array_equal(shown, t == cue_step) and np.array_equal(query, t == query_step)
        assert o[~shown & ~query].max(initial=0) == 0
        action = np.where(seen_cue >= 0, seen_cue, 0)  # answers with the cue it saw
        o, r, d, info = venv.step(action)
        assert np.array_equal(d, query) and np.array_equal(r, query.astype(np.float32))
        cue_steps += list(cue_step[d])
        spans += list((query_step - cue_step - 1)[d])
        assert np.array_equal(info["episode_length"][d], query_step[d] + 1)
        t = np.where(d, 0, t + 1)
        seen_cue[d] = -1
    assert set(cue_steps) == {0, 1, 2, 3} and set(spans) == {2, 3, 4, 5, 6}


def test_cue_delay_min_fixes_the_cue_at_a_later_step():
    # cue_delay_min = cue_delay: the cue always at that step, the frames before it blank or noise, the flag's
    # frame (step 0) never the cue
    venv = make_vec_env("cue", 64, 0, span=4, cue_delay=1, cue_delay_min=1, obs="vector")
    o = venv.reset()
    t = np.zeros(64, dtype=np.int64)
    ends = 0
    for _ in range(20):
        shown = o[:, :3].max(1) == 1
        assert np.array_equal(shown, t == 1) and np.all(venv.cue_step == 1)
        o, r, d, info = venv.step(np.zeros(64, dtype=np.int64))
        assert np.all(info["episode_length"][d] == 1 + 4 + 2)
        ends += int(d.sum())
        t = np.where(d, 0, t + 1)
    assert ends >= 64
    keydoor = make_vec_env("keydoor", 512, 0, span=3, cue_delay=4, cue_delay_min=2)
    keydoor.reset()
    assert set(keydoor.cue_step.tolist()) == {2, 3, 4}


def test_cue_fixed_layout_draws_nothing_more():
    """Without span_min / cue_delay the env draws what it always drew: the runs of docs/ stay reproducible."""
    a = make_vec_env("cue", 8, 3, span=5, distractors=0.5)
    b = make_vec_env("cue", 8, 3, span=5, span_min=5, cue_delay=0, distractors=0.5)
    assert np.array_equal(a.reset(), b.reset())
    assert np.array_equal(a.desync(np.random.default_rng(1)), b.desync(np.random.default_rng(1)))
    # the draws of the env before these options existed (recorded from that code, commit 0806b7c)
    assert a.cue.tolist() == [2, 0, 0, 0, 0, 2, 2, 1] and a.t.tolist() == [3, 3, 5, 6, 0, 1, 5, 6]
    for k in range(30):
        act = np.full(8, k % 3, dtype=np.int64)
        sa, sb = a.step(act), b.step(act)
        for x, y in zip(sa[:3], sb[:3]):
            assert np.array_equal(x, y)
    assert a.cue.tolist() == [0, 1, 0, 1, 0, 2, 1, 0] and int(sa[0].astype(np.int64).sum()) == 426121


def test_copy_rewards_each_bit():
    venv = make_vec_env("copy", 2, 0, span=2, symbols=3)
    o = venv.reset()
    bits = venv.bits.copy()
    seen = [o[:, :2].argmax(1)]
    for _ in range(2):
        o, *_ = venv.step(np.zeros(2, dtype=np.int64))
        seen.append(o[:, :2].argmax(1))
    assert np.array_equal(np.stack(seen, 1), bits)
    for t in range(3):  # two blank frames, then the first query
        o, r, d, _ = venv.step(np.zeros(2, dtype=np.int64))
        assert not r.any() and (o[:, 2] == (t < 2)).all()
    total = np.zeros(2)
    for k in range(3):
        assert (o[:, 3] == 1).all()
        answer = bits[:, k].copy()
        answer[1] = 1 - answer[1] if k == 0 else answer[1]  # env 1 gets the first bit wrong
        o, r, d, info = venv.step(answer)
        total += r
    assert d.all() and np.allclose(total, [1.0, 2 / 3]) and np.array_equal(info["success"], [1.0, 0.0])


@pytest.mark.parametrize("obs", ["pixels", "vector"])
def test_keydoor_pays_at_the_door_for_the_choice_at_the_key(obs):
    venv = make_vec_env("keydoor", 4, 0, span=3, obs=obs)
    o = venv.reset()
    key = venv.cue.copy()
    assert venv.num_actions == 3 and o.shape == ((4, 3, 16, 16) if obs == "pixels" else (4, 5))
    if obs == "vector":
        assert np.array_equal(o[np.arange(4), key], np.ones(4)) and not o[:, 3:].any()
    choice = key.copy()
    choice[[1, 3]] = (key[[1, 3]] + 1) % 3  # envs 1 and 3 leave the key
    o, r, d, _ = venv.step(choice)
    assert not d.any() and not r.any()
    held = np.array([True, False, True, False])
    if obs == "pixels":  # the key held: an orange frame; left: a blank one
        assert np.array_equal(o[0, :, 0, 0], [255, 128, 0]) and np.array_equal(o[2, :, 0, 0], [255, 128, 0])
        assert o[1].max() == 0 and o[3].max() == 0
    else:
        assert np.array_equal(o[:, 3], held.astype(np.float32)) and not o[:, [0, 1, 2, 4]].any()
    for t in (2, 3, 4):  # blank frames, then the door; the actions there change nothing
        o, r, d, _ = venv.step(np.full(4, t % 3, dtype=np.int64))
        assert not d.any() and not r.any() and (t == 4 or o.max() == 0)
    door = o.reshape(4, -1)
    assert (door.min(1) == 255).all() if obs == "pixels" else (o[:, -1] == 1).all() and not o[:, :-1].any()
    o, r, d, info = venv.step(np.zeros(4, dtype=np.int64))  # at the door any action: paid where the key is held
    assert d.all() and np.array_equal(r, held.astype(np.float32))
    assert np.array_equal(info["success"], held.astype(np.float64))
    assert np.array_equal(info["episode_length"], np.full(4, 5))
    assert not venv.held.any()  # the next episode starts without a key


def test_keydoor_chance_and_a_policy_that_names_the_key():
    venv = make_vec_env("keydoor", 64, 1, span=5, obs="vector")
    rng = np.random.default_rng(0)
    assert abs(_run(venv, lambda o: rng.integers(0, 3, 64), 7 * 40).mean() - 1 / 3) < 0.05
    # a memoryless policy: name the colour in view (only the key frame has one); all episodes pay
    assert _run(make_vec_env("keydoor", 64, 1, span=5, obs="vector"), lambda o: o[:, :3].argmax(1), 7 * 10).mean() == 1


@pytest.mark.parametrize("kind,options,length", [
    ("cue", {"span": 7}, 9), ("keydoor", {"span": 7, "distractors": 0.5}, 9),
    ("copy", {"span": 4, "symbols": 2}, 8), ("tmaze", {"corridor_length": 6}, 7),
    ("watermaze", {"size": 3, "episode_length": 9}, 9)])
def test_desync_spreads_the_episode_ends_then_episodes_run_whole(kind, options, length):
    venv = make_vec_env(kind, 64, 0, **options)
    with pytest.raises(RuntimeError, match="reset"):
        venv.desync(np.random.default_rng(0))
    venv.reset()
    venv.desync(np.random.default_rng(1))
    first_end = np.full(64, -1)
    lengths = []
    for step in range(3 * length):  # at the T-maze's junction, turn left (action 1)
        _, _, done, info = venv.step(np.full(64, int(kind == "tmaze"), dtype=np.int64))
        first_end[done & (first_end < 0)] = step
        lengths += list(info["episode_length"][done])
    # every phase of the episode is taken by some env, so the first episodes end in every step of one course
    assert sorted(set(first_end)) == list(range(length))
    # the first episode is cut short; every later one lasts the whole course
    assert max(lengths) == length and lengths.count(length) >= 64
    assert np.isin(lengths, np.arange(1, length + 1)).all()

def test_desync_of_drawn_layouts_stays_inside_each_episode():
    venv = make_vec_env("cue", 512, 0, span=7, span_min=3, cue_delay=2, obs="vector")
    venv.reset()
    venv.desync(np.random.default_rng(1))
    # each env sits at a step of its own episode's course (never past its query, where it would never end)
    assert (venv.t <= venv.query_step).all() and set(venv.t) == set(range(11))
    ended = np.zeros(512, dtype=bool)
    for _ in range(11):
        _, _, done, _ = venv.step(np.zeros(512, dtype=np.int64))
        ended |= done
    assert ended.all()


def test_desync_is_none_where_an_env_kind_cannot():
    from r2ac.envs.base import VecEnv

    class Plain(VecEnv):
        num_envs, observation_shape, observation_dtype, num_actions = 1, (1,), np.float32, 2

        def reset(self):
            return np.zeros((1, 1), np.float32)

        def step(self, actions):
            raise NotImplementedError

    assert Plain().desync(np.random.default_rng(0)) is None


@pytest.mark.parametrize("kind,options,needle", [
    ("cue", {"obs": "rgb"}, "'obs'"), ("cue", {"cues": 1}, "'cues'"), ("cue", {"distractors": 2.0}, "'distractors'"),
    ("cue", {"span": -1}, "'span'"), ("cue", {"span": 5, "span_min": 6}, "'span_min'"),
    ("cue", {"cue_delay": -1}, "'cue_delay'"), ("cue", {"cue_delay": 1, "cue_delay_min": 2}, "'cue_delay_min'"),
    ("keydoor", {"span": 0}, "'span' must be >= 1"),
    ("keydoor", {"span": 5, "span_min": 0}, "'span_min' must be >= 1"), ("keydoor", {"cues": 9}, "'cues'"),
    ("copy", {"symbols": 0}, "'symbols'"), ("copy", {"spam": 1}, "spam")])
def test_recall_bad_options(kind, options, needle):
    with pytest.raises(ValueError, match=needle):
        make_vec_env(kind, 2, 0, **options)
