"""r2ac.envs: the vector-env contract, the built-in memory tasks, the gym path, errors.

Atari (real ale-py), ProcGen (real procgen) and DMLab (against a fake module) are in
tests/envs/test_external.py.
"""

import gymnasium
import numpy as np
import pytest

from r2ac.envs import ENV_KINDS, env_options, make_vec_env, parse_env_id
from r2ac.envs.memory import TMazeCore

# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def run_random(venv, steps, seed=0):
    """Random actions; yields (obs_before, action, obs, reward, done, info) per step."""
    rng = np.random.default_rng(seed)
    obs = venv.reset()
    for _ in range(steps):
        a = rng.integers(0, venv.num_actions, size=venv.num_envs)
        nobs, r, d, info = venv.step(a)
        yield obs, a, nobs, r, d, info
        obs = nobs


def check_step_types(venv, obs, r, d, info):
    B = venv.num_envs
    assert obs.shape == (B, *venv.observation_shape) and obs.dtype == venv.observation_dtype
    assert r.shape == (B,) and r.dtype == np.float32
    assert d.shape == (B,) and d.dtype == np.bool_
    assert info["episode_return"].shape == (B,) and info["episode_return"].dtype == np.float64
    assert info["episode_length"].shape == (B,) and info["episode_length"].dtype == np.int64
    assert np.isnan(info["episode_return"][~d]).all() and (info["episode_length"][~d] == 0).all()
    assert not np.isnan(info["episode_return"][d]).any() and (info["episode_length"][d] > 0).all()


def check_episode_accounting(venv, steps, seed=0):
    """episode_return / episode_length at done equal the sums over the steps since the last done."""
    ret = np.zeros(venv.num_envs)
    length = np.zeros(venv.num_envs, dtype=np.int64)
    n_done = 0
    for _, _, obs, r, d, info in run_random(venv, steps, seed):
        check_step_types(venv, obs, r, d, info)
        ret += r
        length += 1
        np.testing.assert_allclose(info["episode_return"][d], ret[d])
        np.testing.assert_array_equal(info["episode_length"][d], length[d])
        ret[d], length[d] = 0, 0
        n_done += int(d.sum())
    return n_done


def cue_of(obs):
    """Decode the T-maze cue from a frame: 0 = left (red, top-left), 1 = right (green, top-right),
    -1 = no cue shown."""
    left = obs[..., 0, 0:2, 0:4].reshape(*obs.shape[:-3], -1).max(-1) > 0
    right = obs[..., 1, 0:2, 4:8].reshape(*obs.shape[:-3], -1).max(-1) > 0
    return np.where(left, 0, np.where(right, 1, -1))


def at_junction(obs):
    return obs[..., 2, 2:4, :].reshape(*obs.shape[:-3], -1).min(-1) > 0


# --------------------------------------------------------------------------------------------------
# ids, kinds, options
# --------------------------------------------------------------------------------------------------


def test_env_kinds_and_ids():
    assert set(ENV_KINDS) == {"tmaze", "watermaze", "cue", "copy", "keydoor", "atari", "procgen", "dmlab", "gym",
                              "minigrid"}
    assert parse_env_id("tmaze") == ("tmaze", None)
    assert parse_env_id("atari:Breakout") == ("atari", "Breakout")
    assert parse_env_id("procgen:chaser") == ("procgen", "chaser")
    assert parse_env_id("dmlab:rooms_watermaze") == ("dmlab", "rooms_watermaze")
    assert parse_env_id("gym:CartPole-v1") == ("gym", "CartPole-v1")
    assert parse_env_id("gym:some.module:Env") == ("gym", "some.module:Env")
    assert parse_env_id("some.module:Env-v0") == ("gym", "some.module:Env-v0")
    assert env_options("tmaze") == {"corridor_length": 10, "auto_advance": True, "max_steps": None,
                                    "wrong_reward": 0.0}
    assert env_options("watermaze") == {"size": 7, "episode_length": 100, "allow_stay": False}
    assert env_options("procgen:chaser")["distribution_mode"] == "hard"
    assert env_options("atari")["repeat_action_probability"] == 0.0


@pytest.mark.parametrize("env_id", ["nope", "", "tmaze:x", "atari:", "Breakout"])
def test_unknown_id_is_a_clear_error(env_id):
    with pytest.raises(ValueError) as err:
        make_vec_env(env_id, 2, 0)
    msg = str(err.value)
    assert "tmaze" in msg and "atari:" in msg and "gym:" in msg
    if env_id:
        assert repr(env_id) in msg


def test_unknown_names_within_a_kind():
    with pytest.raises(ValueError, match="procgen game 'nope'.*chaser"):
        make_vec_env("procgen:nope", 2, 0)
    with pytest.raises(ValueError, match="unknown DMLab level 'nope'.*rooms_watermaze"):
        make_vec_env("dmlab:nope", 2, 0)
    with pytest.raises(ValueError, match="not a registered gymnasium id"):
        make_vec_env("gym:NoSuchEnv-v9", 2, 0)
    with pytest.raises(ValueError, match="cannot import module"):
        make_vec_env("no_such_module_xyz:Env-v0", 2, 0)


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['corridor_lenght'\].*corridor_length=10"):
        make_vec_env("tmaze", 2, 0, corridor_lenght=5)
    with pytest.raises(ValueError, match="unknown option.*distribution_mode='hard'"):
        make_vec_env("procgen:chaser", 2, 0, distribution="easy")
    with pytest.raises(ValueError, match="corridor_length"):
        make_vec_env("tmaze", 2, 0, corridor_length=0)
    with pytest.raises(ValueError, match="auto_advance"):
        make_vec_env("tmaze", 2, 0, auto_advance="yes")
    with pytest.raises(ValueError, match="max_steps"):
        make_vec_env("tmaze", 2, 0, corridor_length=10, max_steps=10)
    with pytest.raises(ValueError, match="size"):
        make_vec_env("watermaze", 2, 0, size=1)
    with pytest.raises(ValueError, match="episode_length"):
        make_vec_env("watermaze", 2, 0, episode_length=0)
    with pytest.raises(ValueError, match="distribution_mode"):
        make_vec_env("procgen:chaser", 2, 0, distribution_mode="medium")
    with pytest.raises(ValueError, match="num_envs"):
        make_vec_env("tmaze", 0, 0)
    with pytest.raises(ValueError, match="seed"):
        make_vec_env("tmaze", 2, "zero")


def test_bad_actions_are_clear_errors():
    venv = make_vec_env("tmaze", 3, 0)
    with pytest.raises(RuntimeError, match="reset"):
        venv.step(np.zeros(3, dtype=np.int64))
    venv.reset()
    with pytest.raises(ValueError, match="shape"):
        venv.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        venv.step(np.array([0, 3, 0]))
    with pytest.raises(TypeError, match="integers"):
        venv.step(np.zeros(3, dtype=np.float32))


# --------------------------------------------------------------------------------------------------
# contract on the cheap kinds (the external ones are checked in test_envs_external.py)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id,options,shape,dtype,n_actions", [
    ("tmaze", {}, (3, 8, 8), np.uint8, 3),
    ("tmaze", {"corridor_length": 40, "auto_advance": False}, (3, 8, 8), np.uint8, 3),
    ("watermaze", {}, (3, 9, 9), np.uint8, 4),
    ("watermaze", {"size": 5, "allow_stay": True, "episode_length": 30}, (3, 7, 7), np.uint8, 5),
    ("gym:CartPole-v1", {}, (4,), np.float32, 2),
    ("gym:FrozenLake-v1", {}, (16,), np.float32, 4),
])
def test_shapes_dtypes_and_episode_accounting(env_id, options, shape, dtype, n_actions):
    venv = make_vec_env(env_id, 5, 1, **options)
    assert venv.num_envs == 5 and venv.observation_shape == shape
    assert venv.observation_dtype == dtype and venv.num_actions == n_actions
    obs = venv.reset()
    assert obs.shape == (5, *shape) and obs.dtype == dtype
    assert check_episode_accounting(venv, 400) > 0
    venv.close()


@pytest.mark.parametrize("env_id,options", [
    ("tmaze", {"corridor_length": 7}), ("watermaze", {"size": 5, "episode_length": 40}),
    ("gym:CartPole-v1", {}),
])
def test_seed_determinism(env_id, options):
    def rollout(seed):
        out = []
        for _, _, obs, r, d, info in run_random(make_vec_env(env_id, 4, seed, **options), 150, seed=3):
            out.append((obs.copy(), r.copy(), d.copy()))
        return out

    a, b, c = rollout(11), rollout(11), rollout(12)
    for (oa, ra, da), (ob, rb, db) in zip(a, b):
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_array_equal(da, db)
    assert any(not np.array_equal(x[0], y[0]) for x, y in zip(a, c))


# --------------------------------------------------------------------------------------------------
# T-maze
# --------------------------------------------------------------------------------------------------


def test_tmaze_hand_computed_episode():
    """corridor_length=3, auto-advance: 3 corridor steps, turn at t=3; done step's obs is fresh."""
    venv = make_vec_env("tmaze", 2, 0, corridor_length=3)
    obs = venv.reset()
    cue = venv.cue
    np.testing.assert_array_equal(cue_of(obs), cue)            # cue visible at t = 0
    assert not at_junction(obs).any()
    assert (obs[:, 2, 4:8].reshape(2, -1) == 0).all()          # progress 0
    bar = [10, 21, 32]                                          # floor(32 * pos / 3)
    for t in range(3):
        obs, r, d, info = venv.step(np.array([1, 2]))           # turns in the corridor are ignored
        assert (r == 0).all() and not d.any()
        assert (cue_of(obs) == -1).all()                        # cue gone after t = 0
        lit = (obs[:, 2, 4:8].reshape(2, -1) > 0).sum(-1)
        np.testing.assert_array_equal(lit, bar[t])
        assert at_junction(obs).all() == (t == 2)
    actions = np.array([cue[0] + 1, 2 - cue[1]])                # env 0 turns right, env 1 wrong
    obs, r, d, info = venv.step(actions)
    np.testing.assert_array_equal(r, [1.0, 0.0])
    assert d.all()
    np.testing.assert_array_equal(info["episode_return"], [1.0, 0.0])
    np.testing.assert_array_equal(info["episode_length"], [4, 4])
    np.testing.assert_array_equal(info["success"], [1.0, 0.0])
    assert not info["truncated"].any()
    # same-step autoreset: the returned obs is the next episode's first frame (cue shown, progress 0)
    np.testing.assert_array_equal(cue_of(obs), venv.cue)
    assert (obs[:, 2, 2:8] == 0).all()
    obs, r, d, info = venv.step(np.zeros(2, dtype=np.int64))
    assert not d.any() and np.isnan(info["success"]).all() and np.isnan(info["episode_return"]).all()


def _tmaze_success_rate(policy, corridor_length=40, num_envs=64, episodes=2000, **options):
    venv = make_vec_env("tmaze", num_envs, 5, corridor_length=corridor_length, **options)
    obs = venv.reset()
    memory = cue_of(obs)
    results = []
    while len(results) < episodes:
        a = policy(obs, memory)
        obs, r, d, info = venv.step(a)
        results.extend(info["success"][d])
        np.testing.assert_array_equal(info["episode_return"][d], info["success"][d])
        seen = cue_of(obs)
        memory = np.where(seen >= 0, seen, memory)
    return float(np.mean(results)), len(results)


def test_tmaze_optimal_policy_always_succeeds_fixed_side_is_chance():
    def optimal(obs, memory):   # remembers the cue from t = 0 and turns to it at the junction
        return np.where(at_junction(obs), memory + 1, 0)

    def always_left(obs, memory):
        return np.where(at_junction(obs), 1, 0)

    rate, n = _tmaze_success_rate(optimal)
    assert rate == 1.0 and n >= 2000
    rate, n = _tmaze_success_rate(always_left, episodes=4000)
    assert 0.46 < rate < 0.54, rate       # 50 % +- 5 sigma


def test_tmaze_cue_only_at_step_zero_and_exact_span():
    venv = make_vec_env("tmaze", 16, 2, corridor_length=40)
    obs = venv.reset()
    t = np.zeros(16, dtype=np.int64)
    for _ in range(300):
        assert ((cue_of(obs) >= 0) == (t == 0)).all()
        assert (at_junction(obs) == (t == 40)).all()          # decision is the action at t = 40
        obs, r, d, info = venv.step(np.where(at_junction(obs), 1, 0))
        t = np.where(d, 0, t + 1)
        assert (info["episode_length"][d] == 41).all()


def test_tmaze_manual_mode_and_time_limit():
    venv = make_vec_env("tmaze", 1, 0, corridor_length=3, auto_advance=False, max_steps=8)
    obs = venv.reset()
    obs, *_ = venv.step(np.array([1]))                         # a turn in the corridor: no progress
    assert cue_of(obs)[0] == -1                                 # cue hidden even without moving
    assert (obs[0, 2, 4:8] == 0).all()
    for _ in range(3):
        obs, r, d, info = venv.step(np.array([0]))
    assert at_junction(obs)[0] and not d[0]
    for _ in range(3):                                          # waiting at the junction
        obs, r, d, info = venv.step(np.array([0]))
    assert not d[0]
    obs, r, d, info = venv.step(np.array([0]))                 # step 8: time limit
    assert d[0] and info["truncated"][0] and r[0] == 0 and info["success"][0] == 0.0
    assert info["episode_length"][0] == 8


def test_tmaze_wrong_reward_option():
    venv = make_vec_env("tmaze", 32, 0, corridor_length=2, wrong_reward=-1.0)
    venv.reset()
    for _ in range(2):
        venv.step(np.zeros(32, dtype=np.int64))
    obs, r, d, info = venv.step(np.ones(32, dtype=np.int64))
    assert d.all()
    np.testing.assert_array_equal(r, np.where(info["success"] == 1.0, 1.0, -1.0))


def test_tmaze_render_table_sizes():
    for L in (1, 5, 40, 1000):
        core = TMazeCore(1, corridor_length=L)
        assert core.frames.shape == (3, L + 1, 3, 8, 8)
        assert (core.frames[0, L, 2, 4:8] == 255).all()


# --------------------------------------------------------------------------------------------------
# Watermaze
# --------------------------------------------------------------------------------------------------


def _toward(agent, goal, size):
    ay, ax = np.divmod(agent, size)
    gy, gx = np.divmod(goal, size)
    return np.where(gy < ay, 0, np.where(gx > ax, 1, np.where(gy > ay, 2, 3)))


def test_watermaze_reward_reveal_respawn():
    S, T = 6, 200
    venv = make_vec_env("watermaze", 8, 4, size=S, episode_length=T)
    obs = venv.reset()
    goal0 = venv.goal
    assert (venv.agent != goal0).all()
    found = np.zeros(8)
    on_goal = np.zeros(8, dtype=bool)
    for t in range(T):
        agent, goal = venv.agent, venv.goal
        a = _toward(agent, goal, S)
        obs, r, d, info = venv.step(a)
        reached = r == 1.0
        # respawn: the step after reaching the goal puts the agent elsewhere, with no reward
        assert (r[on_goal] == 0).all()
        if t < T - 1:
            assert not d.any()
            np.testing.assert_array_equal(venv.goal, goal0)         # same goal all episode
            assert (venv.agent[on_goal] != goal[on_goal]).all()
            np.testing.assert_array_equal(venv.agent[reached], goal[reached])
            y, x = np.divmod(goal[reached], S)
            np.testing.assert_array_equal(obs[reached, :, y + 1, x + 1],
                                          np.tile([255, 0, 255], (reached.sum(), 1)))
        found += r
        on_goal = reached
    assert d.all() and info["truncated"].all()
    np.testing.assert_array_equal(info["episode_length"], T)
    np.testing.assert_array_equal(info["goals_found"], found)
    np.testing.assert_array_equal(info["episode_return"], found)
    assert (found >= 10).all()                                 # greedy walker: many finds
    assert (info["mean_steps_to_goal_after_first"] <= 2 * (S - 1)).all()
    assert (info["success"] == 1.0).all()
    assert (venv.goal != goal0).any()                           # new episode, new goals


def test_watermaze_observation_and_walls():
    S = 5
    venv = make_vec_env("watermaze", 1, 0, size=S, allow_stay=True)
    obs = venv.reset()[0]
    np.testing.assert_array_equal(obs[:, 0, 1:-1].T, np.tile([255, 0, 0], (S, 1)))   # north red
    np.testing.assert_array_equal(obs[:, -1, 1:-1].T, np.tile([0, 0, 255], (S, 1)))  # south blue
    np.testing.assert_array_equal(obs[:, 1:-1, -1].T, np.tile([0, 255, 0], (S, 1)))  # east green
    np.testing.assert_array_equal(obs[:, 1:-1, 0].T, np.tile([255, 255, 0], (S, 1)))  # west yellow
    interior = obs[:, 1:-1, 1:-1]
    white = (interior == 255).all(0)
    assert white.sum() == 1                                       # only the agent; goal invisible
    y, x = np.divmod(venv.agent[0], S)
    assert white[y, x]
    # walk into the north wall: position clamps; "stay" keeps it
    for _ in range(S + 1):
        venv.step(np.array([0]))
        if venv.agent[0] == venv.goal[0]:
            return                                                # (rare) ran onto the goal
    assert venv.agent[0] // S == 0
    before = venv.agent[0]
    venv.step(np.array([4]))
    assert venv.agent[0] == before


def test_watermaze_random_policy_finds_goal_sometimes():
    venv = make_vec_env("watermaze", 32, 0)
    total = []
    for _, _, _, r, d, info in run_random(venv, 300):
        total.extend(info["goals_found"][d])
    assert len(total) == 96 and 0.1 < np.mean(total) < 5


# --------------------------------------------------------------------------------------------------
# gymnasium single-env versions
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gym_id,kwargs", [("r2ac/TMaze-v0", {"corridor_length": 4}),
                                           ("r2ac/Watermaze-v0", {"size": 4, "episode_length": 20})])
def test_registered_gymnasium_envs(gym_id, kwargs):
    from gymnasium.utils.env_checker import check_env

    env = gymnasium.make(gym_id, **kwargs)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    obs2, _ = env.reset(seed=3)
    np.testing.assert_array_equal(obs, obs2)
    steps, ret = 0, 0.0
    while True:
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        steps += 1
        ret += r
        if term or trunc:
            break
    assert "success" in info
    with pytest.raises(RuntimeError, match="reset"):
        env.unwrapped.step(0)


def test_registered_tmaze_episode():
    env = gymnasium.make("r2ac/TMaze-v0", corridor_length=2)
    obs, _ = env.reset(seed=0)
    cue = int(cue_of(obs))
    for _ in range(2):
        obs, r, term, trunc, _ = env.step(0)
        assert r == 0 and not term and not trunc
    obs, r, term, trunc, info = env.step(cue + 1)
    assert r == 1.0 and term and not trunc and info["success"] == 1.0


# --------------------------------------------------------------------------------------------------
# gym path
# --------------------------------------------------------------------------------------------------


class TinyImageEnv(gymnasium.Env):
    """HWC uint8 frames whose pixels hold the step count; ends after 3 steps."""

    observation_space = gymnasium.spaces.Box(0, 255, (6, 5, 3), np.uint8)
    action_space = gymnasium.spaces.Discrete(3, start=1)

    def __init__(self, episode_steps=3):
        self.episode_steps = episode_steps
        self.t = 0
        self.last_action = None

    def _obs(self):
        o = np.zeros((6, 5, 3), np.uint8)
        o[..., 0] = self.t
        o[..., 2] = np.arange(6)[:, None]
        return o

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert action in (1, 2, 3)
        self.last_action = action
        self.t += 1
        return self._obs(), float(action), self.t >= self.episode_steps, False, {}


class TinyBoxActionEnv(TinyImageEnv):
    action_space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)


def test_gym_image_env_layout_and_autoreset():
    venv = make_vec_env(f"gym:{__name__}:TinyImageEnv", 2, 0, episode_steps=3)
    assert venv.observation_shape == (3, 6, 5) and venv.observation_dtype == np.uint8
    assert venv.num_actions == 3
    obs = venv.reset()
    np.testing.assert_array_equal(obs[0, 2, :, 0], np.arange(6))  # HWC -> CHW
    for t in range(1, 4):
        obs, r, d, info = venv.step(np.array([0, 2]))
        np.testing.assert_array_equal(r, [1.0, 3.0])                # Discrete(start=1) offset
        assert [e.last_action for e in venv.envs] == [1, 3]
        assert d.all() == (t == 3)
    assert (obs[:, 0] == 0).all()                                     # fresh first obs at done
    np.testing.assert_array_equal(info["episode_return"], [3.0, 9.0])
    np.testing.assert_array_equal(info["episode_length"], [3, 3])


def test_gym_desync_spreads_the_first_episode_ends():
    venv = make_vec_env(f"gym:{__name__}:TinyImageEnv", 32, 0, episode_steps=7)
    with pytest.raises(RuntimeError, match="reset"):
        venv.desync(np.random.default_rng(0))
    venv.reset()
    obs = venv.desync(np.random.default_rng(1))
    assert sorted(set(obs[:, 0, 0, 0])) == list(range(7))  # every step of the 7-step course is taken
    ends = []
    for step in range(14):
        _, _, done, info = venv.step(np.zeros(32, dtype=np.int64))
        ends += [step] * int(done[info["episode_length"] < 7].sum())  # cut-short first episodes
    assert len(set(ends)) == 6 and (info["episode_length"][done] == 7).all()
    box = make_vec_env(f"gymc:{__name__}:TinyBoxActionEnv", 2, 0)
    box.reset()
    assert box.desync(np.random.default_rng(0)) is None  # continuous actions (PPO): left in step


def test_gym_module_id_form_and_truncation():
    venv = make_vec_env("gymnasium.envs.classic_control:CartPole-v1", 2, 0, max_episode_steps=5)
    venv.reset()
    for _ in range(5):
        obs, r, d, info = venv.step(np.array([0, 1]))
        if d.any():
            break
    # CartPole cannot fall within 5 steps from its start state: the time limit ends it
    assert d.all() and info["truncated"].all()
    np.testing.assert_array_equal(info["episode_length"], [5, 5])
    assert (np.abs(obs) <= 0.05).all()                                # fresh CartPole start state


def test_gym_module_of_the_working_directory_imports_from_the_console_script(tmp_path, monkeypatch):
    """The ``r2ac`` console script's sys.path holds its bin directory, not the working directory: a user's
    module there still imports (as under ``python -m``); one that is nowhere is refused, naming the fix."""
    import sys

    from r2ac.envs.gym_env import resolve_gym_factory

    (tmp_path / "my_task_here.py").write_text(
        "import gymnasium\n"
        "class Blink(gymnasium.Env):\n"
        "    observation_space = gymnasium.spaces.Box(0, 1, (2,))\n"
        "    action_space = gymnasium.spaces.Discrete(2)\n"
        "    def reset(self, *, seed=None, options=None):\n"
        "        return self.observation_space.low, {}\n"
        "    def step(self, action):\n"
        "        return self.observation_space.low, 1.0, True, False, {}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "my_task_here", raising=False)
    assert resolve_gym_factory("my_task_here:Blink").__name__ == "Blink"
    venv = make_vec_env("gym:my_task_here:Blink", 2, 0)
    venv.reset()
    assert list(venv.step(np.array([0, 1]))[1]) == [1.0, 1.0]
    with pytest.raises(ValueError, match="cannot import module 'not_here_either'.*PYTHONPATH"):
        resolve_gym_factory("not_here_either:Env")


def test_gym_continuous_actions_rejected():
    with pytest.raises(ValueError, match="discrete"):
        make_vec_env("gym:Pendulum-v1", 2, 0)
    with pytest.raises(ValueError, match="discrete"):
        make_vec_env(f"{__name__}:TinyBoxActionEnv", 1, 0)
    with pytest.raises(ValueError, match="rejected options"):
        make_vec_env("gym:CartPole-v1", 1, 0, no_such_kwarg=1)


# --------------------------------------------------------------------------------------------------
# bench
# --------------------------------------------------------------------------------------------------


def test_bench_table_and_csv(tmp_path, monkeypatch, capsys):
    import csv
    import sys

    from r2ac.bench import envs as bench

    monkeypatch.setitem(sys.modules, "deepmind_lab", None)
    assert bench.parse_env_arg("tmaze,corridor_length=40,auto_advance=False") == (
        "tmaze", {"corridor_length": 40, "auto_advance": False})
    out = tmp_path / "envs.csv"
    assert bench.main(["--envs", "tmaze,corridor_length=5", "watermaze", "dmlab:rooms_watermaze",
                       "--num-envs", "4", "--seconds", "0.05", "--repeats", "2", "--csv", str(out)]) == 0
    table = capsys.readouterr().out
    assert "tmaze" in table and "steps/s" in table and "skipped: deepmind_lab" in table
    rows = list(csv.DictReader(out.open()))
    assert [r["env"] for r in rows] == ["tmaze", "watermaze", "dmlab:rooms_watermaze"]
    assert rows[0]["options"] == "corridor_length=5" and int(rows[0]["steps_per_s"]) > 1000
    assert rows[2]["status"].startswith("skipped") and rows[2]["steps_per_s"] == ""
