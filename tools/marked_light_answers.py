"""What a trained agent keeps on examples/marked_light.py's task: its answers split by where among the lights the
marked one came, and by whether a decoy had its colour (docs/results.md, "The marked light").

    python tools/marked_light_answers.py RUN_DIR [RUN_DIR ...] [--episodes 3000] [--seed S] [--out CSV] [--probe]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span and
options). ``mark 1 of 4`` .. ``mark 4 of 4``: the share answered right where the marked light was the first .. the
last of the episode's lights. An agent that keeps the marked light's colour is right on all of them; one that keeps
the first light's colour is right where the mark was first and on a third of the others (where a decoy first
happens to share the marked colour); one that keeps the last light's, the same the other way round; one that
keeps nothing, at 1/3 throughout. ``decoy of its colour`` and ``no decoy of its colour``: the share right where
some unmarked light had the marked light's colour, and where none had (a memory of the colour most lights had is
right far more often on the first).

``--probe`` says what the agent's recurrent state held at the query (``r2ac.bench.probe``): linear probes, fit on
the state after the query step of every other episode and scored on the rest, read the marked light's colour
(``marked read``), the first light's and the last light's (``first read``, ``last read``; chance 1/3 each); for
a trained run also ``marked read from outputs``, from the core's output at the query, what the heads read. Give it
2000 episodes or more.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from r2ac.bench.common import answers_tool_main, probed_row, share_right, tally_answers
from r2ac.bench.probe import probe_right

ENV_ID = "marked_light:MarkedLight"
COLOURS = 3


def group_of(colours, marked: int) -> int:
    """The episode's group: the lights' ``colours`` (0-2 each) read as a base-3 number, plus 3 ** len(colours)
    times the place of the ``marked`` light among them."""
    return int(sum(int(c) * COLOURS ** k for k, c in enumerate(colours))) + int(marked) * COLOURS ** len(colours)


def decode(groups, lights: int) -> tuple:
    """The lights' colours [n, lights] and the marked light's place [n] of ``groups`` (``group_of``'s numbers)."""
    groups = np.asarray(groups, int)
    per = COLOURS ** lights
    colours = np.stack([(groups % per) // COLOURS ** k % COLOURS for k in range(lights)], axis=1)
    return colours, groups // per


def answers_by_group(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0,
                     record: dict | None = None) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` MarkedLight envs of
    ``options`` in lockstep; returns (right answers per group, episodes per group), the groups those of
    ``group_of`` (``record``: each episode's group, answer and state, as ``tally_answers`` fills it)."""
    from examples.marked_light import MarkedLight

    envs = [MarkedLight(**options) for _ in range(num_envs)]
    lights = envs[0].lights
    return tally_answers(policy, envs, episodes, seed, lambda env: group_of(env.colours, env.marked),
                         COLOURS ** lights * lights, record)


def row_for(name: str, step: int, span: int, lights: int, right, seen) -> dict:
    colours, marked = decode(np.arange(len(seen)), lights)
    row = {"run": name, "step": step, "span": span, "episodes": int(seen.sum())}
    for k in range(lights):
        at = marked == k
        row[f"mark {k + 1} of {lights}"] = share_right(right[at], seen[at])
    row["all"] = share_right(right, seen)
    answer = colours[np.arange(len(marked)), marked]
    shared = ((colours == answer[:, None]).sum(1) > 1)
    row["decoy of its colour"] = share_right(right[shared], seen[shared])
    row["no decoy of its colour"] = share_right(right[~shared], seen[~shared])
    return row


def probe_columns(record: dict, lights: int) -> dict:
    """What the state at the query held (``--probe``): the share of held-out episodes (every other one) whose marked,
    first and last light's colour a linear probe fit on the others read right."""
    colours, marked = decode(record["group"], lights)
    answer = colours[np.arange(len(marked)), marked]
    held_out = np.arange(len(marked)) % 2 == 1
    cols = {"marked read": float(probe_right(record["state"], answer, COLOURS, held_out).mean()),
            "first read": float(probe_right(record["state"], colours[:, 0], COLOURS, held_out).mean()),
            "last read": float(probe_right(record["state"], colours[:, -1], COLOURS, held_out).mean())}
    if "output" in record:  # the heads' input at the query (a policy with act_with_outputs)
        cols["marked read from outputs"] = float(probe_right(record["output"], answer, COLOURS, held_out).mean())
    return cols


def played_row(name: str, policy, options: dict, episodes: int, seed: int, probe: bool = False) -> dict:
    from examples.marked_light import MarkedLight

    env = MarkedLight(**options)
    return probed_row(episodes, probe, 24,
                      lambda record: row_for(name, policy.step, env.span, env.lights,
                                             *answers_by_group(policy, options, episodes, seed=seed, record=record)),
                      lambda record: probe_columns(record, env.lights))


def main(argv: list[str] | None = None) -> int:
    return answers_tool_main(__doc__, argv, "marked_light_answers", ENV_ID, "examples/marked_light.py's MarkedLight",
                             played_row, switches={"--probe": "also read the marked, the first and the last light's "
                                                   "colour from the agent's state at the query with linear probes"})


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
