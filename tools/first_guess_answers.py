"""What a trained agent does on examples/first_guess.py's task: its first guesses, and its answers split by what
the hint said (docs/results.md, "A first guess and a hint").

    python tools/first_guess_answers.py RUN_DIR [RUN_DIR ...] [--episodes 3000] [--seed S] [--out CSV] [--probe]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span and
options). ``first guess 0`` .. ``2``: the share of episodes whose first guess was that door (1/3 each for a guess
at random; near 1 on one door for an agent that always guesses the same). ``after a right guess``: the share
answered right where the hint said the first guess was right (green); ``after a wrong guess``: where it said the
door was one or two on (red, blue). An agent that keeps its guess and the hint is right on both; one that keeps
the hint but not its guess is right after a right guess only if it then names its usual first guess, and at 1/3
after a wrong one unless its first guess is always the same door.

``--probe`` says what the agent's recurrent state held at the query (``r2ac.bench.probe``): linear probes, fit on
the state after the query step of every other episode and scored on the rest, read the right door (``door
read``), the first guess (``guess read``) and the hint (``hint read``; chance 1/3 each); for a trained run also
``door read from outputs``, from the core's output at the query, what the heads read. Give it 2000 episodes or
more.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from r2ac.bench.common import answers_tool_main, probed_row, share_right, tally_answers
from r2ac.bench.probe import probe_right

ENV_ID = "first_guess:FirstGuess"
DOORS = 3


def group_of(guess: int, hint: int) -> int:
    """The episode's group: ``DOORS * guess + hint``."""
    return DOORS * int(guess) + int(hint)


def decode(groups) -> tuple:
    """The first guesses, the hints and the right doors of ``groups`` (``group_of``'s numbers), each [n]."""
    groups = np.asarray(groups, int)
    guess, hint = groups // DOORS, groups % DOORS
    return guess, hint, (guess + hint) % DOORS


def answers_by_group(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0,
                     record: dict | None = None) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` FirstGuess envs of
    ``options`` in lockstep; returns (right answers per group, episodes per group), the groups those of
    ``group_of`` (``record``: each episode's group, answer and state, as ``tally_answers`` fills it)."""
    from examples.first_guess import FirstGuess

    envs = [FirstGuess(**options) for _ in range(num_envs)]
    return tally_answers(policy, envs, episodes, seed, lambda env: group_of(env.guess, env.hint), DOORS * DOORS,
                         record)


def row_for(name: str, step: int, span: int, right, seen) -> dict:
    guess, hint, _ = decode(np.arange(len(seen)))
    row = {"run": name, "step": step, "span": span, "episodes": int(seen.sum())}
    for g in range(DOORS):
        row[f"first guess {g}"] = float(seen[guess == g].sum() / seen.sum())
    row["all"] = share_right(right, seen)
    row["after a right guess"] = share_right(right[hint == 0], seen[hint == 0])
    row["after a wrong guess"] = share_right(right[hint != 0], seen[hint != 0])
    return row


def probe_columns(record: dict) -> dict:
    """What the state at the query held (``--probe``): the share of held-out episodes (every other one) whose right
    door, first guess and hint a linear probe fit on the others read right."""
    guess, hint, door = decode(record["group"])
    held_out = np.arange(len(door)) % 2 == 1
    cols = {"door read": float(probe_right(record["state"], door, DOORS, held_out).mean()),
            "guess read": float(probe_right(record["state"], guess, DOORS, held_out).mean()),
            "hint read": float(probe_right(record["state"], hint, DOORS, held_out).mean())}
    if "output" in record:  # the heads' input at the query (a policy with act_with_outputs)
        cols["door read from outputs"] = float(probe_right(record["output"], door, DOORS, held_out).mean())
    return cols


def played_row(name: str, policy, options: dict, episodes: int, seed: int, probe: bool = False) -> dict:
    from examples.first_guess import FirstGuess

    span = FirstGuess(**options).span
    return probed_row(episodes, probe, 24,
                      lambda record: row_for(name, policy.step, span,
                                             *answers_by_group(policy, options, episodes, seed=seed, record=record)),
                      probe_columns)


def main(argv: list[str] | None = None) -> int:
    return answers_tool_main(__doc__, argv, "first_guess_answers", ENV_ID, "examples/first_guess.py's FirstGuess",
                             played_row, switches={"--probe": "also read the right door, the first guess and the "
                                                   "hint from the agent's state at the query with linear probes"})


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
