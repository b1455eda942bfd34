"""Whether a trained agent looks on examples/look_first.py's task, when, and what it keeps of what it saw: its
answers split by whether it looked (docs/results.md, "Look first").

    python tools/look_first_answers.py RUN_DIR [RUN_DIR ...] [--episodes 3000] [--seed S] [--out CSV] [--probe]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span and
options). ``looked`` is the share of episodes in which the agent looked on a frame of the window (so was shown the
colour), ``looked at 0`` the share in which it looked on the first frame; ``right, looked`` and ``right, blind``
are the shares answered right of the episodes in which it looked and of those in which it did not (1/3 is a
guess), ``all`` of every episode. An agent that looks and keeps what it saw is right on ``looked`` and near 1 on
``right, looked``; one that looks and keeps nothing guesses on both; one that keeps the colour but looks only by
chance has ``looked`` near 1 - (3/4)^window.

``--probe`` says what the agent's recurrent state held at the query (``r2ac.bench.probe``): linear probes, fit on
the state after the query step of every other episode and scored on the rest, read whether it looked (``look
read``, chance 1/2 where it looked on half) and, from the episodes in which it looked, the colour (``colour read,
looked``, chance 1/3; for a trained run also ``colour read from outputs, looked``, from the core's output at the
query, what the heads read).
"""

from __future__ import annotations

import os
import sys

import numpy as np

from r2ac.bench.common import answers_tool_main, probed_row, share_right, tally_answers
from r2ac.bench.probe import probe_right

ENV_ID = "look_first:LookFirst"
COLOURS = 3


def group_of(looked_at: int, colour: int) -> int:
    """The episode's group: 3 times (1 + the frame it first looked on, -1 where it did not look) plus its colour."""
    return COLOURS * (int(looked_at) + 1) + int(colour)


def answers_by_look(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0,
                    record: dict | None = None) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` LookFirst envs of
    ``options`` in lockstep; returns (right answers [window + 1], episodes [window + 1]), index 0 for the episodes
    in which it did not look and 1 + t for those in which it first looked on frame t (``record``: each episode's
    group as in ``group_of``, answer and state, as ``tally_answers`` fills it)."""
    from examples.look_first import LookFirst

    envs = [LookFirst(**options) for _ in range(num_envs)]
    groups = COLOURS * (envs[0].window + 1) if envs else COLOURS
    right, seen = tally_answers(policy, envs, episodes, seed, lambda env: group_of(env.looked_at, env.colour),
                                groups, record)
    return right.reshape(-1, COLOURS).sum(1), seen.reshape(-1, COLOURS).sum(1)


def probe_columns(record: dict) -> dict:
    """What the state at the query held (``--probe``): the share of held-out episodes (every other one) for which a
    linear probe fit on the others read whether the agent looked; of the episodes in which it looked, the share
    whose colour a probe read (from the state, and from the heads' input where the policy gives it); nan where
    too few episodes of a kind were played to fit a probe (fewer than 24, or all of one kind)."""
    group = record["group"]
    looked, colour = group >= COLOURS, group % COLOURS
    held_out = np.arange(group.size) % 2 == 1
    nan = float("nan")
    cols = {"look read": float(probe_right(record["state"], looked.astype(int), 2, held_out).mean())
            if 0 < looked.sum() < looked.size else nan}
    sources = [("colour read, looked", "state")]
    if "output" in record:  # the heads' input at the query (a policy with act_with_outputs)
        sources.append(("colour read from outputs, looked", "output"))
    for name, key in sources:
        cols[name] = nan
        if looked.sum() >= 24:
            seen = np.arange(looked.sum()) % 2 == 1
            cols[name] = float(probe_right(record[key][looked], colour[looked], COLOURS, seen).mean())
    return cols


def row_for(name: str, step: int, span: int, right, seen) -> dict:
    """A run's row from ``answers_by_look``'s counts."""
    total = seen.sum()
    return {"run": name, "step": step, "span": span, "episodes": int(total),
            "looked": float(seen[1:].sum() / total) if total else float("nan"),
            "looked at 0": float(seen[1] / total) if total and seen.size > 1 else float("nan"),
            "right, looked": share_right(right[1:], seen[1:]), "right, blind": share_right(right[:1], seen[:1]),
            "all": share_right(right, seen)}


def played_row(name: str, policy, options: dict, episodes: int, seed: int, probe: bool = False) -> dict:
    from examples.look_first import LookFirst

    span = LookFirst(**options).span
    return probed_row(episodes, probe, 24,
                      lambda record: row_for(name, policy.step, span,
                                             *answers_by_look(policy, options, episodes, seed=seed, record=record)),
                      probe_columns)


def main(argv: list[str] | None = None) -> int:
    return answers_tool_main(__doc__, argv, "look_first_answers", ENV_ID, "examples/look_first.py's LookFirst",
                             played_row, switches={"--probe": "also read whether the agent looked, and the colour "
                                                   "it saw, from its state at the query with linear probes"})


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
