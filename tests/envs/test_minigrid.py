"""``minigrid:<Id>``: MiniGrid tasks with one-hot views (r2ac.envs.minigrid_env)."""

import numpy as np
import pytest

pytest.importorskip("minigrid")

from r2ac.envs import make_vec_env, parse_env_id  # noqa: E402
from r2ac.envs.minigrid_env import OneHotView, minigrid_id, minigrid_max_steps  # noqa: E402

FORWARD, LEFT = 2, 0
DIRECTION_VECTORS = {0: (1, 0), 1: (0, 1), 2: (-1, 0), 3: (0, -1)}


def decode(vector: np.ndarray, view: OneHotView) -> tuple[np.ndarray, int]:
    """The one-hot vector back to (cells x 3 ids, direction)."""
    cells = vector[:view.cells * view.per_cell].reshape(view.cells, view.per_cell)
    ids = np.stack([cells[:, o:o + n].argmax(1) for o, n in zip(view.offsets, view.sizes)], 1)
    return ids, int(vector[view.cells * view.per_cell:].argmax())


def test_ids_short_and_full_and_unknown():
    assert parse_env_id("minigrid:MemoryS7") == ("minigrid", "MemoryS7")
    assert minigrid_id("MemoryS7") == "MiniGrid-MemoryS7-v0"
    assert minigrid_id("memorys13random") == "MiniGrid-MemoryS13Random-v0"
    assert minigrid_id("MiniGrid-MemoryS17Random-v0") == "MiniGrid-MemoryS17Random-v0"
    assert minigrid_max_steps("MemoryS13Random") == 5 * 13 ** 2
    with pytest.raises(ValueError, match="unknown MiniGrid task 'NoSuchTask'.*MiniGrid-MemoryS7-v0"):
        minigrid_id("NoSuchTask")


def test_one_hot_view_is_the_observation_re_coded():
    env = make_vec_env("minigrid:MemoryS7", num_envs=2, seed=3)
    obs = env.reset()
    view = env.envs[0]
    assert isinstance(view, OneHotView)
    assert env.observation_shape == (7 * 7 * 20 + 4,) and obs.dtype == np.float32
    rng = np.random.default_rng(0)
    for _ in range(30):
        raw = view.unwrapped.gen_obs()  # what MiniGrid itself observes now, for env 0
        ids, direction = decode(obs[0], view)
        np.testing.assert_array_equal(ids, raw["image"].reshape(-1, 3))
        assert direction == raw["direction"]
        # every cell: exactly one object, one colour and one state; one direction
        assert set(np.unique(obs)) <= {0.0, 1.0} and obs.sum(1).tolist() == [7 * 7 * 3 + 1] * 2
        obs, _, _, _ = env.step(rng.integers(0, 7, size=2))
    env.close()


def test_seeded_runs_repeat():
    def rollout(seed):
        env = make_vec_env("minigrid:MemoryS7", num_envs=3, seed=seed)
        out = [env.reset()]
        rng = np.random.default_rng(1)
        for _ in range(300):
            obs, reward, done, _ = env.step(rng.integers(0, 7, size=3))
            out += [obs, reward, done]
        env.close()
        return out

    a, b, c = rollout(5), rollout(5), rollout(6)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_cut_episode_reports_its_final_view():
    env = make_vec_env("minigrid:MemoryS7", num_envs=1, seed=0)
    env.reset()
    limit = minigrid_max_steps("MemoryS7")
    for t in range(limit):  # turning in place never reaches an object: cut at max_steps
        obs, reward, done, info = env.step(np.array([LEFT]))
        assert reward[0] == 0.0
        assert bool(done[0]) == (t == limit - 1)
    assert info["truncated"][0] and info["episode_length"][0] == limit
    assert info["final_observation"][0].sum() == 7 * 7 * 3 + 1
    env.close()


@pytest.mark.parametrize("right", [True, False])
def test_matching_object_pays_and_the_other_ends_with_nothing(right):
    env = make_vec_env("minigrid:MemoryS7", num_envs=1, seed=2)
    env.reset()
    grid = env.envs[0].unwrapped
    target = grid.success_pos if right else grid.failure_pos
    for direction, (dx, dy) in DIRECTION_VECTORS.items():  # stand next to the target, facing it
        here = (target[0] - dx, target[1] - dy)
        if grid.grid.get(*here) is None:
            grid.agent_pos, grid.agent_dir = np.array(here), direction
            break
    _, reward, done, info = env.step(np.array([FORWARD]))
    assert done[0] and not info["truncated"][0]
    if right:
        assert reward[0] == pytest.approx(1 - 0.9 * 1 / minigrid_max_steps("MemoryS7"))
    else:
        assert reward[0] == 0.0
    env.close()
