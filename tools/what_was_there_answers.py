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

from r2ac.bench.common import answers_tool_main, tally_answers

ENV_ID = "what_was_there:WhatWasThere"


def answers_by_place(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` WhatWasThere envs of
    ``options`` in lockstep; returns (right answers per place [items], episodes per place [items])."""
    from examples.what_was_there import WhatWasThere

    if num_envs < 1:
        raise ValueError(f"episodes and num_envs must be >= 1, got {episodes} and {num_envs}")
    envs = [WhatWasThere(**options) for _ in range(num_envs)]
    return tally_answers(policy, envs, episodes, seed, lambda env: env.cued, envs[0].items)


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


def played_row(name: str, policy, options: dict, episodes: int, seed: int) -> dict:
    from examples.what_was_there import WhatWasThere

    env = WhatWasThere(**options)
    counts = answers_by_place(policy, options, episodes, seed=seed)
    return row_for(name, policy.step, env.span, env.n_colours, *counts)


def main(argv: list[str] | None = None) -> int:
    return answers_tool_main(__doc__, argv, "what_was_there_answers", ENV_ID,
                             "examples/what_was_there.py's WhatWasThere", played_row)


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
