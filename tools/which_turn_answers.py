"""What a trained agent keeps of the order on examples/which_turn.py's task: its answers split by the turn the
asked colour took (docs/results.md, "Which turn a colour took").

    python tools/which_turn_answers.py RUN_DIR [RUN_DIR ...] [--episodes 3000] [--seed S] [--out CSV]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span and
options). The share answered right is given for each turn asked for (first, second, third). An agent that keeps
the first colour and the last is right on all three, the second by elimination. One that keeps only the first is
right on the first and at 1/2 on the others; one that keeps only the last, on the third and at 1/2 on the others;
one that keeps no order, at chance (1/3) on all. ``ends``: the share right on the first and the third together.
"""

from __future__ import annotations

import os
import sys

from r2ac.bench.common import answers_tool_main, share_right, tally_answers

ENV_ID = "which_turn:WhichTurn"
TURNS = ("first", "second", "third")


def answers_by_turn(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` WhichTurn envs of
    ``options`` in lockstep; returns (right answers per turn asked [3], episodes per turn asked [3])."""
    from examples.which_turn import WhichTurn

    envs = [WhichTurn(**options) for _ in range(num_envs)]
    return tally_answers(policy, envs, episodes, seed, lambda env: env.turn, len(TURNS))


def row_for(name: str, step: int, span: int, right, seen) -> dict:
    row = {"run": name, "step": step, "span": span, "episodes": int(seen.sum())}
    row.update({turn: share_right(right[k:k + 1], seen[k:k + 1]) for k, turn in enumerate(TURNS)})
    row["all"] = share_right(right, seen)
    row["ends"] = share_right(right[[0, 2]], seen[[0, 2]])
    return row


def played_row(name: str, policy, options: dict, episodes: int, seed: int) -> dict:
    from examples.which_turn import WhichTurn

    counts = answers_by_turn(policy, options, episodes, seed=seed)
    return row_for(name, policy.step, WhichTurn(**options).span, *counts)


def main(argv: list[str] | None = None) -> int:
    return answers_tool_main(__doc__, argv, "which_turn_answers", ENV_ID, "examples/which_turn.py's WhichTurn",
                             played_row)


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
