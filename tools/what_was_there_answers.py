"""Which of the squares a trained agent keeps on examples/what_was_there.py's task: its answers split by the
place the pointer shows (docs/results.md, "What was there").

    python tools/what_was_there_answers.py RUN_DIR [RUN_DIR ...] [--episodes 3000] [--seed S] [--out CSV]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span and
options), and the share answered right is given for each place the pointer can show (``place 0`` the leftmost
square), then over all. A place whose square the agent keeps is answered right on nearly every episode; one it
lost, at chance (1 / colours). ``kept``: the places answered above chance, each counted by how far from chance
to always right it is, (p - 1/colours) / (1 - 1/colours) clipped to [0, 1], summed: 3 for an agent that keeps
all three squares, 2 for one that keeps two (whose success overall is 0.75 with 4 colours).
"""

from __future__ import annotations

import os
import sys

import numpy as np

from r2ac.bench.common import (parse_played_runs, play_lockstep, played_policies, played_runs_parser,
                               print_markdown_and_csv)

ENV_ID = "what_was_there:WhatWasThere"


def answers_by_place(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` WhatWasThere envs of
    ``options`` in lockstep; returns (right answers per place [items], episodes per place [items])."""
    from examples.what_was_there import WhatWasThere

    if episodes < 1 or num_envs < 1:
        raise ValueError(f"episodes and num_envs must be >= 1, got {episodes} and {num_envs}")
    envs = [WhatWasThere(**options) for _ in range(num_envs)]
    items = envs[0].items
    right, seen = np.zeros(items), np.zeros(items, int)
    done, rnd = 0, 0
    while done < episodes:
        n = min(num_envs, episodes - done)
        reward = play_lockstep(policy, envs[:n], envs[0].span + 1, seed + rnd * num_envs)
        for env, paid in zip(envs[:n], reward):
            seen[env.cued] += 1
            right[env.cued] += paid
        done += n
        rnd += 1
    return right, seen


def kept(shares, colours: int) -> float:
    """The places answered above chance, each by how far from chance (1 / colours) to 1 its share lies."""
    chance = 1.0 / colours
    return float(np.clip((np.asarray(shares, float) - chance) / (1.0 - chance), 0.0, 1.0).sum())


def row_for(name: str, step: int, span: int, colours: int, right, seen) -> dict:
    shares = right / np.maximum(seen, 1)
    row = {"run": name, "step": step, "span": span, "episodes": int(seen.sum())}
    row.update({f"place {i}": float(p) for i, p in enumerate(shares)})
    row["all"] = float(right.sum() / seen.sum())
    row["kept"] = kept(shares, colours)
    return row


def main(argv: list[str] | None = None) -> int:
    p = played_runs_parser(__doc__, episodes=3000)
    a = parse_played_runs(p, argv, "what_was_there_answers")
    rows = []
    for name, policy in played_policies(a):
        if not str(policy.config.env.id).endswith(ENV_ID):
            raise ValueError(f"{name} trained on {policy.config.env.id}, not examples/what_was_there.py's "
                             "WhatWasThere")
        from examples.what_was_there import WhatWasThere

        options = dict(policy.config.env.options or {})
        env = WhatWasThere(**options)
        counts = answers_by_place(policy, options, a.episodes, seed=a.seed)
        rows.append(row_for(name, policy.step, env.span, env.n_colours, *counts))
    columns = list(rows[0]) if rows else []
    print_markdown_and_csv(rows, columns, a.out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
