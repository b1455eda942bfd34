"""``minigrid:<Id>``: MiniGrid tasks with one-hot views (r2ac.envs.minigrid_env)."""

import numpy as np
import pytest

pytest.importorskip("minigrid")

from r2ac.envs import make_vec_env, parse_env_id  # noqa: E402
from r2ac.envs.minigrid_env import OneHotView, minigrid_id, minigrid_max_steps, use_fast_view  # noqa: E402

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
    assert minigrid_max_steps("MemoryS7", fast_view=False, max_steps=50) == 50
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


@pytest.mark.parametrize("task,options", [("MemoryS7", {}), ("MemoryS13Random", {}), ("DoorKey-6x6", {}),
                                          ("KeyCorridorS3R2", {}), ("ObstructedMaze-1Dlhb", {}),
                                          ("MemoryS11", {"agent_view_size": 5}),
                                          ("DoorKey-6x6", {"see_through_walls": True})])
def test_fast_view_is_minigrids_own_bit_for_bit(task, options):
    """``fast_view`` (the default) makes each view from cell ids; on random walks it equals MiniGrid's
    gen_obs at every step: occlusion by walls and closed doors, a carried key or ball, views off the grid."""
    import gymnasium

    own, fast = (gymnasium.make(minigrid_id(task), **options) for _ in range(2))
    assert use_fast_view(fast) and fast.unwrapped.gen_obs is not own.unwrapped.gen_obs
    rng = np.random.default_rng(0)
    steps = carried = hidden = 0
    for episode in range(12):
        a, _ = own.reset(seed=episode)
        b, _ = fast.reset(seed=episode)
        for _ in range(150):
            np.testing.assert_array_equal(b["image"], a["image"])
            assert b["image"].dtype == np.uint8 and b["direction"] == a["direction"]
            assert b["mission"] == a["mission"]
            steps += 1
            carried += own.unwrapped.carrying is not None
            hidden += int((a["image"][:, :, 0] == 0).any())  # an unseen cell
            action = int(rng.choice([0, 1, 2, 2, 2, 3, 5]))  # turns, forward, pick up, toggle
            a, ra, ta, ca, _ = own.step(action)
            b, rb, tb, cb, _ = fast.step(action)
            assert (ra, ta, ca) == (rb, tb, cb)
            if ta or ca:
                break
    assert steps > 250 and (hidden > 0) != bool(options.get("see_through_walls"))
    if task.startswith(("DoorKey", "KeyCorridor", "Obstructed")):
        assert carried > 0, "the walks should pick something up"


def test_visibility_is_minigrids_on_random_walls():
    """The bit-mask occlusion (``_visible``) against MiniGrid's ``Grid.process_vis`` on 600 random patterns of
    walls, views of 3, 5, 7 and 9 cells."""
    from minigrid.core.grid import Grid
    from minigrid.core.world_object import Wall

    from r2ac.envs.minigrid_env import _visible

    rng = np.random.default_rng(0)
    for k in range(600):
        size = (3, 5, 7, 9)[k % 4]
        opaque = rng.random((size, size)) < rng.uniform(0.05, 0.6)
        grid = Grid(size, size)
        for i, j in zip(*np.nonzero(opaque)):
            grid.set(int(i), int(j), Wall())
        agent = (size // 2, size - 1)
        np.testing.assert_array_equal(_visible(opaque, agent), grid.process_vis(agent))


def test_fast_view_option_and_tasks_that_make_their_own_views():
    import gymnasium
    from minigrid.envs import MemoryEnv

    env = make_vec_env("minigrid:MemoryS7", num_envs=1, seed=0, fast_view=False)
    assert env.envs[0].unwrapped.gen_obs.__func__ is MemoryEnv.gen_obs  # MiniGrid's own
    env.close()
    with pytest.raises(ValueError, match="fast_view takes true or false, got 'yes'"):
        make_vec_env("minigrid:MemoryS7", num_envs=1, seed=0, fast_view="yes")

    class OwnViews(MemoryEnv):
        def gen_obs(self):
            return super().gen_obs()

    env = OwnViews(size=7)
    assert not use_fast_view(env) and env.gen_obs.__func__ is OwnViews.gen_obs
    assert not use_fast_view(gymnasium.make("CartPole-v1"))


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
