"""Whether a trained agent writes over what it keeps on examples/last_light.py's task: its answers split by the
number of lights and by whether the first light had the last one's colour (docs/results.md, "The last of a few
lights").

    python tools/last_light_answers.py RUN_DIR [RUN_DIR ...] [--episodes 3000] [--seed S] [--out CSV]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span and
options). The share answered right is given for four kinds of episode: one light; two lights (their colours
differ); three whose first and last share a colour; three whose first and last differ. An agent that keeps the
last light is right on all four. One that keeps the first light and never writes over it is right on the first
and the third and wrong on the others; one that keeps nothing, at chance (1/3) on all. ``overwrites``: the
share right on the episodes whose first light differs from the last (two lights, or three with first and last
apart), where only a memory that was written over can answer.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from r2ac.bench.common import answers_tool_main, tally_answers

ENV_ID = "last_light:LastLight"
KINDS = ("1 light", "2 lights", "3, first = last", "3, first != last")


def kind_of(lights: dict) -> int:
    """The index in KINDS of an episode with ``lights`` (frame -> colour)."""
    colours = [lights[t] for t in sorted(lights)]
    if len(colours) < 3:
        return len(colours) - 1
    return 2 if colours[0] == colours[-1] else 3


def answers_by_kind(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` LastLight envs of
    ``options`` in lockstep; returns (right answers per kind [4], episodes per kind [4]), kinds as in KINDS."""
    from examples.last_light import LastLight

    if num_envs < 1:
        raise ValueError(f"episodes and num_envs must be >= 1, got {episodes} and {num_envs}")
    envs = [LastLight(**options) for _ in range(num_envs)]
    if envs[0].max_count > 3:
        raise ValueError(f"the kinds of episode are for max_count <= 3, got {envs[0].max_count}")
    return tally_answers(policy, envs, episodes, seed, lambda env: kind_of(env.lights), len(KINDS))


def row_for(name: str, step: int, span: int, right, seen) -> dict:
    shares = right / np.maximum(seen, 1)
    row = {"run": name, "step": step, "span": span, "episodes": int(seen.sum())}
    row.update({kind: float(p) for kind, p in zip(KINDS, shares)})
    row["all"] = float(right.sum() / seen.sum())
    apart = [1, 3]  # the first light's colour is not the answer
    row["overwrites"] = float(right[apart].sum() / max(seen[apart].sum(), 1))
    return row


def played_row(name: str, policy, options: dict, episodes: int, seed: int) -> dict:
    from examples.last_light import LastLight

    counts = answers_by_kind(policy, options, episodes, seed=seed)
    return row_for(name, policy.step, LastLight(**options).span, *counts)


def main(argv: list[str] | None = None) -> int:
    return answers_tool_main(__doc__, argv, "last_light_answers", ENV_ID, "examples/last_light.py's LastLight",
                             played_row)


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
