"""Does a trained watermaze agent remember where the goal is? For trained runs of
``r2ac bench memory --tasks watermaze`` (docs/results.md, the watermaze rows of the suite).

    python tools/watermaze_memory.py RUN_DIR [RUN_DIR ...] [--episodes N] [--seed S] [--out CSV]

For each run: its newest checkpoint plays ``--episodes`` episodes of its own task (``env.options``) on
fresh envs with sampled actions (as in training; ``r2ac eval``'s protocol), and the table gives the goals
found per episode, the mean steps to the first find, the mean steps from a respawn back to the goal after
it, and their ratio. The goal never moves within an episode, so an agent that remembers where it found it
walks back in at most ``2 (size - 1)`` steps; one that only searches needs about as long as the first
time. Both means count finds within the episode only, and a search cut off by the episode's end is not
counted, which lowers the mean after the first find for any agent (a random walk on the default arena has
a ratio of about 0.7-0.8): read an agent's ratio against a feed-forward agent's, not against 1.
"""

from __future__ import annotations

import numpy as np

from r2ac.api import load
from r2ac.bench.common import labelled_runs, parse_played_runs, played_runs_parser, report_table
from r2ac.evaluation import evaluate_policy

COLUMNS = ("run", "episodes", "goals_found", "steps_to_first_goal", "mean_steps_to_goal_after_first",
           "after_over_first")


def memory_row(policy, episodes: int, seed: int) -> dict:
    """The watermaze statistics of ``policy`` (an ``r2ac.api.Policy``) over ``episodes`` test episodes."""
    res = evaluate_policy(policy, policy.config, sets=1, episodes=episodes, seed=seed, greedy=False)
    info = res["episode_info"]
    missing = {"goals_found", "steps_to_first_goal", "mean_steps_to_goal_after_first"} - set(info)
    if missing:
        raise SystemExit(f"watermaze_memory: the env reports no {sorted(missing)}; is this the watermaze?")
    first = info["steps_to_first_goal"]["mean"]
    later = info["mean_steps_to_goal_after_first"]["mean"]
    return {"episodes": episodes, "goals_found": info["goals_found"]["mean"], "steps_to_first_goal": first,
            "mean_steps_to_goal_after_first": later, "after_over_first": later / first if first > 0 else np.nan}


def main(argv: list[str] | None = None) -> int:
    a = parse_played_runs(played_runs_parser(__doc__, episodes=320), argv, "watermaze_memory")
    rows = []
    for run, label in labelled_runs(a.runs):
        policy = load(run, greedy=False, seed=a.seed)
        if policy.config.env.id != "watermaze":
            raise SystemExit(f"watermaze_memory: {run} is a run of env {policy.config.env.id!r}, "
                             "not of the watermaze")
        rows.append({"run": label, **memory_row(policy, a.episodes, a.seed)})
    report_table(["run", "goals per episode", "steps to the first goal", "steps back to it after", "after / first"],
                 [[r["run"], f"{r['goals_found']:.2f}", f"{r['steps_to_first_goal']:.1f}",
                   f"{r['mean_steps_to_goal_after_first']:.1f}", f"{r['after_over_first']:.2f}"] for r in rows],
                 rows, COLUMNS, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
