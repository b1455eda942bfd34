"""Whether a trained agent accumulates the evidence of examples/more_flashes.py's task: its answers split by the
number of flashes and the margin between the two sides, and on the episodes where the last flash (or the first)
was on the side with fewer (docs/results.md, "Which side flashed more").

    python tools/more_flashes_answers.py RUN_DIR [RUN_DIR ...] [--episodes 3000] [--seed S] [--out CSV]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span and
options). The share answered right is given per kind of episode, named by the count and the split of the
flashes between the two sides ("3: 2-1" is three flashes, two on one side and one on the other). ``last
outvoted``: the share right on the episodes whose last flash was on the side with fewer flashes, where an agent
that keeps only the last flash's side is always wrong; ``first outvoted`` the same for the first flash. ``all in
the first half``: the share right on the episodes whose every flash came in the first half of the span, at least
``span / 2`` frames before the query, where only a memory that lasts that long can answer. An agent that counts
and keeps the count is right on every kind; one that keeps one flash's side, on every episode with one flash and
on none where its flash was outvoted; one that keeps nothing, at chance (1/2) on all.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from r2ac.bench.common import answers_tool_main, share_right as share, tally_answers

ENV_ID = "more_flashes:MoreFlashes"
KINDS = ("1", "3: 2-1", "3: 3-0", "5: 3-2", "5: 4-1", "5: 5-0")  # for max_count 5


def split_of(flashes: dict) -> tuple[int, int, bool, bool]:
    """The kind of an episode with ``flashes`` (frame -> side): (count, flashes on the side with more, whether the
    last flash was outvoted, whether the first was)."""
    sides = [flashes[t] for t in sorted(flashes)]
    more = int(2 * sum(sides) > len(sides))
    return len(sides), sides.count(more), sides[-1] != more, sides[0] != more


def group_of(flashes: dict, span: int) -> int:
    """The episode's group: 8 times its kind's index in KINDS, plus 4 if every flash came in the first half of the
    ``span`` frames, plus 2 if the last flash was outvoted, plus 1 if the first was."""
    count, majority, last_out, first_out = split_of(flashes)
    kind = KINDS.index(f"{count}: {majority}-{count - majority}" if count > 1 else "1")
    early = 2 * max(flashes) < span
    return 8 * kind + 4 * early + 2 * last_out + first_out


def answers_by_group(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` MoreFlashes envs of
    ``options`` in lockstep; returns (right answers per group [48], episodes per group [48]), groups as in
    ``group_of``."""
    from examples.more_flashes import MoreFlashes

    if num_envs < 1:
        raise ValueError(f"episodes and num_envs must be >= 1, got {episodes} and {num_envs}")
    envs = [MoreFlashes(**options) for _ in range(num_envs)]
    if envs[0].max_count > 5:
        raise ValueError(f"the kinds of episode are for max_count <= 5, got {envs[0].max_count}")
    return tally_answers(policy, envs, episodes, seed, lambda env: group_of(env.flashes, env.span),
                         8 * len(KINDS))


def row_for(name: str, step: int, span: int, right, seen) -> dict:
    shape = (len(KINDS), 2, 2, 2)  # kind, all in the first half, last outvoted, first outvoted
    right, seen = np.asarray(right, float).reshape(shape), np.asarray(seen).reshape(shape)
    row = {"run": name, "step": step, "span": span, "episodes": int(seen.sum())}
    row.update({kind: share(right[k], seen[k]) for k, kind in enumerate(KINDS)})
    row["all"] = share(right, seen)
    row["last outvoted"] = share(right[:, :, 1], seen[:, :, 1])
    row["first outvoted"] = share(right[:, :, :, 1], seen[:, :, :, 1])
    row["all in the first half"] = share(right[:, 1], seen[:, 1])
    return row


def played_row(name: str, policy, options: dict, episodes: int, seed: int) -> dict:
    from examples.more_flashes import MoreFlashes

    counts = answers_by_group(policy, options, episodes, seed=seed)
    return row_for(name, policy.step, MoreFlashes(**options).span, *counts)


def main(argv: list[str] | None = None) -> int:
    return answers_tool_main(__doc__, argv, "more_flashes_answers", ENV_ID, "examples/more_flashes.py's MoreFlashes",
                             played_row)


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
