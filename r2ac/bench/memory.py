"""``r2ac bench memory``: long-credit learning on built-in tasks at spans far beyond the segment length M.

Every run is a real training run (``runtime.kind=local``, one process, one torch thread; an override
``runtime.kind=ray runtime.num_actors=N`` runs it on a local Ray instance instead, with real policy lag) of the settings
under test (by default ``configs/quickstart.yaml``: the defaults a user's new task starts from) with only
the task swapped in and the method's overrides applied; nothing is tuned per task. Each run trains for a
wall-clock budget and is judged from its training curve:

    success      the mean training return of the last 400 episodes (``--window-episodes``; 0: of the
                 episodes ended in each of the last 3 log rows, which at long spans hold few episodes);
                 for the cue, copy, key-door and T-maze tasks it is the fraction solved (copy: bits right);
                 a ``gym:`` task whose env reports ``info["success"]`` at its episodes' ends is judged by
                 that instead (``episode_success``: its return may count rewards on the way)
    solved       first time (wall seconds, agent steps) that success >= --threshold
    held         the lowest success after solving (``no collapse`` means held >= threshold)
    settled      the lowest success after it first reached (1 + threshold) / 2 (0.95): held without the
                 first rows after crossing the threshold, while the curve is still climbing

Each run has a step budget (``--steps``, the config's ``total_steps``) and a wall-clock budget
(``--minutes``) and stops at whichever comes first; as in any run of the config, the learning rate decays
linearly to 0 at the step budget (``learner.lr_schedule``). ``--steps 0`` trains with a constant learning
rate to the wall-clock budget.

Tasks (``--tasks``; ``span`` = the steps from the information to the decision that needs it, in units of
M = 10 by default ``--spans 100,300,1000``):

    cue-pixels           delayed cue, 16x16 RGB frames, 3 cues (chance 1/3)
    cue-vector           the same with one-hot vectors
    cue-pixels-noise     pixel cue with a noise frame on half the steps between cue and query
    cue-vector-noise     vector cue with noise vectors on half the steps between cue and query
    tmaze                the built-in T-maze, corridor length = span (chance 1/2)
    watermaze            the built-in watermaze, episode length = span (return = goals found; no chance line)
    copy                 3 bits, span blank steps, then recall them (return = fraction right; chance 1/2)
    keydoor              key to door, pixel frames: a choice at step 0 (take the key: name its colour, chance
                         1/3) paid span + 1 steps later at the door; nothing is decided at the door (a credit
                         task for the value, not a recall task for the policy)
    keydoor-vector       the same with one-hot vectors
    keydoor-noise        key to door with a noise frame on half the steps between the key and the door
    keydoor-vector-noise the same with one-hot vectors and noise vectors

Held-out tasks, designed elsewhere and never used to choose a setting here: ``popgym:<Name>``, a POPGym task
by class name (Morad et al. 2023; e.g. ``popgym:RepeatFirstEasy``, ``popgym:CountRecallMedium``), and
``minigrid:<Id>``, a MiniGrid task (Chevalier-Boisvert et al. 2023; e.g. ``minigrid:MemoryS13Random``, one-hot
views, ``r2ac.envs.minigrid_env``). A task of your own runs the same way: ``gym:<module>:<Id or class>``, a
Gymnasium env (e.g. ``gym:examples.colour_patch:ColourPatch``, a user-style task in this repository; its options
as overrides, ``env.options.span=150``). Their span is fixed by the task: the bench runs each once, whatever
``--spans`` says, and its span column is the task's episode length (POPGym's ``max_episode_length`` or
``episode_length``, or one random episode's length where the task states none; MiniGrid's ``max_steps``:
the longest distance from an observation to a reward that may need it; a ``gym:`` task's registered time
limit, or one random episode's length under the env options given). Success is the
task's episode return: POPGym's in [-1, 1] (RepeatFirst: the fraction of the episode's steps answered right,
times 2, minus 1; chance -0.5 with 4 suits); MiniGrid's 1 - 0.9 x steps / max_steps where solved, 0 where
not (Memory: a quick walk to the wrong object scores 0, to the right one about 0.97); pick ``--threshold``
for the task.

Methods (``--methods``): ``rtrl`` (the config as is), ``tbptt`` (truncated at the same M), ``tbptt-full``
(M = the episode length, full BPTT where memory allows; its envs start in step, ``env.desync=false``, so each
segment is one whole episode: out of step a segment would cut every episode in two), ``feedforward``
(``model.core=none``), ``reservoir`` (the core kept as initialised, ``model.freeze_core``, and only the heads
trained, truncated at the same M: what a fixed random memory and a trained read-out of it give), ``a2c`` (the
synchronous reference learner with Adam, ``r2ac.agent.a2c``).

Writes ``<out>/memory_runs.csv`` (one row per run), ``<out>/memory.csv`` (medians over seeds),
``<out>/memory.md`` (the per-seed table of docs/results.md),
``<out>/memory.png`` (success against wall time, mean over seeds with a min-max band) and each run's
directory under ``<out>/runs``; a finished run is not run again (the command resumes a bench; a run that was
interrupted, by Ctrl-C or SIGTERM to the bench, starts over).
``--report`` trains nothing: it rebuilds the table, CSVs and plot from the finished runs of the selection
that exist under ``<out>/runs`` (e.g. after benches of different methods or seeds wrote to one ``--out``).
``--matrix DIR...`` trains nothing either: it gathers the ``memory_runs.csv`` of several benches into one
table of the suite (a row per task and span, a column per method; ``matrix.md``, ``matrix.csv`` and a heat
map ``matrix.png`` under ``--out``), each cell checked against the settings under test (``--config`` and the
overrides): its runs' saved ``config.yaml`` must train what those settings train, budgets aside; a cell
that differs is marked ``(*)`` and the keys listed under the table, one whose runs left no config ``(?)``.
``--compare LABEL=DIR[,DIR...] ...`` sets settings side by side (e.g.
the defaults against an override, each a list of bench directories) on the cells they share, in agent steps
to solve per seed (``compare.md``, ``compare.csv``, ``compare.png``), and each seed's success curve against
agent steps where its run directory is kept (``compare_curves.png``: a fall after solving shows there).
Both key a cell by task, span and method, and give a variant (env options beyond the task's, e.g.
``env.options.cues=6``: ``memory_runs.csv``'s ``options`` column) cells of its own.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import math
import multiprocessing
import os
import statistics
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from r2ac.bench.common import format_table, machine_description, write_csv
from r2ac.runtime import sigterm_as_interrupt

TASKS: Dict[str, tuple] = {
    "cue-pixels": ("cue", lambda s: {"span": s, "obs": "pixels"}, lambda s: s + 2),
    "cue-vector": ("cue", lambda s: {"span": s, "obs": "vector"}, lambda s: s + 2),
    "cue-pixels-noise": ("cue", lambda s: {"span": s, "obs": "pixels", "distractors": 0.5}, lambda s: s + 2),
    "cue-vector-noise": ("cue", lambda s: {"span": s, "obs": "vector", "distractors": 0.5}, lambda s: s + 2),
    "tmaze": ("tmaze", lambda s: {"corridor_length": s}, lambda s: s + 1),
    "watermaze": ("watermaze", lambda s: {"episode_length": s}, lambda s: s),
    "copy": ("copy", lambda s: {"span": s, "symbols": 3}, lambda s: s + 6),
    "keydoor": ("keydoor", lambda s: {"span": s, "obs": "pixels"}, lambda s: s + 2),
    "keydoor-vector": ("keydoor", lambda s: {"span": s, "obs": "vector"}, lambda s: s + 2),
    "keydoor-noise": ("keydoor", lambda s: {"span": s, "obs": "pixels", "distractors": 0.5}, lambda s: s + 2),
    "keydoor-vector-noise": ("keydoor", lambda s: {"span": s, "obs": "vector", "distractors": 0.5}, lambda s: s + 2),
}
METHODS = ("rtrl", "tbptt", "tbptt-full", "feedforward", "reservoir", "a2c")
RUN_COLUMNS = ["task", "span", "method", "seed", "status", "steps", "wall_s", "steps_per_s", "solved_s",
               "solved_steps", "best", "final", "held", "settled", "fresh", "options"]
SUMMARY_COLUMNS = ["task", "span", "method", "seeds", "solved", "median_solved_min", "max_solved_min",
                   "median_solved_Msteps", "median_best", "median_final", "min_held", "min_settled", "median_fresh"]


POPGYM_PREFIX = "popgym:"
MINIGRID_PREFIX = "minigrid:"
GYM_PREFIX = "gym:"
HELD_OUT_PREFIXES = (POPGYM_PREFIX, MINIGRID_PREFIX, GYM_PREFIX)
HELD_OUT_HELP = ("popgym:<Name> (e.g. popgym:RepeatFirstEasy), minigrid:<Id> (e.g. minigrid:MemoryS13Random) or "
                 "a Gymnasium env of your own, gym:<module>:<Id or class> (e.g. gym:examples.colour_patch:ColourPatch)")


def is_held_out(task: str) -> bool:
    return task.startswith(HELD_OUT_PREFIXES)


#: the most steps ``popgym_span`` plays to find the end of an episode of a task that states no length
POPGYM_MEASURE_LIMIT = 100_000


def _random_episode_length(env, task: str) -> int:
    """The length of one episode of ``env`` played with random actions (seed 0)."""
    env.reset(seed=0)
    env.action_space.seed(0)
    for step in range(1, POPGYM_MEASURE_LIMIT + 1):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            return step
    raise ValueError(f"{task} states no episode length and one episode with random actions did not end within "
                     f"{POPGYM_MEASURE_LIMIT} steps; the bench needs tasks whose episodes end")


def popgym_span(task: str) -> int:
    """A POPGym task's span: its episode length. Most tasks state it (``max_episode_length``, or
    ``episode_length`` as Concentration does); for one that states none (HigherLower, whose episode is a
    deck dealt to its last card) it is the length of one episode played with random actions (seed 0)."""
    from r2ac.envs.continuous import popgym_class

    env = popgym_class(task[len(POPGYM_PREFIX):])()  # raises for an unknown name, naming the known ones
    for attr in ("max_episode_length", "episode_length"):
        length = getattr(env, attr, None)
        if length:
            return int(length)
    return _random_episode_length(env, task)


def gym_span(task: str, options: Optional[Dict] = None) -> int:
    """A ``gym:`` task's span: its registered time limit (``max_episode_steps``) where it has one, else the
    length of one episode played with random actions (seed 0), with the env options the runs will get."""
    from r2ac.envs.gym_env import resolve_gym_factory

    try:
        env = resolve_gym_factory(task[len(GYM_PREFIX):])(**(options or {}))
    except TypeError as exc:
        raise ValueError(f"{task} rejected env options {sorted(options or {})}: {exc}") from exc
    try:
        spec = getattr(env, "spec", None)
        limit = getattr(spec, "max_episode_steps", None) if spec is not None else None
        return int(limit) if limit else _random_episode_length(env, task)
    finally:
        env.close()


def held_out_span(task: str, options: Optional[Dict] = None) -> int:
    """A held-out task's span, fixed by the task: a POPGym task's episode length, a MiniGrid task's
    ``max_steps`` (where its episodes are cut), a ``gym:`` task's time limit or random episode's length
    (:func:`gym_span`, with ``options``, the env options its runs get)."""
    if task.startswith(GYM_PREFIX):
        return gym_span(task, options)
    if task.startswith(MINIGRID_PREFIX):
        from r2ac.envs.minigrid_env import minigrid_max_steps

        return minigrid_max_steps(task[len(MINIGRID_PREFIX):])  # raises for an unknown id, naming the Memory ones
    return popgym_span(task)


def task_spec(task: str, span: int) -> tuple:
    """(env id, env options, episode steps) of a bench task at a span: a built-in task of ``TASKS`` or a
    held-out ``popgym:<Name>`` or ``minigrid:<Id>`` (its span is its episode length, whatever ``span``
    says), or a ``gym:`` task (its span is the one the bench measured with the runs' env options:
    :func:`gym_span`)."""
    if task.startswith(GYM_PREFIX):
        return task, {}, int(span)
    if is_held_out(task):
        return task, {}, held_out_span(task)
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)} or {HELD_OUT_HELP}")
    env_id, options, episode_steps = TASKS[task]
    return env_id, options(span), episode_steps(span)


def task_order(task: str) -> tuple:
    """Sort key: the built-in tasks in ``TASKS`` order, then the held-out ones by name."""
    known, base = list(TASKS), task.split(" [")[0]  # a variant's cell (``cell_task``) sorts after its task's
    return (known.index(base) if base in known else len(known), base, task)


def method_overrides(method: str, episode_steps: int, num_envs: int) -> List[str]:
    if method == "rtrl":
        return []
    if method == "tbptt":
        return ["model.learning=tbptt"]
    if method == "tbptt-full":
        # in step: a segment of the episode's length then holds one whole episode; out of step (env.desync) it
        # would hold the end of one and the start of the next, and the cue and its query would fall in two
        return ["model.learning=tbptt", f"learner.unroll_length={episode_steps}", "env.desync=false"]
    if method == "feedforward":
        return ["model.core=none", "model.learning=tbptt"]
    if method == "reservoir":
        return ["model.learning=tbptt", "model.freeze_core=true"]
    if method == "a2c":
        return ["algo=a2c", "learner.optimizer=adam", f"learner.batch_size={num_envs}", "runtime.num_actors=1"]
    raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")


def override_env_options(base: str, overrides: Sequence[str]) -> Dict:
    """The env options that ``overrides`` (``env.options...=``) give a bench run, whose options start empty."""
    from r2ac.config import apply_overrides, load_config

    mine = ["env.options={}"] + [o for o in overrides if o.split("=", 1)[0].split(".")[:2] == ["env", "options"]]
    return dict(apply_overrides(load_config(base), mine).env.options)


def run_config(base: str, task: str, span: int, method: str, seed: int, run_dir: str, extra: Sequence[str] = (),
               steps: Optional[int] = None):
    """The config of one bench run: ``base`` with the task swapped in and the method applied; ``steps``:
    the step budget (``total_steps``; None keeps the config's, 0 = no step budget and a constant
    learning rate)."""
    from r2ac.config import apply_overrides, load_config

    env_id, options, episode_steps = task_spec(task, span)
    cfg = load_config(base)
    opts = "{" + ", ".join(f"{k}: {v}" for k, v in options.items()) + "}"
    overrides = [f"env.id={env_id}", "env.options={}", f"env.options={opts}", f"seed={seed}", f"run_dir={run_dir}",
                 f"name={task}-{span}-{method}-s{seed}", "runtime.kind=local", "logger.progress_bar=false",
                 "logger.tensorboard=false", "logger.wandb=false", "eval.sets=0", "checkpoint.interval_s=.inf",
                 ]
    if steps == 0:
        overrides += ["total_steps=1000000000000", "learner.lr_schedule=constant"]
    elif steps is not None:
        overrides += [f"total_steps={int(steps)}"]
    overrides += method_overrides(method, episode_steps, cfg.env.num_envs) + list(extra)
    cfg = apply_overrides(cfg, overrides)
    if method == "feedforward":  # no recurrent core: of the core options (the settings' or an override's), only
        from r2ac.cores import core_options  # those of the feed-forward core ('none') apply

        cfg.model.core_options = {k: v for k, v in cfg.model.core_options.items() if k in core_options("none")}
    return cfg


def success_column(task: str) -> str:
    """The metrics.csv column a task's success is read from: a task of the user's own (``gym:``) is judged by
    ``episode_success`` (its env's ``info["success"]`` at episode ends) where its runs logged one, since its
    return may count rewards on the way; every other task by its return (``episode_return``: r2ac's recall tasks
    pay 1 for a success, and the watermaze is judged by its goals)."""
    return "episode_success" if str(task).startswith("gym:") else "episode_return"


def success_label(task: str) -> str:
    """The y label of a task's success curve: what :func:`success_column` reads."""
    return "training success (info['success'])" if success_column(task) == "episode_success" \
        else "training success (return)"


def read_success_curve(metrics_csv: str, window: int = 3, window_episodes: int = 0,
                       column: str = "episode_return"):
    """[(wall seconds since the first row, agent steps, success)]: the success of a row is the mean return
    over the last ``window`` log rows, or with ``window_episodes`` > 0 over the episodes that ended in the
    fewest last rows holding at least that many (the rows' means weighted by their episode counts; rows
    before the first full window are left out, so every point has the same statistical weight whatever the
    episode length). Metrics without episode counts fall back to ``window`` rows. ``column``: the per-row mean
    read (``episode_success``: :func:`success_column`); where the file has no value in it (an env that reports
    no success, a run logged before it existed), the return."""
    with open(metrics_csv) as f:
        table = list(csv.DictReader(f))
    def value(r):
        return r.get(column, r.get("train/" + column, ""))

    if column != "episode_return" and all(value(r) in ("", "nan", None) for r in table):
        column = "episode_return"
    rows = []
    for r in table:
        ret = value(r)
        if ret not in ("", "nan", None):
            count = r.get("episodes", r.get("train/episodes", ""))
            rows.append((float(r["wall_time"]), float(r["step"]), float(ret),
                         float(count) if count not in ("", "nan", None) else math.nan))
    if not rows:
        return []
    t0 = rows[0][0]
    out = []
    counts = [b[3] - a[3] for a, b in zip([(0, 0, 0, 0.0)] + rows, rows)]  # the column is cumulative
    by_episodes = window_episodes > 0 and not any(math.isnan(c) for c in counts)
    for i, (t, s, _, _) in enumerate(rows):
        if by_episodes:
            total = n = 0.0
            j = i
            while j >= 0 and n < window_episodes:
                total, n, j = total + rows[j][2] * counts[j], n + counts[j], j - 1
            if n >= window_episodes:
                out.append((t - t0, s, total / n))
        else:
            w = [x[2] for x in rows[max(0, i - window + 1): i + 1]]
            out.append((t - t0, s, sum(w) / len(w)))
    return out


def judge(curve, threshold: float, first: int = 2) -> Dict:
    """Solved time/steps, best and final success and the lowest success after solving; the first ``first``
    points (windows not yet full) cannot count as solved."""
    if not curve:
        return {"solved_s": math.nan, "solved_steps": math.nan, "best": math.nan, "final": math.nan, "held": math.nan,
                "settled": math.nan}
    solved = next((i for i, (_, _, v) in enumerate(curve) if v >= threshold and i >= first), None)
    high = (1.0 + threshold) / 2
    settled = next((i for i, (_, _, v) in enumerate(curve) if v >= high and i >= first), None)
    return {"solved_s": curve[solved][0] if solved is not None else math.nan,
            "solved_steps": curve[solved][1] if solved is not None else math.nan,
            "best": max(v for *_, v in curve), "final": curve[-1][2],
            "held": min(v for *_, v in curve[solved:]) if solved is not None else math.nan,
            "settled": min(v for *_, v in curve[settled:]) if settled is not None else math.nan}


def runtime_train(cfg):
    """The ``train`` function of the runtime the run's config names: the bench runs ``runtime.kind=local``
    unless an override asks for ``runtime.kind=ray`` (actors in their own processes, real policy lag); an
    ``algo: ppo`` config (``--config configs/ppo/...``) trains with the PPO runtime, in one process."""
    if cfg.algo == "ppo":
        from r2ac.runtime.ppo import train_ppo

        return train_ppo
    if cfg.runtime.kind == "ray":
        from r2ac.runtime.ray_runtime import train
    else:
        from r2ac.runtime.local import train
    return train


def run_is_done(run_dir: str) -> bool:
    """A run the bench keeps: it wrote its summary and was not interrupted (Ctrl-C, SIGTERM). An interrupted
    run stopped short of both budgets, so the next call with the same arguments starts it over."""
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            return json.load(f).get("status") != "interrupted"
    except FileNotFoundError:
        return False


def _one_run(job) -> Dict:
    base, task, span, method, seed, run_dir, minutes, extra, steps = job
    summary_path = os.path.join(run_dir, "summary.json")
    if not run_is_done(run_dir):
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)  # an unfinished run starts over: its wall-clock budget is whole
        cfg = run_config(base, task, span, method, seed, run_dir, extra, steps)
        try:
            runtime_train(cfg)(cfg, time_limit_s=minutes * 60)
        except Exception as e:  # noqa: BLE001 - one failed run must not stop the bench
            return {"task": task, "span": span, "method": method, "seed": seed, "status": f"failed: {e}"}
    with open(summary_path) as f:
        summary = json.load(f)
    return {"task": task, "span": span, "method": method, "seed": seed, "status": summary["status"],
            "steps": summary["step"], "steps_per_s": summary["steps_per_s"], "fresh": fresh_return(run_dir, task),
            "options": run_variant(run_dir, task, span) or "", "run_dir": run_dir}


FRESH_EPISODES = 3  # per env
FRESH_SEED = 12345  # plus the run's seed


def fresh_return(run_dir: str, task: str = "") -> float:
    """The final weights' mean return (for a ``gym:`` task that reports ``info["success"]``, its mean success:
    :func:`success_column`) on episodes of fresh envs (each env's first ``FRESH_EPISODES``, sampled
    actions, eval seed ``FRESH_SEED`` plus the run's seed, so that the seeds of a cell are judged on
    independent episodes and draws; ``fresh.json`` in the run directory, computed once, keeps the seed; runs
    judged before this change, 2026-11-29, all used 12345, and runs at chance shared one draw's luck). The
    training success is a rolling mean over consecutive episodes; this one starts from nothing, so a policy
    that only works in a chain of episodes (e.g. one that stores the cue only when the previous episode paid,
    through the reward input) shows here. NaN for a run without a checkpoint."""
    path = os.path.join(run_dir, "fresh.json")
    if not os.path.exists(path):
        from r2ac.checkpoint import latest_checkpoint
        from r2ac.config import load_config
        from r2ac.evaluation import evaluate_run
        from r2ac.fileio import atomic_write_text

        if latest_checkpoint(run_dir) is None:
            return math.nan
        cfg = load_config(os.path.join(run_dir, "config.yaml"))
        num_envs = cfg.env.num_envs
        seed = FRESH_SEED + int(cfg.seed)
        result = evaluate_run(run_dir, sets=1, episodes=FRESH_EPISODES * num_envs, seed=seed, greedy=False,
                              num_envs=num_envs, video=False, log=False)
        fresh = {"mean": result["mean"], "episodes": result["episodes"], "step": result["step"], "seed": seed}
        success = result.get("episode_info", {}).get("success", {})
        if success.get("count"):
            fresh["success"] = success["mean"]  # the env's info["success"] over the episodes that reported it
        atomic_write_text(path, json.dumps(fresh))
    with open(path) as f:
        fresh = json.load(f)
    if success_column(task) == "episode_success" and "success" in fresh:
        return float(fresh["success"])
    return float(fresh["mean"])


def summarize(runs: List[Dict], threshold: float) -> List[Dict]:
    groups: Dict[tuple, List[Dict]] = {}
    for r in runs:
        groups.setdefault((r["task"], r["span"], r["method"]), []).append(r)
    out = []

    def med(k, rows):
        return statistics.median(r[k] for r in rows) if rows else math.nan

    for (task, span, method), rs in groups.items():
        solved = [r for r in rs if not math.isnan(r.get("solved_s", math.nan))]
        ok = [r for r in rs if not math.isnan(r.get("best", math.nan))]
        out.append({"task": task, "span": span, "method": method, "seeds": len(rs),
                    "solved": f"{len(solved)}/{len(rs)}",
                    "median_solved_min": med("solved_s", solved) / 60 if solved else math.nan,
                    "max_solved_min": max(r["solved_s"] for r in solved) / 60 if solved else math.nan,
                    "median_solved_Msteps": med("solved_steps", solved) / 1e6 if solved else math.nan,
                    "median_best": med("best", ok), "median_final": med("final", ok),
                    "min_held": min(r["held"] for r in solved) if solved else math.nan,
                    "min_settled": min((r["settled"] for r in solved if not math.isnan(r.get("settled", math.nan))),
                                       default=math.nan),
                    "median_fresh": med("fresh", [r for r in rs if not math.isnan(r.get("fresh", math.nan))])})
    return out


def markdown_table(runs: List[Dict]) -> str:
    """One row per (task, span, method) with the per-seed numbers, as docs/results.md shows them."""
    def fmt(v, scale=1.0):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v / scale:.2f}"

    head = ("| task | span | method | seeds solved | minutes to 0.9, per seed | M steps to 0.9, per seed | "
            "final success, per seed | fresh envs, per seed | lowest after solving | lowest after 0.95 | steps/s |")
    lines = [head, "| " + " | ".join(["---"] * 11) + " |"]
    groups: Dict[tuple, List[Dict]] = {}
    for r in runs:
        groups.setdefault((r["task"], r["span"], r["method"]), []).append(r)
    for (task, span, method), rs in groups.items():
        rs = sorted(rs, key=lambda r: r["seed"])
        solved = [r for r in rs if not math.isnan(r.get("solved_s", math.nan))]
        rates = [r["steps_per_s"] for r in rs if r.get("steps_per_s")]
        held = min((r["held"] for r in solved), default=math.nan)
        settled = min((r["settled"] for r in solved if not math.isnan(r.get("settled", math.nan))), default=math.nan)
        lines.append(f"| {task} | {span} | {method} | {len(solved)}/{len(rs)} | "
                     f"{', '.join(fmt(r.get('solved_s', math.nan), 60) for r in rs)} | "
                     f"{', '.join(fmt(r.get('solved_steps', math.nan), 1e6) for r in rs)} | "
                     f"{', '.join(fmt(r.get('final', math.nan)) for r in rs)} | "
                     f"{', '.join(fmt(r.get('fresh', math.nan)) for r in rs)} | {_lowest(held)} | {_lowest(settled)} | "
                     + (f"{min(rates) / 1e3:.1f}-{max(rates) / 1e3:.1f} k |" if rates else "- |"))
    return "\n".join(lines) + "\n"


NO_THRESHOLD = ("watermaze",)  # the return counts goals found: no success line, the matrix shows the return
MATRIX_COLUMNS = ["task", "span", "method", "seeds", "solved", "min_solved_min", "max_solved_min", "min_solved_Msteps",
                  "max_solved_Msteps", "final_min", "final_max", "min_held", "run_min", "run_Msteps", "settings",
                  "source"]


def read_runs_csv(path: str) -> List[Dict]:
    """The rows of a bench's ``memory_runs.csv`` with numbers as floats (empty fields: NaN)."""
    out = []
    with open(path) as f:
        for r in csv.DictReader(f):
            row: Dict = {"task": r["task"], "span": int(r["span"]), "method": r["method"], "seed": int(r["seed"]),
                         "status": r["status"]}
            for k in RUN_COLUMNS[5:-1]:
                row[k] = float(r[k]) if r.get(k) not in (None, "") else math.nan
            row["options"] = r.get("options")  # None: a bench written before the column existed
            out.append(row)
    return out


#: config keys a bench run sets by its budget or its bookkeeping, not by the settings it trains
BOOKKEEPING_KEYS = ("name", "run_dir", "seed", "total_steps", "learner.lr_schedule", "logger", "checkpoint", "eval",
                    "runtime.torch_threads", "runtime.dashboard_host", "ppo", "pipeline", "stop")
#: model keys whose value the network resolves from the observations ("auto"), and the two that only matter
#: where frames are centred: compared as the network resolves them
RESOLVED_MODEL_KEYS = ("input_scale", "episode_start_value", "centre_frames", "running_centres", "frame_pool",
                       "frame_extremes", "frame_centroids")
CENTRING_KEYS = ("frame_centre", "frame_spread", "centre_basis")


def _flat(d: Dict, prefix: str = "") -> Dict:
    out: Dict = {}
    for k, v in d.items():
        key = prefix + str(k)
        if isinstance(v, dict) and key not in ("env.options", "model.core_options"):
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def _bookkeeping(key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in BOOKKEEPING_KEYS)


def _resolved_model(model: Dict, env: Dict) -> Dict:
    """What the network makes of a config's model section on the env's observations: the values of
    ``RESOLVED_MODEL_KEYS`` as it resolves them, and ``CENTRING_KEYS`` where it centres frames."""
    from r2ac.agent.nets import (resolve_centre_frames, resolve_episode_start_value, resolve_frame_centroids,
                                 resolve_frame_extremes, resolve_frame_pool, resolve_input_scale,
                                 resolve_running_centres)
    from r2ac.agent.stems import make_stem
    from r2ac.envs import make_config_env

    venv = make_config_env(env, 1, 0)
    try:
        shape = venv.observation_shape
    finally:
        venv.close()
    pool = resolve_frame_pool(model.get("frame_pool", 1), model.get("stem", "none"), shape)
    stem = make_stem(model.get("stem", "none"), tuple(shape), list(model.get("stem_channels", (16, 32, 32))),
                     model.get("stem_fc", 256), pool=pool)
    centre = resolve_centre_frames(model.get("centre_frames", "auto"), stem)
    out = {"input_scale": resolve_input_scale(model.get("input_scale", "auto"), stem),
           "episode_start_value": resolve_episode_start_value(model.get("episode_start_value", "auto"), stem),
           "centre_frames": centre, "running_centres": resolve_running_centres(model.get("running_centres", "auto"),
                                                                               centre),
           "frame_pool": pool, "frame_extremes": resolve_frame_extremes(model.get("frame_extremes", False), centre),
           "frame_centroids": resolve_frame_centroids(model.get("frame_centroids", False), centre)}
    if centre:
        out.update({k: model.get(k) for k in CENTRING_KEYS})
    return out


def settings_differences(run_dir: str, base: str, task: str, span: int, method: str, seed: int,
                         extra: Sequence[str] = ()) -> Optional[List[str]]:
    """The config keys where a bench run trained otherwise than the settings under test (``base`` with the
    overrides ``extra``, the task and the method swapped in as the bench does) would: its saved
    ``config.yaml`` against :func:`run_config`. ``None`` where the run left no config. Budgets and bookkeeping
    (``BOOKKEEPING_KEYS``) are not compared; the model settings that "auto" resolves from the observations
    compare as the network resolves them (a vector task run with ``model.running_centres=false`` trains what
    ``auto`` trains). Env options beyond the task's own are the run's variant (:func:`run_variant`, named in
    its cell), not differences. A config saved by an older r2ac reads with the keys added since at the values
    that reproduce it (``upgrade_resolved``)."""
    import yaml

    from r2ac.config import config_to_dict
    from r2ac.config.loading import upgrade_resolved

    path = os.path.join(run_dir, "config.yaml")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        saved = upgrade_resolved(yaml.safe_load(f) or {})
    expected = config_to_dict(run_config(base, task, span, method, seed, run_dir, extra))
    missing = object()
    # the env options beyond the task's own are the run's variant, named in its cell (run_variant), not a difference
    default = dict(_task_options(task, span))
    own = {k: v for k, v in ((saved.get("env") or {}).get("options") or {}).items() if default.get(k, missing) != v}
    expected["env"]["options"] = {**expected["env"]["options"], **own}
    a, b = _flat(saved), _flat(expected)
    keys = [k for k in sorted(set(a) | set(b)) if not _bookkeeping(k) and a.get(k, missing) != b.get(k, missing)]
    model_keys = {f"model.{k}" for k in RESOLVED_MODEL_KEYS + CENTRING_KEYS}
    if any(k in model_keys for k in keys):
        ra, rb = _resolved_model(saved.get("model", {}), expected["env"]), _resolved_model(expected["model"],
                                                                                            expected["env"])
        keys = [k for k in keys if k not in model_keys]
        keys += [f"model.{k}" for k in sorted(set(ra) | set(rb)) if ra.get(k, missing) != rb.get(k, missing)]
    return sorted(keys)


def bench_run_dir(bench_dir: str, task: str, span: int, method: str, seed: int) -> str:
    """Where a bench (``--out bench_dir``) keeps one run."""
    return os.path.join(bench_dir, "runs", f"{task.replace(':', '-')}-{span}-{method}-s{seed}")


@functools.lru_cache(maxsize=None)
def _task_options(task: str, span: int) -> tuple:
    """The env options the bench gives ``task`` at ``span``, as sorted (key, value) pairs."""
    return tuple(sorted(task_spec(task, span)[1].items()))


def run_variant(run_dir: str, task: str, span: int) -> Optional[str]:
    """The env options a bench run trained with beyond those its task and span set (``env.options.KEY=VALUE``
    overrides, e.g. ``cues=6``), as ``"KEY=VALUE KEY=VALUE"`` in key order; ``""`` where there are none,
    ``None`` where the run left no ``config.yaml``. The bench writes it to ``memory_runs.csv`` (``options``);
    ``--compare`` and ``--matrix`` give a variant cells of its own."""
    import yaml

    path = os.path.join(run_dir, "config.yaml")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        saved = ((yaml.safe_load(f) or {}).get("env") or {}).get("options") or {}
    default = dict(_task_options(task, span))
    missing = object()
    def text(v) -> str:  # as the override that sets it would write it
        return str(v).lower() if isinstance(v, bool) else str(v)

    return " ".join(f"{k}={text(saved[k])}" for k in sorted(saved) if default.get(k, missing) != saved[k])


def cell_task(task: str, variant: str) -> str:
    """The task column of a cell: the task, and its variant's env options in brackets."""
    return f"{task} [{variant}]" if variant else task


def rejudge(runs: Sequence[Dict], threshold: float, window_episodes: int = 400, option: str = "--matrix") -> None:
    """Judge each run row (of :func:`read_runs_csv`, with its ``bench_dir``) again at ``threshold``, from its
    kept metrics.csv (``solved_s``, ``solved_steps``, ``best``, ``final``, ``held``, ``settled`` replaced): a
    bench's memory_runs.csv holds its runs judged at the threshold that bench ran with. A run whose metrics are
    not kept here (its bench's runs/ directory is not in git) cannot be judged again: ValueError naming them."""
    missing: Dict[str, int] = {}
    for r in runs:
        f = os.path.join(bench_run_dir(r["bench_dir"], r["task"], r["span"], r["method"], r["seed"]), "metrics.csv")
        if not os.path.exists(f):
            missing[r["bench_dir"]] = missing.get(r["bench_dir"], 0) + 1
            continue
        r.update(judge(read_success_curve(f, window_episodes=window_episodes, column=success_column(r["task"])),
                       threshold,
                       first=0 if window_episodes > 0 else 2))
    if missing:
        where = "; ".join(f"{d}: {n} run(s)" for d, n in missing.items())
        raise ValueError(f"{option} --threshold {threshold} judges each run again from its metrics.csv, and these "
                         f"runs have none here (their bench's runs/ directory is not kept): {where}. Leave out "
                         "--threshold to read each run as its bench judged it (at the threshold that bench ran with)")


def gather_cells(dirs: Sequence[str], option: str = "--matrix", threshold: Optional[float] = None,
                 window_episodes: int = 400) -> Dict[tuple, tuple]:
    """{(task, span, method): (source directories, runs in seed order)} over the benches in ``dirs`` (each
    with a ``memory_runs.csv``); a seed that several directories ran counts as the last one's run (e.g. a
    longer rerun of one seed). Runs of a variant (env options beyond the task's, read from each run's saved
    config: :func:`run_variant`) form cells of their own, the task named ``task [KEY=VALUE ...]``; each run
    row keeps its own ``task``. With ``threshold`` each run is judged again at it (:func:`rejudge`), else as
    its bench judged it."""
    by_seed: Dict[tuple, tuple] = {}
    unknown: Dict[str, int] = {}
    for d in dirs:
        path = os.path.join(d, "memory_runs.csv")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} does not exist: {option} takes directories that a bench wrote "
                                    "(its --out), e.g. results/memory/scaled/span100")
        for r in read_runs_csv(path):
            r["bench_dir"] = d
            variant = r["options"]
            if variant is None:  # a bench from before the options column: read the run's saved config
                variant = run_variant(bench_run_dir(d, r["task"], r["span"], r["method"], r["seed"]), r["task"],
                                      r["span"])
                if variant is None:
                    unknown[d] = unknown.get(d, 0) + 1
            by_seed[cell_task(r["task"], variant or ""), r["span"], r["method"], r["seed"]] = (d, r)
    for d, n in unknown.items():
        print(f"{option}: {d}: {n} run(s) with no options column and no config.yaml under runs/; counted as their "
              "task's own settings (a variant of env options cannot be told apart there)", file=sys.stderr)
    cells: Dict[tuple, tuple] = {}
    for key in sorted(by_seed, key=lambda k: k[3]):
        d, r = by_seed[key]
        srcs, rs = cells.setdefault(key[:3], ([], []))
        rs.append(r)
        if d not in srcs:
            srcs.append(d)
    if threshold is not None:
        rejudge([r for _, rs in cells.values() for r in rs], threshold, window_episodes, option)
    return cells


def _suite_order(key: tuple) -> tuple:
    task, span, method = key[:3]
    return (*task_order(task), span, METHODS.index(method) if method in METHODS else len(METHODS))


def cell_settings(runs: Sequence[Dict], base: str, extra: Sequence[str] = ()) -> str:
    """How a cell's runs (rows of :func:`gather_cells`, each with its ``bench_dir``) compare with the settings
    under test: ``""`` (each run's saved config trains what they train), ``"differs: KEY, ..."`` (the keys
    where some run's config differs) or ``"not checked"`` (a run left no config.yaml, e.g. a bench whose
    runs/ directory is not kept)."""
    differing: List[str] = []
    for r in runs:
        keys = settings_differences(bench_run_dir(r["bench_dir"], r["task"], r["span"], r["method"], r["seed"]), base,
                                    r["task"], r["span"], r["method"], r["seed"], extra)
        if keys is None:
            return "not checked"
        differing += [k for k in keys if k not in differing]
    return f"differs: {', '.join(differing)}" if differing else ""


def matrix(dirs: Sequence[str], base: Optional[str] = None, extra: Sequence[str] = (),
           threshold: Optional[float] = None, window_episodes: int = 400) -> List[Dict]:
    """One row per (task, span, method) over the benches in ``dirs`` (each with a ``memory_runs.csv``); a
    seed that several directories ran counts as the last one's run (e.g. a longer rerun of one seed). With
    ``base`` (a config, and overrides ``extra``) each row's ``settings`` says whether its runs trained those
    settings (:func:`cell_settings`); with ``threshold`` each run is judged again at it (:func:`rejudge`)."""
    out = []
    for (task, span, method), (srcs, rs) in gather_cells(dirs, "--matrix", threshold, window_episodes).items():
        settings = "" if base is None else cell_settings(rs, base, extra)
        solved = [r["solved_s"] / 60 for r in rs if not math.isnan(r["solved_s"])]
        solved_steps = [r["solved_steps"] / 1e6 for r in rs if not math.isnan(r["solved_s"])]
        finals = [r["final"] for r in rs if not math.isnan(r["final"])]
        walls = [r["wall_s"] / 60 for r in rs if not math.isnan(r["wall_s"])]
        steps = [r["steps"] / 1e6 for r in rs if not math.isnan(r["steps"])]
        held = [r["held"] for r in rs if not math.isnan(r["solved_s"]) and not math.isnan(r["held"])]
        out.append({"task": task, "span": span, "method": method, "seeds": len(rs), "solved": len(solved),
                    "min_solved_min": min(solved, default=math.nan), "max_solved_min": max(solved, default=math.nan),
                    "min_solved_Msteps": min(solved_steps, default=math.nan),
                    "max_solved_Msteps": max(solved_steps, default=math.nan),
                    "final_min": min(finals, default=math.nan), "final_max": max(finals, default=math.nan),
                    "min_held": min(held, default=math.nan), "run_min": max(walls, default=math.nan),
                    "run_Msteps": max(steps, default=math.nan), "settings": settings, "source": " ".join(srcs)})
    out.sort(key=lambda r: _suite_order((r["task"], r["span"], r["method"])))
    return out


COMPARE_COLUMNS = ["task", "span", "method", "setting", "seeds", "solved", "solved_Msteps",
                   "median_solved_Msteps", "min_held", "min_settled", "final_min", "final_max", "fresh_min",
                   "fresh_max", "run_Msteps", "steps_per_s", "median_steps_per_s", "vs_first_per_seed",
                   "vs_first_median", "source"]


def parse_settings(specs: Sequence[str]) -> Dict[str, List[str]]:
    """``LABEL=DIR[,DIR...]`` per setting, in order. A label may hold ``=`` (``learner.logit_penalty=0=DIR``):
    where the directories after the first ``=`` are not all there and those after the last one are, the
    label ends at the last."""
    out: Dict[str, List[str]] = {}

    def there(dirs: str) -> bool:
        return all(os.path.isdir(d.strip()) for d in dirs.split(",") if d.strip())

    for spec in specs:
        label, eq, dirs = spec.partition("=")
        if eq and not there(dirs) and there(spec.rpartition("=")[2]):
            label, eq, dirs = spec.rpartition("=")
        if not eq or not label.strip() or not dirs.strip():
            raise ValueError(f"--compare takes LABEL=DIR[,DIR...] per setting (e.g. default=results/a,results/b "
                             f"contractive=results/c), got {spec!r}")
        if label.strip() in out:
            raise ValueError(f"--compare: the label {label.strip()!r} is given twice; give each setting one label")
        out[label.strip()] = [d.strip() for d in dirs.split(",") if d.strip()]
    if len(out) < 2:
        raise ValueError("--compare needs two settings or more, e.g. default=DIR contractive=DIR")
    return out


def _shared_cells(settings: Dict[str, List[str]], threshold: Optional[float] = None,
                  window_episodes: int = 400) -> Tuple[Dict[str, Dict], List[tuple]]:
    """Each setting's cells (:func:`gather_cells`) and, in suite order, the cells two settings or more ran."""
    per = {label: gather_cells(dirs, "--compare", threshold, window_episodes) for label, dirs in settings.items()}
    keys = [k for k in dict.fromkeys(k for cells in per.values() for k in cells)
            if sum(k in cells for cells in per.values()) >= 2]
    return per, sorted(keys, key=_suite_order)


def compare(settings: Dict[str, List[str]], threshold: Optional[float] = None,
            window_episodes: int = 400) -> List[Dict]:
    """One row per (task, span, method) and setting, for the cells that two settings or more ran: seeds
    solved and the agent steps each seed took to solve (steps, not minutes: the settings may have run on
    different machines or beside other work), and each run's agent steps per second of its wall time (a
    speed comparison where the settings ran side by side on one machine). With ``threshold`` each run is
    judged again at it (:func:`rejudge`), else as its bench judged it.

    Each setting after the first is also held against the first where it ran the cell: ``vs_first_per_seed``
    the ratio of agent steps to solve of each seed that both solved (``s0 0.84 s1 1.02``; seeds solved by one
    of the two only are left out), ``vs_first_median`` the ratio of the medians over the solved seeds."""
    per, keys = _shared_cells(settings, threshold, window_episodes)
    out = []
    first = next(iter(per))
    for key in keys:
        base = {r["seed"]: r["solved_steps"] for r in per[first][key][1]} if key in per[first] else {}
        base_median = statistics.median([v for v in base.values() if not math.isnan(v)] or [math.nan])
        for label, cells in per.items():
            if key not in cells:
                continue
            srcs, rs = cells[key]
            solved = [r["solved_steps"] / 1e6 for r in rs if not math.isnan(r["solved_steps"])]
            held = [r["held"] for r in rs if not math.isnan(r["solved_steps"]) and not math.isnan(r["held"])]
            settled = [r["settled"] for r in rs if not math.isnan(r.get("settled", math.nan))]
            finals = [r["final"] for r in rs if not math.isnan(r["final"])]
            fresh = [r["fresh"] for r in rs if not math.isnan(r.get("fresh", math.nan))]
            per_seed = ["-" if math.isnan(r["solved_steps"]) else f"{r['solved_steps'] / 1e6:.2f}" for r in rs]
            rates = [r.get("steps_per_s", math.nan) for r in rs]
            known = [v for v in rates if not math.isnan(v)]
            out.append({"task": key[0], "span": key[1], "method": key[2], "setting": label, "seeds": len(rs),
                        "solved": len(solved), "solved_Msteps": " ".join(per_seed),
                        "median_solved_Msteps": statistics.median(solved) if solved else math.nan,
                        "min_held": min(held, default=math.nan), "min_settled": min(settled, default=math.nan),
                        "final_min": min(finals, default=math.nan),
                        "final_max": max(finals, default=math.nan), "fresh_min": min(fresh, default=math.nan),
                        "fresh_max": max(fresh, default=math.nan),
                        "run_Msteps": max((r["steps"] / 1e6 for r in rs), default=math.nan),
                        "steps_per_s": " ".join("-" if math.isnan(v) else f"{v:.0f}" for v in rates),
                        "median_steps_per_s": statistics.median(known) if known else math.nan,
                        **_versus(rs, base, base_median, label != first), "source": " ".join(srcs)})
    return out


def _versus(rs: Sequence[Dict], base: Dict, base_median: float, other: bool) -> Dict:
    """``compare``'s ratios of one setting's runs of a cell to the first setting's (``base``: seed -> steps to
    solve, NaN where not solved)."""
    if not other or not base:
        return {"vs_first_per_seed": "", "vs_first_median": math.nan}
    pairs = [(r["seed"], r["solved_steps"] / base[r["seed"]]) for r in rs
             if r["seed"] in base and not math.isnan(r["solved_steps"]) and not math.isnan(base[r["seed"]])]
    solved = [r["solved_steps"] for r in rs if not math.isnan(r["solved_steps"])]
    median = statistics.median(solved) / base_median if solved and not math.isnan(base_median) else math.nan
    return {"vs_first_per_seed": " ".join(f"s{seed} {v:.2f}" for seed, v in pairs), "vs_first_median": median}


def _lowest(v: float) -> str:
    """A lowest success, held against the threshold: 3 decimals, rounded down (0.8996 is not 0.900)."""
    return "-" if math.isnan(v) else f"{math.floor(v * 1000 + 1e-9) / 1000:.3f}"


def compare_markdown(rows: List[Dict]) -> str:
    """Settings side by side: a row per cell and setting, M steps to solve per seed ("-": not solved), and the
    median of the runs' agent steps per second (thousands)."""
    lines = ["| task | span | method | setting | seeds solved | M steps to solve, per seed | median | x the first's "
             "steps, per seed | x its median | lowest after solving | lowest after 0.95 | final | fresh envs "
             "| run (M steps) | k steps/s, median |",
             "| " + " | ".join(["---"] * 15) + " |"]

    def num(v, fmt="{:.2f}"):
        return "-" if math.isnan(v) else fmt.format(v)

    for r in rows:
        final, fresh = range_text(r["final_min"], r["final_max"]), range_text(r["fresh_min"], r["fresh_max"])
        if r["task"] in NO_THRESHOLD:
            solved, steps, median, held, settled = "-", "-", "-", "-", "-"
        else:
            solved, steps = f"{r['solved']}/{r['seeds']}", r["solved_Msteps"].replace(" ", ", ")
            median = num(r["median_solved_Msteps"])
            held, settled = _lowest(r["min_held"]), _lowest(r.get("min_settled", math.nan))
        per_seed = r.get("vs_first_per_seed", "").replace(" s", ", s") or "-"
        versus = f"{per_seed} | {num(r.get('vs_first_median', math.nan))}"
        if r["task"] in NO_THRESHOLD:
            versus = "- | -"
        lines.append(f"| {r['task']} | {r['span']} | {r['method']} | {r['setting']} | {solved} | {steps} | {median} "
                     f"| {versus} | {held} | {settled} | {final} | {fresh} | {num(r['run_Msteps'], '{:.1f}')} "
                     f"| {num(r.get('median_steps_per_s', math.nan) / 1000)} |")
    return "\n".join(lines) + "\n"


def plot_compare(rows: List[Dict], path: str) -> None:
    """Agent steps to solve per seed, a column per cell and a colour per setting (unsolved seeds as an x at
    the run's length)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["task"] not in NO_THRESHOLD]
    cells = list(dict.fromkeys((r["task"], r["span"], r["method"]) for r in rows))
    labels = list(dict.fromkeys(r["setting"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(cells) + 2), 4.2))
    width = 0.8 / max(1, len(labels))
    for k, label in enumerate(labels):
        colour = f"C{k}"
        for r in (r for r in rows if r["setting"] == label):
            x = cells.index((r["task"], r["span"], r["method"])) - 0.4 + (k + 0.5) * width
            for v in r["solved_Msteps"].split():
                if v == "-":
                    ax.plot(x, r["run_Msteps"], "x", color=colour, ms=7)
                else:
                    ax.plot(x, float(v), "o", color=colour, ms=5, alpha=0.8)
        ax.plot([], [], "o", color=colour, label=f"{label} (x: not solved, at the run's length)")
    ax.set_xticks(range(len(cells)))
    ax.set_xticklabels([f"{t}\n{s}" + ("" if m == "rtrl" else f"\n{m}") for t, s, m in cells], fontsize=7)
    ax.set_ylabel("M agent steps to success >= threshold")
    ax.set_yscale("log")  # spans from 0.1 M (short tasks) to tens of M steps
    ax.grid(alpha=0.3, axis="y", which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def compare_curves(settings: Dict[str, List[str]], window_episodes: int = 400) -> Dict[tuple, Dict[str, list]]:
    """{(task, span, method): {setting: [success curve per seed]}} for the cells of :func:`compare`, read from
    each run's metrics.csv (``read_success_curve``); a run whose directory is not kept here is left out."""
    per, keys = _shared_cells(settings)
    out: Dict[tuple, Dict[str, list]] = {}
    for key in keys:
        for label, cells in per.items():
            for r in cells.get(key, ((), ()))[1]:
                f = os.path.join(bench_run_dir(r["bench_dir"], r["task"], r["span"], r["method"], r["seed"]),
                                 "metrics.csv")
                curve = read_success_curve(f, window_episodes=window_episodes, column=success_column(r["task"])) \
                    if os.path.exists(f) else []
                if curve:
                    out.setdefault(key, {}).setdefault(label, []).append(curve)
    return out


def plot_compare_curves(curves: Dict[tuple, Dict[str, list]], path: str, threshold: float,
                        labels: Sequence[str] = ()) -> None:
    """A panel per cell: each seed's success against agent steps, a colour per setting (steps, not minutes:
    the settings may have run on different machines), so a fall after solving shows. ``labels``: the
    settings in the order of their colours (C0, C1, ...), the same in every panel."""
    fig, axes = _panels(len(curves))
    labels = list(dict.fromkeys([*labels, *(label for by in curves.values() for label in by)]))
    for ax, ((task, span, method), by) in zip(axes.flat, curves.items()):
        for label, cs in by.items():
            colour = f"C{labels.index(label)}"
            for j, c in enumerate(cs):
                ax.plot([st / 1e6 for _, st, _ in c], [v for *_, v in c], color=colour, lw=0.9, alpha=0.75,
                        label=f"{label} ({len(cs)} seeds)" if j == 0 else None)
        if task not in NO_THRESHOLD:
            ax.axhline(threshold, color="grey", lw=0.8, ls="--")
        _panel_title(ax, f"{task}, span {span}" + ("" if method == "rtrl" else f", {method}"))
        ax.set_xlabel("M agent steps")
        ax.set_ylabel(success_label(task))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    _save_panels(fig, axes, len(curves), path)


def range_text(lo: float, hi: float, fmt: str = "{:.2f}") -> str:
    """``lo`` and ``hi`` as a range of the tables: one number where they print alike, ``0.29-0.37``, and
    ``-0.43 to -0.42`` where a bound is negative (a dash between negative numbers reads as a minus); ``-`` for NaN."""
    def text(v):
        return "-" if math.isnan(v) else fmt.format(v)

    if text(lo) == text(hi):
        return text(lo)
    return f"{text(lo)} to {text(hi)}" if (lo < 0 or hi < 0) else f"{text(lo)}-{text(hi)}"


def matrix_cell(row: Dict) -> str:
    """``3/3 in 2.0-3.7 min, held 0.902`` / ``1/3 in 2.1 min, held 0.652, final 0.34-0.67`` / ``0/3, final
    0.29-0.37``, then the length of the longest run (``held``: the lowest success after solving, rounded
    down); for a task without a success line the final return instead."""
    finals = range_text(row["final_min"], row["final_max"])
    m = row["run_min"]  # whole minutes from 10 on, else to a tenth (a 2.5-minute budget is not "2 min")
    minutes = "" if math.isnan(m) else f"{m:.0f}" if m >= 10 else f"{m:.1f}".removesuffix(".0")
    runs = f" ({minutes} min, {row['run_Msteps']:.1f} M steps)" if minutes else ""
    if row["task"] in NO_THRESHOLD:
        return f"return {finals}{runs}"
    head = f"{row['solved']}/{row['seeds']}"
    if row["solved"]:
        head += " in "
        if not math.isnan(row.get("min_solved_Msteps", math.nan)):
            head += f"{range_text(row['min_solved_Msteps'], row['max_solved_Msteps'])} M steps, "
        head += f"{range_text(row['min_solved_min'], row['max_solved_min'], '{:.1f}')} min"
        if not math.isnan(row["min_held"]):
            head += f", held {math.floor(row['min_held'] * 1000 + 1e-9) / 1000:.3f}"
    if row["solved"] < row["seeds"]:
        head += f", final {finals}"
    return head + runs


def matrix_markdown(rows: List[Dict]) -> str:
    """The suite as one table: a row per (task, span), a column per method that any bench ran."""
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    methods += sorted({r["method"] for r in rows} - set(methods))
    by_cell = {(r["task"], r["span"], r["method"]): r for r in rows}
    lines = ["| task | span | " + " | ".join(methods) + " |", "| " + " | ".join(["---"] * (2 + len(methods))) + " |"]
    marks = {"": "", "not checked": " (?)"}
    for task, span in dict.fromkeys((r["task"], r["span"]) for r in rows):
        cells = [matrix_cell(by_cell[task, span, m]) + marks.get(by_cell[task, span, m].get("settings", ""), " (*)")
                 if (task, span, m) in by_cell else "not run" for m in methods]
        lines.append(f"| {task} | {span} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n" + settings_notes(rows)


def settings_notes(rows: List[Dict]) -> str:
    """Under the matrix: the cells whose runs trained other settings than those under test (``(*)``, with the
    keys), and those that could not be checked (``(?)``)."""
    differ = [r for r in rows if r.get("settings", "").startswith("differs")]
    unchecked = [f"{r['task']} {r['span']} {r['method']}" for r in rows if r.get("settings") == "not checked"]
    notes = [f"- (*) {r['task']} {r['span']} {r['method']}: {r['settings']} ({r['source']})" for r in differ]
    if unchecked:
        notes.append(f"- (?) settings not checked, a run left no config.yaml: {', '.join(unchecked)}")
    return ("\nCells not run with the settings under test:\n\n" + "\n".join(notes) + "\n") if notes else ""


def plot_matrix(rows: List[Dict], path: str) -> None:
    """A heat map of the suite: the fraction of seeds solved per (task, span) and method, the cell's text."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    methods += sorted({r["method"] for r in rows} - set(methods))
    keys = list(dict.fromkeys((r["task"], r["span"]) for r in rows))
    by_cell = {(r["task"], r["span"], r["method"]): r for r in rows}
    frac = np.full((len(keys), len(methods)), np.nan)
    fig, ax = plt.subplots(figsize=(2.6 * len(methods) + 2.2, 0.5 * len(keys) + 1.4))
    for i, (task, span) in enumerate(keys):
        for j, m in enumerate(methods):
            r = by_cell.get((task, span, m))
            if r is None:
                ax.text(j, i, "not run", ha="center", va="center", fontsize=6, color="grey")
                continue
            if task not in NO_THRESHOLD:
                frac[i, j] = r["solved"] / r["seeds"]
            text = matrix_cell(r).replace(", final", "\nfinal").replace(", held", "\nheld").replace(" (", "\n(")
            mark = {"": "", "not checked": " (?)"}.get(r.get("settings", ""), " (*)")
            ax.text(j, i, text + mark, ha="center",
                    va="center", fontsize=5.5)
    ax.imshow(frac, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto", alpha=0.55)
    ax.set_xticks(range(len(methods)), methods)
    ax.set_yticks(range(len(keys)), [f"{t}, span {s}" for t, s in keys], fontsize=7)
    # On the figure, not the axes: beside long task labels the axes are narrow, and a title over them was cut off.
    fig.suptitle("r2ac bench memory: seeds that reached the success line (colour),\ntime to it, final success",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _panel_title(ax, title: str, width: int = 40) -> None:
    """A panel's title; a long one (a ``gym:`` id with its options) goes on a line per comma-separated part, in
    a smaller font, so that it is not cut at the panel's edges."""
    if len(title) <= width:
        ax.set_title(title)
    else:
        ax.set_title(title.replace(", ", ",\n"), fontsize="small")


def _panels(n: int):
    """A figure of ``n`` panels, three to a row: (fig, axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, n)
    fig, axes = plt.subplots(math.ceil(n / cols), cols, figsize=(5.2 * cols, 3.6 * math.ceil(n / cols)), squeeze=False)
    return fig, axes


def _save_panels(fig, axes, n: int, path: str) -> None:
    """Blank the panels past the first ``n``, write the figure to ``path`` and close it."""
    import matplotlib.pyplot as plt

    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_horizon_s(curves: Dict[str, list], minutes: float) -> float:
    """The wall time the curves' plot spans: the longest curve's end, or ``minutes`` when there is none. With
    ``--report`` the runs may have had other budgets than this call's ``--minutes`` (default 10), and a plot
    cut at it would hide what came later."""
    ends = [c[-1][0] for c in curves.values() if c]
    return max(ends) if ends else minutes * 60


def plot(runs: List[Dict], curves: Dict[str, list], path: str, threshold: float, minutes: float) -> None:
    import numpy as np

    panels = sorted({(r["task"], r["span"]) for r in runs}, key=lambda p: (*task_order(p[0]), p[1]))
    fig, axes = _panels(len(panels))
    grid = np.linspace(0, plot_horizon_s(curves, minutes), 121)
    for ax, (task, span) in zip(axes.flat, panels):
        for i, method in enumerate(METHODS):
            cs = [curves[r["run_dir"]] for r in runs if (r["task"], r["span"], r["method"]) == (task, span, method)
                  and curves.get(r.get("run_dir", ""))]
            if not cs:
                continue
            ys = np.array([np.interp(grid, [t for t, _, _ in c], [v for *_, v in c], right=np.nan) for c in cs])
            for y in ys:  # each seed thin, to its own end (runs that hit the step budget end earlier)
                ax.plot(grid / 60, y, color=f"C{i}", lw=0.6, alpha=0.45)
            ok = ~np.isnan(ys).any(0)  # mean and min-max band only while every seed is still running
            if ok.any():
                ax.plot(grid[ok] / 60, ys[:, ok].mean(0), color=f"C{i}", lw=1.8, label=f"{method} ({len(cs)} seeds)")
                ax.fill_between(grid[ok] / 60, ys[:, ok].min(0), ys[:, ok].max(0), color=f"C{i}", alpha=0.2)
        ax.axhline(threshold, color="grey", lw=0.8, ls="--")
        _panel_title(ax, f"{task}, span {span}")
        ax.set_xlabel("wall time (minutes, one CPU core per run)")
        ax.set_ylabel(success_label(task))
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # no curve yet: a run shorter than one success window
            ax.legend(fontsize=7)
    _save_panels(fig, axes, len(panels), path)


def _write_outputs(out: str, stem: str, rows: List[Dict], columns: Sequence[str], markdown, plot_fn,
                   what: str) -> None:
    """``<out>/<stem>.csv``, ``.md`` and ``.png`` of a table that trains nothing (--matrix, --compare)."""
    os.makedirs(out, exist_ok=True)
    write_csv(os.path.join(out, f"{stem}.csv"), rows, columns)
    with open(os.path.join(out, f"{stem}.md"), "w") as f:
        f.write(markdown(rows))
    plot_fn(rows, os.path.join(out, f"{stem}.png"))
    print(markdown(rows))
    print(f"{what}. CSV: {out}/{stem}.csv; table: {out}/{stem}.md; plot: {out}/{stem}.png")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="r2ac bench memory", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/quickstart.yaml", help="the settings under test (default: quickstart)")
    p.add_argument("--tasks", default="cue-pixels",
                   help=f"comma-separated, from: {', '.join(TASKS)}; or 'all' (those); or held-out tasks "
                        f"{HELD_OUT_HELP}")
    p.add_argument("--spans", default="100", help="comma-separated credit spans in steps (e.g. 100,300,1000)")
    p.add_argument("--methods", default="rtrl,tbptt", help=f"comma-separated, from: {', '.join(METHODS)}; or 'all'")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--minutes", type=float, default=10.0, help="wall-clock budget of each run")
    p.add_argument("--steps", type=int, default=None,
                   help="step budget of each run (total_steps; the learning rate decays linearly to 0 there); "
                        "default: the config's total_steps; 0: none, constant learning rate")
    p.add_argument("--threshold", type=float, default=None,
                   help="success that counts as solved (default 0.9); with --compare or --matrix, each run is "
                        "judged again at it from its kept metrics.csv (default: as its bench judged it)")
    p.add_argument("--window-episodes", type=int, default=400,
                   help="success = mean return over the last this many episodes (0: over the last 3 log rows)")
    p.add_argument("--stop-after-solved", type=int, default=None, metavar="STEPS",
                   help="end each run this many agent steps after its success first reaches --threshold over "
                        "--window-episodes episodes (stop.success in the run's config); a bench that only has to "
                        "show each run solving costs less, and its 'lowest after solving' then covers those steps "
                        "only (default: each run trains its whole budget)")
    p.add_argument("--jobs", type=int, default=2, help="runs at a time (each one process, one torch thread)")
    p.add_argument("--out", default="bench_out/memory")
    p.add_argument("--report", action="store_true",
                   help="train nothing: table, CSVs and plot from the finished runs of the selection under --out")
    p.add_argument("--matrix", nargs="+", metavar="DIR",
                   help="train nothing: one table of the suite (matrix.md, matrix.csv, matrix.png under --out) "
                        "from the memory_runs.csv of these bench directories; a seed that a later directory ran "
                        "again counts as that run; cells whose runs' saved configs differ from --config and the "
                        "overrides are marked (*), with the keys")
    p.add_argument("--compare", nargs="+", metavar="LABEL=DIR[,DIR...]",
                   help="train nothing: settings side by side over the cells two or more of them ran, in agent "
                        "steps to solve per seed (compare.md, compare.csv, compare.png under --out; "
                        "compare_curves.png: each seed's success against agent steps, where the runs' directories "
                        "are kept), e.g. "
                        "default=results/a,results/b contractive=results/c")
    p.add_argument("overrides", nargs="*",
                   help="key=value overrides applied to every run (e.g. learner.learning_rate=3e-3)")
    args = p.parse_args(argv)
    rejudge_at = args.threshold
    if args.threshold is None:
        args.threshold = 0.9
    if args.compare:
        try:
            rows = compare(parse_settings(args.compare), rejudge_at, args.window_episodes)
        except (FileNotFoundError, ValueError) as e:
            p.error(str(e))
        if not rows:
            per, _ = _shared_cells(parse_settings(args.compare), rejudge_at, args.window_episodes)
            have = "; ".join(f"{label}: " + (", ".join(f"{t} {s} {m}" for t, s, m in cells) or "none")
                             for label, cells in per.items())
            p.error(f"--compare: no task, span and method that two of the settings both ran ({have}). A variant (env "
                    "options beyond the task's, e.g. env.options.pay=each) is a cell of its own: compare it with "
                    "runs of the same options")
        cells = len({(r["task"], r["span"], r["method"]) for r in rows})
        _write_outputs(args.out, "compare", rows, COMPARE_COLUMNS, compare_markdown, plot_compare, f"{cells} cells")
        settings = parse_settings(args.compare)
        curves = compare_curves(settings, args.window_episodes)
        if curves:  # the runs' metrics where their directories are kept here (runs/ is not in git)
            plot_compare_curves(curves, os.path.join(args.out, "compare_curves.png"), args.threshold, list(settings))
            print(f"curves: {args.out}/compare_curves.png")
        return 0
    if args.matrix:
        try:
            rows = matrix(args.matrix, args.config, args.overrides, rejudge_at, args.window_episodes)
        except (FileNotFoundError, ValueError) as e:
            p.error(str(e))
        _write_outputs(args.out, "matrix", rows, MATRIX_COLUMNS, matrix_markdown, plot_matrix,
                       f"{len(rows)} cells from {len(args.matrix)} benches")
        return 0
    tasks = list(TASKS) if args.tasks == "all" else [t.strip() for t in args.tasks.split(",") if t.strip()]
    methods = list(METHODS) if args.methods == "all" else [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [t for t in tasks if t not in TASKS and not is_held_out(t)]
    bad += [m for m in methods if m not in METHODS]
    if bad:
        p.error(f"unknown task/method {bad}; tasks: {', '.join(TASKS)}, {HELD_OUT_HELP}; methods: "
                f"{', '.join(METHODS)}")
    spans = [int(s) for s in args.spans.split(",")]
    try:  # a held-out task runs at its own span, once (a gym: task's measured with the env options given)
        task_spans = {t: [held_out_span(t, override_env_options(args.config, args.overrides))] if is_held_out(t)
                      else spans for t in tasks}
    except ValueError as e:
        p.error(str(e))
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.stop_after_solved is not None:
        if args.stop_after_solved < 0 or args.window_episodes <= 0:
            p.error("--stop-after-solved: needs STEPS >= 0 and --window-episodes > 0 (the stop reads the mean "
                    f"success over that many episodes); got {args.stop_after_solved} and {args.window_episodes}")
        args.overrides = list(args.overrides) + [
            f"stop.success={args.threshold}", f"stop.window_episodes={args.window_episodes}",
            f"stop.hold_steps={args.stop_after_solved}"]
    os.makedirs(args.out, exist_ok=True)
    run_config(args.config, tasks[0], task_spans[tasks[0]][0], methods[0], seeds[0], os.path.join(args.out, "check"),
               args.overrides, args.steps)  # a bad config or override fails here, before any run starts
    jobs = [(args.config, t, s, m, seed, bench_run_dir(args.out, t, s, m, seed),
             args.minutes, tuple(args.overrides), args.steps)
            for t in tasks for s in task_spans[t] for m in methods for seed in seeds]
    if args.report:
        jobs = [j for j in jobs if run_is_done(j[5])]
        if not jobs:
            p.error(f"--report: no finished run of this selection under {args.out}/runs; run the bench without "
                    "--report first")
    budget = "no step budget" if args.steps == 0 else f"{args.steps or 'config'} steps"
    print(f"r2ac bench memory: {len(jobs)} {'finished runs' if args.report else 'runs'} of {args.minutes:g} min "
          f"or {budget}, "
          f"{args.jobs} at a time, "
          f"settings {args.config} {' '.join(args.overrides)}", flush=True)
    runs = []
    if args.report:  # every job is finished: _one_run only reads its summary
        runs = [_one_run(j) for j in jobs]
    else:
        again = [os.path.basename(j[5]) for j in jobs if os.path.exists(j[5]) and not run_is_done(j[5])]
        if again:
            print(f"  unfinished or interrupted before, these start over: {', '.join(again)}", flush=True)
        ctx = multiprocessing.get_context("spawn")
        try:
            with sigterm_as_interrupt(), ctx.Pool(args.jobs, maxtasksperchild=1) as pool:
                for r in pool.imap_unordered(_one_run, jobs):
                    print(f"  {r['task']} span {r['span']} {r['method']} seed {r['seed']}: {r['status']}",
                          flush=True)
                    runs.append(r)
        except KeyboardInterrupt:  # the pool's exit stopped its workers; each run in progress stopped cleanly
            print(f"r2ac bench memory: interrupted. Finished runs are kept under {args.out}/runs; the same "
                  "command again runs the rest (interrupted runs start over)", file=sys.stderr, flush=True)
            return 130
    curves = {}
    for r in runs:
        path = os.path.join(r.get("run_dir", ""), "metrics.csv")
        curves[r.get("run_dir", "")] = read_success_curve(path, window_episodes=args.window_episodes,
                                                          column=success_column(r["task"])) \
            if os.path.exists(path) else []
        r.update(judge(curves[r.get("run_dir", "")], args.threshold, first=0 if args.window_episodes > 0 else 2))
        r["wall_s"] = curves[r.get("run_dir", "")][-1][0] if curves[r.get("run_dir", "")] else math.nan
    runs.sort(key=lambda r: (*task_order(r["task"]), r["span"], METHODS.index(r["method"]), r["seed"]))
    summary = summarize(runs, args.threshold)
    write_csv(os.path.join(args.out, "memory_runs.csv"), runs, RUN_COLUMNS)
    write_csv(os.path.join(args.out, "memory.csv"), summary, SUMMARY_COLUMNS)
    with open(os.path.join(args.out, "memory.md"), "w") as f:
        f.write(markdown_table(runs))
    plot(runs, curves, os.path.join(args.out, "memory.png"), args.threshold, args.minutes)
    print(format_table(summary, SUMMARY_COLUMNS))
    import torch

    torch.set_num_threads(1)  # the description names the threads of one run
    window = f"the last {args.window_episodes} episodes" if args.window_episodes > 0 else "3 log rows"
    print(f"\n{machine_description()}; {args.jobs} runs at a time, one torch thread each; success >= "
          f"{args.threshold} over {window}. CSV: {args.out}/memory.csv, {args.out}/memory_runs.csv; "
          f"table: {args.out}/memory.md; plot: {args.out}/memory.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
