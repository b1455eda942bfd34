"""How well a trained agent tells the time of examples/how_long_ago.py's flash: its answers split by where in the
episode the flash came, in tenths of the span (docs/results.md, "How long ago the light flashed").

    python tools/how_long_ago_answers.py RUN_DIR [RUN_DIR ...] [--episodes 3000] [--seed S] [--out CSV]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span and
options). The share answered right is given for the flashes in each tenth of the span ("0-10%" the first tenth of
its frames, "90-100%" the last): read side by side, they show how sharp the agent's clock is, for an agent that
times the flash well is right far from the middle and near it alike, and one with a blurred clock is wrong mostly
in the tenths next to the middle (``near the middle``: 40-60%). ``last 10 frames``: the share right on the
flashes in the last 10 frames, which a segment of M = 10 holds together with the query, so TBPTT with that M
sees them there; ``early`` and ``late`` the shares on the two halves. An agent that keeps nothing is right on half
the episodes in every tenth; one that only sees a recent flash and says "early" otherwise, on every early
episode and on the late ones only in the last frames.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from r2ac.bench.common import answers_tool_main, share_right as share, tally_answers

ENV_ID = "how_long_ago:HowLongAgo"
TENTHS = tuple(f"{10 * k}-{10 * k + 10}%" for k in range(10))
RECENT = 10  # "last 10 frames": what a segment of M = 10 holds together with the query


def group_of(flash: int, span: int) -> int:
    """The episode's group: 2 times the tenth of the ``span`` frames the ``flash`` came in (0 .. 9), plus 1 if it
    came in the last RECENT frames."""
    return 2 * (10 * flash // span) + int(flash >= span - RECENT)


def answers_by_group(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` HowLongAgo envs of
    ``options`` in lockstep; returns (right answers per group [20], episodes per group [20]), groups as in
    ``group_of``."""
    from examples.how_long_ago import HowLongAgo

    envs = [HowLongAgo(**options) for _ in range(num_envs)]
    return tally_answers(policy, envs, episodes, seed, lambda env: group_of(env.flash, env.span), 20)


def row_for(name: str, step: int, span: int, right, seen) -> dict:
    right, seen = np.asarray(right, float).reshape(10, 2), np.asarray(seen).reshape(10, 2)
    row = {"run": name, "step": step, "span": span, "episodes": int(seen.sum())}
    row.update({tenth: share(right[k], seen[k]) for k, tenth in enumerate(TENTHS)})
    row["all"] = share(right, seen)
    row["early"], row["late"] = share(right[:5], seen[:5]), share(right[5:], seen[5:])
    row["near the middle"] = share(right[4:6], seen[4:6])
    row["last 10 frames"] = share(right[:, 1], seen[:, 1])
    return row


def played_row(name: str, policy, options: dict, episodes: int, seed: int) -> dict:
    from examples.how_long_ago import HowLongAgo

    counts = answers_by_group(policy, options, episodes, seed=seed)
    return row_for(name, policy.step, HowLongAgo(**options).span, *counts)


def main(argv: list[str] | None = None) -> int:
    return answers_tool_main(__doc__, argv, "how_long_ago_answers", ENV_ID, "examples/how_long_ago.py's HowLongAgo",
                             played_row)


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
