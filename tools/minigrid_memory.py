"""Does a trained agent look at MiniGrid Memory's cue, and does it use what it saw? For runs of
``r2ac bench memory --tasks minigrid:Memory...`` (docs/results.md, "MiniGrid's Memory tasks").

    python tools/minigrid_memory.py RUN_DIR [RUN_DIR ...] [--episodes N] [--seed S] [--random] [--out CSV]

The cue of a Memory task is the object in the start room (at x = 1, beside the corridor), and the agent
starts facing away from it, so it sees it only if it turns to look. For each run, its newest checkpoint
plays ``--episodes`` episodes on fresh envs with sampled actions (as in training); ``--random`` adds a row
for uniform random actions on the first run's task. An episode counts as *cue seen* if, at any step before
its last action, the cue's cell was in the agent's view and not hidden behind a wall (MiniGrid's
``agent_sees``). The table gives the share of episodes that saw the cue, the share that reached one of the
two objects (an end at an object rather than at ``max_steps``), and the share of those ends that picked
the matching object, apart for episodes that had seen the cue and for those that had not. An agent that
uses its memory picks right more often after seeing the cue than without it (0.5: chance).
"""

from __future__ import annotations

import numpy as np

from r2ac.api import load
from r2ac.bench.common import one_torch_thread, parse_played_runs, played_runs_parser, report_table, run_labels
from r2ac.envs import make_vec_env

COLUMNS = ("run", "episodes", "cue_seen", "reached_end", "right_if_seen", "right_if_not_seen", "right",
           "mean_length")
ENVS = 16


def cue_position(env) -> tuple[int, int]:
    """The start-room object's cell of a MiniGrid Memory env (``MemoryEnv._gen_grid`` puts it at
    (1, height // 2 - 1))."""
    grid = env.unwrapped
    if not hasattr(grid, "success_pos"):
        raise SystemExit(f"minigrid_memory: {type(grid).__name__} is not a MiniGrid Memory task")
    return 1, grid.height // 2 - 1


def play_memory(venv, act, episodes: int) -> dict:
    """Play ``episodes`` episodes of the MiniGrid Memory vector env ``venv`` (``r2ac.envs.minigrid_env``)
    with ``act(obs, reward, done) -> actions``; the statistics of the table."""
    seen = np.zeros(venv.num_envs, dtype=bool)
    ends = []  # (cue seen, reached an object, picked the matching one, length)
    obs, reward, done = venv.reset(), None, None
    while len(ends) < episodes:
        for b, env in enumerate(venv.envs):
            seen[b] |= bool(env.unwrapped.agent_sees(*cue_position(env)))
        actions = act(obs, reward, done)
        obs, reward, done, info = venv.step(actions)
        for b in np.flatnonzero(done):
            ended_at_object = not bool(info["truncated"][b])
            ends.append((seen[b], ended_at_object, ended_at_object and reward[b] > 0, info["episode_length"][b]))
            seen[b] = False
    e = np.asarray(ends[:episodes], dtype=float)
    seen_, at_end, right, length = e.T

    def share(mask, of):
        return float(mask[of].mean()) if of.any() else float("nan")

    return {"episodes": episodes, "cue_seen": float(seen_.mean()), "reached_end": float(at_end.mean()),
            "right_if_seen": share(right, (seen_ > 0) & (at_end > 0)),
            "right_if_not_seen": share(right, (seen_ == 0) & (at_end > 0)),
            "right": share(right, at_end > 0), "mean_length": float(length.mean())}


def policy_row(run: str, episodes: int, seed: int) -> dict:
    policy = load(run, greedy=False, seed=seed)
    env_id = policy.config.env.id
    if not env_id.startswith("minigrid:"):
        raise SystemExit(f"minigrid_memory: {run} is a run of env {env_id!r}, not of a minigrid: task")
    venv = make_vec_env(env_id, ENVS, seed, **policy.config.env.options)
    state = policy.initial_state(ENVS)

    def act(obs, reward, done):
        nonlocal state
        action, state = policy.act(obs, state, reward=reward, done=done)
        return action

    try:
        return play_memory(venv, act, episodes)
    finally:
        venv.close()


def random_row(env_id: str, episodes: int, seed: int) -> dict:
    venv = make_vec_env(env_id, ENVS, seed)
    rng = np.random.default_rng(seed)
    try:
        return play_memory(venv, lambda obs, reward, done: rng.integers(0, venv.num_actions, ENVS), episodes)
    finally:
        venv.close()


def main(argv: list[str] | None = None) -> int:
    p = played_runs_parser(__doc__, episodes=400)
    p.add_argument("--random", action="store_true", help="add a row for uniform random actions")
    a = parse_played_runs(p, argv, "minigrid_memory")
    rows = []
    with one_torch_thread():
        for run, label in zip(a.runs, run_labels(a.runs)):
            rows.append({"run": label, **policy_row(run, a.episodes, a.seed)})
        if a.random:
            env_id = load(a.runs[0]).config.env.id
            rows.append({"run": f"random actions ({env_id})", **random_row(env_id, a.episodes, a.seed)})
    pct = lambda x: "-" if x != x else f"{x:.2f}"  # noqa: E731
    report_table(["run", "episodes", "cue seen", "reached an object", "right if seen", "right if not seen",
                  "right", "mean length"],
                 [[r["run"], str(r["episodes"]), pct(r["cue_seen"]), pct(r["reached_end"]), pct(r["right_if_seen"]),
                   pct(r["right_if_not_seen"]), pct(r["right"]), f"{r['mean_length']:.1f}"] for r in rows],
                 rows, COLUMNS, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
