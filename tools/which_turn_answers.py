"""What a trained agent keeps of the order on examples/which_turn.py's task: its answers split by the turn the
asked colour took (docs/results.md, "Which turn a colour took").

    python tools/which_turn_answers.py RUN_DIR [RUN_DIR ...] [--episodes 3000] [--seed S] [--out CSV] [--probe]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span and
options). The share answered right is given for each turn asked for (first, second, third). An agent that keeps
the first colour and the last is right on all three, the second by elimination. One that keeps only the first is
right on the first and at 1/2 on the others; one that keeps only the last, on the third and at 1/2 on the others;
one that keeps no order, at chance (1/3) on all. ``ends``: the share right on the first and the third together.

``--probe`` says what the agent's recurrent state held at the query (``r2ac.bench.probe``): linear probes, fit on
the state after the query step of every other episode and scored on the rest, read the colour of the first,
the second and the third light (``first read`` .. ``third read``; chance 1/3, or 1/2 for the two colours left by a
kept one) and the right answer (``turn read``; for a trained run also ``turn read from outputs``, from the core's
output at the query, what the heads read). A colour the probe reads where the agent answers its turn wrongly was
kept, but not where the agent's linear heads could use it. Give it 2000 episodes or more.
"""

from __future__ import annotations

import itertools
import os
import sys

import numpy as np

from r2ac.bench.common import answers_tool_main, probed_row, share_right, tally_answers
from r2ac.bench.probe import probe_right

ENV_ID = "which_turn:WhichTurn"
TURNS = ("first", "second", "third")
ORDERS = tuple(itertools.permutations(range(3)))  # the six orders of the three colours


def group_of(order, turn: int) -> int:
    """The episode's group: 3 times the index of its ``order`` of colours in ORDERS, plus the ``turn`` asked for."""
    return 3 * ORDERS.index(tuple(order)) + int(turn)


def answers_by_turn(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0,
                    record: dict | None = None) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` WhichTurn envs of
    ``options`` in lockstep; returns (right answers per turn asked [3], episodes per turn asked [3]) (``record``:
    each episode's group as in ``group_of``, answer and state, as ``tally_answers`` fills it)."""
    from examples.which_turn import WhichTurn

    envs = [WhichTurn(**options) for _ in range(num_envs)]
    right, seen = tally_answers(policy, envs, episodes, seed, lambda env: group_of(env.order, env.turn),
                                3 * len(ORDERS), record)
    return right.reshape(len(ORDERS), 3).sum(0), seen.reshape(len(ORDERS), 3).sum(0)


def probe_columns(record: dict) -> dict:
    """What the state at the query held (``--probe``): the share of held-out episodes (every other one) whose
    first, second and third colour, and whose right answer, a linear probe fit on the others read right."""
    orders = np.array(ORDERS)[record["group"] // 3]
    held_out = np.arange(len(orders)) % 2 == 1
    cols = {f"{turn} read": float(probe_right(record["state"], orders[:, k], 3, held_out).mean())
            for k, turn in enumerate(TURNS)}
    cols["turn read"] = float(probe_right(record["state"], record["group"] % 3, 3, held_out).mean())
    if "output" in record:  # the heads' input at the query (a policy with act_with_outputs)
        cols["turn read from outputs"] = float(probe_right(record["output"], record["group"] % 3, 3, held_out).mean())
    return cols


def row_for(name: str, step: int, span: int, right, seen) -> dict:
    row = {"run": name, "step": step, "span": span, "episodes": int(seen.sum())}
    row.update({turn: share_right(right[k:k + 1], seen[k:k + 1]) for k, turn in enumerate(TURNS)})
    row["all"] = share_right(right, seen)
    row["ends"] = share_right(right[[0, 2]], seen[[0, 2]])
    return row


def played_row(name: str, policy, options: dict, episodes: int, seed: int, probe: bool = False) -> dict:
    from examples.which_turn import WhichTurn

    span = WhichTurn(**options).span
    return probed_row(episodes, probe, 24,
                      lambda record: row_for(name, policy.step, span,
                                             *answers_by_turn(policy, options, episodes, seed=seed, record=record)),
                      probe_columns)


def main(argv: list[str] | None = None) -> int:
    return answers_tool_main(__doc__, argv, "which_turn_answers", ENV_ID, "examples/which_turn.py's WhichTurn",
                             played_row, switches={"--probe": "also read the three colours in order and the answer "
                                                   "from the agent's state at the query with linear probes"})


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
