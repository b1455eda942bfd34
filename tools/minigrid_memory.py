"""Does a trained agent look at MiniGrid Memory's cue, and does it use what it saw? For runs of
``r2ac bench memory --tasks minigrid:Memory...`` (docs/results.md, "MiniGrid's Memory tasks").

    python tools/minigrid_memory.py RUN_DIR [RUN_DIR ...] [--episodes N] [--seed S] [--random] [--out CSV]

The cue of a Memory task is the object in the start room (at x = 1, beside the corridor), and the agent
starts facing away from it, so it sees it only if it turns to look. For each run, its newest checkpoint
plays ``--episodes`` episodes on fresh envs with sampled actions (as in training); ``--random`` adds a row
for uniform random actions on the first run's task. An episode counts as *cue seen* if, at any step before
its last action, the cue's cell was in the agent's view and not hidden behind a wall (MiniGrid's
``agent_sees``). The table gives the share of episodes that saw the cue, the share that reached one of the
two objects (an end at an object rather than at ``max_steps``), the share whose first view already held the
cue (``cue_at_start``: seen without a turn), and the share of those ends that picked
the matching object, apart for episodes that had seen the cue and for those that had not. An agent that
uses its memory picks right more often after seeing the cue than without it (0.5: chance).

The last two columns ask whether the memory holds the cue at all: a linear probe (ridge least squares on
the standardised core state, 2-fold cross-validated, ``probe_accuracy``) reads the cue's kind (key or ball)
off the core's hidden state after the episode's last observation, apart for episodes that saw the cue and
for those that did not (0.5: not decodable; near 1 where seen and 0.5 where not: the memory stores it).
For an eLSTM core two more columns say how hard the views drive its gates (``gate_drive``): the median over
units of the median |F x| (keep gate) and |O x| (output gate) over the views played, x the view as it enters
the core (times ``model.input_scale``). A sigmoid's slope at 8 is 3e-4: a gate driven that hard is shut or
open whatever the view (docs/results.md, "Wide inputs scaled").
"""

from __future__ import annotations

import numpy as np
import torch

from r2ac.api import load
from r2ac.bench.common import labelled_runs, parse_played_runs, played_runs_parser, report_table
from r2ac.envs import make_vec_env

COLUMNS = ("run", "episodes", "cue_seen", "cue_at_start", "reached_end", "right_if_seen", "right_if_not_seen", "right",
           "mean_length", "cue_in_state_if_seen", "cue_in_state_if_not_seen", "keep_gate_drive", "output_gate_drive")
DRIVE_FRAMES = 4000  # views kept for gate_drive
PROBE_MIN = 20  # fewest episodes of each group a probe is fitted on
ENVS = 16


def cue_position(env) -> tuple[int, int]:
    """The start-room object's cell of a MiniGrid Memory env (``MemoryEnv._gen_grid`` puts it at
    (1, height // 2 - 1))."""
    grid = env.unwrapped
    if not hasattr(grid, "success_pos"):
        raise SystemExit(f"minigrid_memory: {type(grid).__name__} is not a MiniGrid Memory task")
    return 1, grid.height // 2 - 1


def cue_is_key(env) -> bool:
    """Whether the start-room object (the cue) of a MiniGrid Memory env is a key (else a ball)."""
    return env.unwrapped.grid.get(*cue_position(env)).type == "key"


def probe_accuracy(features: np.ndarray, labels: np.ndarray, ridge: float = 1.0) -> float:
    """How well a linear read-out tells the two classes of ``labels`` (bool [n]) from ``features`` [n, F]:
    ridge least squares on +-1 targets over the standardised features (with a bias), fitted on one half of
    the samples (alternate ones) and scored on the other, and the other way round; the mean accuracy of the
    two folds. NaN with fewer than ``PROBE_MIN`` samples or one class only (nothing to tell apart)."""
    labels = np.asarray(labels, dtype=bool)
    if len(labels) < PROBE_MIN or labels.all() or not labels.any():
        return float("nan")
    x = np.asarray(features, dtype=np.float64)
    x = (x - x.mean(0)) / (x.std(0) + 1e-8)
    x = np.concatenate([x, np.ones((len(x), 1))], 1)
    t = np.where(labels, 1.0, -1.0)
    folds = np.arange(len(x)) % 2
    right = 0
    for k in (0, 1):
        fit, test = folds != k, folds == k
        w = np.linalg.solve(x[fit].T @ x[fit] + ridge * np.eye(x.shape[1]), x[fit].T @ t[fit])
        right += int(((x[test] @ w > 0) == labels[test]).sum())
    return right / len(x)


def play_memory(venv, act, episodes: int, memory=None) -> dict:
    """Play ``episodes`` episodes of the MiniGrid Memory vector env ``venv`` (``r2ac.envs.minigrid_env``)
    with ``act(obs, reward, done) -> actions``; the statistics of the table. ``memory()``, if given, returns
    the agent's memory after the last ``act`` ([num_envs, F]: the core's hidden state); the probe columns
    read the cue from it at each episode's last step (NaN without it)."""
    seen = np.zeros(venv.num_envs, dtype=bool)
    at_start = np.zeros(venv.num_envs, dtype=bool)
    fresh = np.ones(venv.num_envs, dtype=bool)  # the env shows its episode's first view
    key = np.zeros(venv.num_envs, dtype=bool)
    ends, states = [], []  # (cue seen, reached an object, picked the matching one, length, cue is a key)
    obs, reward, done = venv.reset(), None, None
    while len(ends) < episodes:
        for b, env in enumerate(venv.envs):
            sees = bool(env.unwrapped.agent_sees(*cue_position(env)))
            if fresh[b]:
                at_start[b], fresh[b] = sees, False
            seen[b] |= sees
            key[b] = cue_is_key(env)
        actions = act(obs, reward, done)
        held = None if memory is None else np.asarray(memory(), dtype=np.float64)
        obs, reward, done, info = venv.step(actions)
        for b in np.flatnonzero(done):
            ended_at_object = not bool(info["truncated"][b])
            ends.append((seen[b], ended_at_object, ended_at_object and reward[b] > 0, info["episode_length"][b],
                         key[b], at_start[b]))
            if held is not None:
                states.append(held[b])
            seen[b], fresh[b] = False, True
    e = np.asarray(ends[:episodes], dtype=float)
    seen_, at_end, right, length, key_, start_ = e.T

    def share(mask, of):
        return float(mask[of].mean()) if of.any() else float("nan")

    def probe(group):
        if memory is None:
            return float("nan")
        return probe_accuracy(np.asarray(states[:episodes])[group], key_[group] > 0)

    return {"episodes": episodes, "cue_seen": float(seen_.mean()), "cue_at_start": float(start_.mean()),
            "reached_end": float(at_end.mean()),
            "right_if_seen": share(right, (seen_ > 0) & (at_end > 0)),
            "right_if_not_seen": share(right, (seen_ == 0) & (at_end > 0)),
            "right": share(right, at_end > 0), "mean_length": float(length.mean()),
            "cue_in_state_if_seen": probe(seen_ > 0), "cue_in_state_if_not_seen": probe(seen_ == 0)}


@torch.no_grad()
def gate_drive(net, frames: np.ndarray) -> dict:
    """The median over units of the median over ``frames`` [n, *obs] of |F x| and |O x|, x the frames' part of
    the core input (``net.scaled_features``), for an eLSTM core (its keep-gate and output-gate weights F and
    O); NaN for other cores."""
    core = net.core
    if not (hasattr(core, "F") and hasattr(core, "O")):
        return {"keep_gate_drive": float("nan"), "output_gate_drive": float("nan")}
    x = net.scaled_features(net.features(torch.as_tensor(frames, dtype=torch.float32)))
    d = x.shape[-1]
    drive = lambda w: float((x @ w[:, :d].T).abs().median(0).values.median())  # noqa: E731
    return {"keep_gate_drive": drive(core.F.float()), "output_gate_drive": drive(core.O.float())}


def policy_row(run: str, episodes: int, seed: int) -> dict:
    policy = load(run, greedy=False, seed=seed)
    env_id = policy.config.env.id
    if not env_id.startswith("minigrid:"):
        raise SystemExit(f"minigrid_memory: {run} is a run of env {env_id!r}, not of a minigrid: task")
    venv = make_vec_env(env_id, ENVS, seed, **policy.config.env.options)
    state = policy.initial_state(ENVS)

    frames = []

    def act(obs, reward, done):
        nonlocal state
        if len(frames) * ENVS < DRIVE_FRAMES:
            frames.append(np.array(obs))
        action, state = policy.act(obs, state, reward=reward, done=done)
        return action

    hidden = list(policy.net.core.hidden_spec())

    def memory():
        return np.concatenate([state.core[k].reshape(ENVS, -1).float().cpu().numpy() for k in hidden], 1)

    try:
        row = play_memory(venv, act, episodes, memory if hidden else None)
        return {**row, **gate_drive(policy.net, np.concatenate(frames))}
    finally:
        venv.close()


def random_row(env_id: str, episodes: int, seed: int) -> dict:
    venv = make_vec_env(env_id, ENVS, seed)
    rng = np.random.default_rng(seed)
    try:
        row = play_memory(venv, lambda obs, reward, done: rng.integers(0, venv.num_actions, ENVS), episodes)
        return {**row, "keep_gate_drive": float("nan"), "output_gate_drive": float("nan")}
    finally:
        venv.close()


def main(argv: list[str] | None = None) -> int:
    switches = {"--random": "add a row for uniform random actions"}
    a = parse_played_runs(played_runs_parser(__doc__, 400, switches), argv, "minigrid_memory")
    rows = []
    for run, label in labelled_runs(a.runs):
        rows.append({"run": label, **policy_row(run, a.episodes, a.seed)})
    if a.random:
        env_id = load(a.runs[0]).config.env.id
        rows.append({"run": f"random actions ({env_id})", **random_row(env_id, a.episodes, a.seed)})
    pct = lambda x: "-" if x != x else f"{x:.2f}"  # noqa: E731
    report_table(["run", "episodes", "cue seen", "cue in the first view", "reached an object", "right if seen",
                  "right if not seen", "right", "mean length", "cue in state if seen", "cue in state if not seen",
                  "keep-gate drive", "output-gate drive"],
                 [[r["run"], str(r["episodes"]), pct(r["cue_seen"]), pct(r["cue_at_start"]), pct(r["reached_end"]),
                   pct(r["right_if_seen"]), pct(r["right_if_not_seen"]), pct(r["right"]), f"{r['mean_length']:.1f}",
                   pct(r["cue_in_state_if_seen"]), pct(r["cue_in_state_if_not_seen"]), pct(r["keep_gate_drive"]),
                   pct(r["output_gate_drive"])] for r in rows],
                 rows, COLUMNS, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
