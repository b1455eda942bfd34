"""r2ac.envs.continuous: Box actions (clip + scale), MuJoCo-P / MuJoCo-V masks checked against the
simulator's qpos/qvel, POPGym observation/action shapes, final observations at time limits."""

import gymnasium
import numpy as np
import pytest

from r2ac.envs import make_vec_env, parse_env_id
from r2ac.envs.continuous import mujoco_layout, popgym_names
from r2ac.envs import needs_prev_action

QPOS_FAMILY = {"HalfCheetah-v5": 1, "Hopper-v5": 1, "Walker2d-v5": 1, "Ant-v5": 2, "Swimmer-v5": 2,
               "Humanoid-v5": 2, "InvertedPendulum-v5": 0}
CLIPPED_QVEL = ("Hopper-v5", "Walker2d-v5", "InvertedDoublePendulum-v5")


def _expected(env_id, env):
    """(positions, velocities) the observation should hold, computed from the simulator state."""
    base = env.unwrapped
    qpos, qvel = base.data.qpos.copy(), base.data.qvel.copy()
    vel = np.clip(qvel, -10, 10) if env_id in CLIPPED_QVEL else qvel
    if env_id in QPOS_FAMILY:
        return qpos[QPOS_FAMILY[env_id]:], vel
    if env_id == "InvertedDoublePendulum-v5":
        return np.concatenate([qpos[:1], np.sin(qpos[1:]), np.cos(qpos[1:])]), vel
    if env_id == "Reacher-v5":
        tip = (base.get_body_com("fingertip") - base.get_body_com("target"))[:2]
        return np.concatenate([np.cos(qpos[:2]), np.sin(qpos[:2]), qpos[2:4], tip]), qvel[:2]
    if env_id == "Pusher-v5":
        coms = [base.get_body_com(n) for n in ("tips_arm", "object", "goal")]
        return np.concatenate([qpos[:7], *coms]), qvel[:7]
    raise KeyError(env_id)


@pytest.mark.parametrize("env_id", list(QPOS_FAMILY) + ["InvertedDoublePendulum-v5", "Reacher-v5", "Pusher-v5"])
def test_mujoco_position_velocity_indices_match_the_simulator(env_id):
    env = gymnasium.make(env_id)
    layout = mujoco_layout(env)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(3):
        obs, *_ = env.step(rng.uniform(env.action_space.low, env.action_space.high).astype(np.float32))
    pos, vel = _expected(env_id, env)
    np.testing.assert_allclose(obs[layout["position"]], pos, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(obs[layout["velocity"]], vel, rtol=1e-6, atol=1e-8)
    assert sorted(layout["position"] + layout["velocity"] + layout["other"]) == list(range(obs.shape[0]))
    env.close()


def test_mujoco_layout_follows_the_exclude_positions_option():
    env = gymnasium.make("HalfCheetah-v5", exclude_current_positions_from_observation=False)
    lay = mujoco_layout(env)
    assert lay["position"] == list(range(9)) and lay["velocity"] == list(range(9, 18))
    env.close()


@pytest.mark.parametrize("name,n_pos,n_vel", [("HalfCheetah-v5", 8, 9), ("Hopper-v5", 5, 6), ("Ant-v5", 13, 14)])
def test_masked_mujoco_vec_envs_keep_the_right_entries(name, n_pos, n_vel):
    full, p, v = (make_vec_env(f"{k}:{name}", 2, 3) for k in ("mujoco", "mujoco-p", "mujoco-v"))
    assert p.observation_shape == (n_pos,) and v.observation_shape == (n_vel,)
    assert p.action_kind == "continuous" and p.num_actions == 0 and p.action_dim == full.action_dim
    o_full, o_p, o_v = full.reset(), p.reset(), v.reset()
    np.testing.assert_array_equal(o_p, o_full[:, :n_pos])
    np.testing.assert_array_equal(o_v, o_full[:, n_pos:n_pos + n_vel])
    a = np.random.default_rng(0).uniform(-1, 1, (2, full.action_dim))
    o_full, *_ = full.step(a)
    o_p, *_ = p.step(a)
    np.testing.assert_array_equal(o_p, o_full[:, :n_pos])
    for e in (full, p, v):
        e.close()


class RecordBoxEnv(gymnasium.Env):
    """Records the action it receives; Box actions with asymmetric bounds."""

    observation_space = gymnasium.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gymnasium.spaces.Box(np.array([0.0, -2.0], np.float32), np.array([10.0, 2.0], np.float32))

    def __init__(self, episode_steps=3):
        self.episode_steps, self.t, self.last = episode_steps, 0, None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.last = np.array(action)
        self.t += 1
        return np.full(2, self.t, np.float32), 0.0, False, self.t >= self.episode_steps, {}


def test_box_actions_are_clipped_to_unit_range_and_scaled_to_the_bounds():
    venv = make_vec_env(f"gymc:{__name__}:RecordBoxEnv", 3, 0)
    assert venv.action_kind == "continuous" and venv.action_dim == 2 and venv.num_actions == 0
    venv.reset()
    obs, r, d, info = venv.step(np.array([[-1.0, 1.0], [0.0, 0.0], [3.0, -7.0]]))
    got = np.stack([e.last for e in venv.envs])
    np.testing.assert_allclose(got, [[0.0, 2.0], [5.0, 0.0], [10.0, -2.0]])
    assert got.dtype == np.float32
    with pytest.raises(ValueError, match=r"shape \(3, 2\)"):
        venv.step(np.zeros((3, 1)))
    venv.close()


def test_final_observation_at_a_time_limit():
    venv = make_vec_env(f"gymc:{__name__}:RecordBoxEnv", 2, 0)
    venv.reset()
    for t in range(1, 4):
        obs, r, d, info = venv.step(np.zeros((2, 2)))
        assert (d.all() and info["truncated"].all()) == (t == 3)
    np.testing.assert_array_equal(info["final_observation"], np.full((2, 2), 3.0))  # last obs of the episode
    np.testing.assert_array_equal(obs, np.zeros((2, 2)))                             # first obs of the next
    venv.close()
    venv = make_vec_env("gymc:Pendulum-v1", 2, 0, max_episode_steps=2)
    venv.reset()
    venv.step(np.zeros((2, 1)))
    obs, r, d, info = venv.step(np.zeros((2, 1)))
    assert d.all() and info["truncated"].all()
    f = info["final_observation"]
    np.testing.assert_allclose(f[:, 0] ** 2 + f[:, 1] ** 2, 1.0, rtol=1e-5)  # cos^2 + sin^2 of the angle
    venv.close()


def test_plain_gym_ids_still_reject_box_actions_with_a_hint():
    with pytest.raises(ValueError, match="discrete.*gymc:"):
        make_vec_env("gym:Pendulum-v1", 2, 0)


def test_ids():
    assert parse_env_id("mujoco-p:HalfCheetah-v5") == ("mujoco-p", "HalfCheetah-v5")
    assert parse_env_id("mujoco-v:Hopper-v5") == ("mujoco-v", "Hopper-v5")
    assert parse_env_id("popgym:RepeatPreviousEasy") == ("popgym", "RepeatPreviousEasy")
    assert parse_env_id("gymc:Pendulum-v1") == ("gymc", "Pendulum-v1")
    with pytest.raises(ValueError, match="unknown POPGym task 'Nope'.*RepeatPreviousEasy"):
        make_vec_env("popgym:Nope", 1, 0)
    with pytest.raises(ValueError, match="not a MuJoCo env"):
        make_vec_env("mujoco-p:CartPole-v1", 1, 0)


@pytest.mark.parametrize("name,obs_dim,kind,n", [
    ("RepeatPreviousEasy", 4, "discrete", 4),       # a suit, one-hot; answer a suit
    ("RepeatFirstEasy", 4, "discrete", 4),
    ("CountRecallEasy", 4, "discrete", 27),         # MultiDiscrete([2, 2]) one-hots; a count
    ("BattleshipEasy", 2, "discrete", 64),          # MultiDiscrete([8, 8]) actions -> 64
    ("PositionOnlyPendulumEasy", 2, "continuous", 1),
])
def test_popgym_shapes(name, obs_dim, kind, n):
    assert name in popgym_names()
    venv = make_vec_env(f"popgym:{name}", 3, 0)
    assert venv.observation_shape == (obs_dim,) and venv.action_kind == kind
    assert (venv.num_actions if kind == "discrete" else venv.action_dim) == n
    obs = venv.reset()
    assert obs.shape == (3, obs_dim) and obs.dtype == np.float32
    if kind == "discrete" and name != "BattleshipEasy":
        assert set(np.unique(obs)) <= {0.0, 1.0}
    a = np.zeros((3, 1)) if kind == "continuous" else np.full(3, n - 1)
    obs, r, d, info = venv.step(a)
    assert obs.shape == (3, obs_dim) and r.dtype == np.float32
    venv.close()


def test_needs_prev_action_reads_the_task_declaration():
    """POPGym's own flag: the tasks whose observation says what an action revealed, not which action."""
    flagged = {n for n in popgym_names() if needs_prev_action(f"popgym:{n}")}
    for level in ("Easy", "Medium", "Hard"):
        assert {f"MultiarmedBandit{level}", f"Concentration{level}", f"Battleship{level}",
                f"MineSweeper{level}"} <= flagged
        for name in ("RepeatPrevious", "RepeatFirst", "CountRecall", "Autoencode", "HigherLower",
                     "PositionOnlyCartPole"):
            assert f"{name}{level}" not in flagged
    for env_id in ("tmaze", "cue", "copy", "minigrid:MemoryS7", "atari:Breakout", "gym:CartPole-v1"):
        assert not needs_prev_action(env_id)
    with pytest.raises(ValueError, match="unknown POPGym task"):
        needs_prev_action("popgym:Nope")


def test_popgym_multidiscrete_action_is_unravelled():
    venv = make_vec_env("popgym:BattleshipEasy", 1, 0)
    venv.reset()
    seen = []
    env = venv.envs[0].unwrapped
    orig = env.step
    env.step = lambda a: (seen.append(np.array(a)), orig(a))[1]
    venv.envs[0].step = env.step
    venv.step(np.array([8 * 3 + 5]))
    np.testing.assert_array_equal(seen[0], [3, 5])
    venv.close()


def test_popgym_repeat_previous_episode_return_is_bounded():
    venv = make_vec_env("popgym:RepeatPreviousEasy", 2, 0)
    venv.reset()
    rets = []
    for _ in range(60):
        _, _, d, info = venv.step(np.zeros(2, dtype=np.int64))
        rets += list(info["episode_return"][d])
    assert rets and all(-1.0 - 1e-6 <= x <= 1.0 + 1e-6 for x in rets)
    venv.close()
