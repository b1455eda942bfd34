"""What a trained agent keeps of the rule on examples/which_rule.py's task: its answers split by the rule the first
frame gave (docs/results.md, "The rule first").

    python tools/which_rule_answers.py RUN_DIR [RUN_DIR ...] [--episodes 3000] [--seed S] [--out CSV] [--probe]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span and
options). The share answered right is given for each rule: ``colour`` (the first frame was yellow: name the
query's colour) and ``place`` (magenta: name its place). An agent that keeps the rule and reads the query is right
on both; one that keeps no rule and always names the colour is right on ``colour`` and wrong on ``place`` (the two
answers never agree), and one that guesses between the two readings is at 1/2 on both.

``--probe`` says what the agent's recurrent state held at the query (``r2ac.bench.probe``): linear probes, fit on
the state after the query step of every other episode and scored on the rest, read the rule (``rule read``,
chance 1/2) and the right answer (``answer read``, chance 1/3; for a trained run also ``answer read from
outputs``, from the core's output at the query, what the heads read). A rule the probe reads where the agent
answers at 1/2 was kept, but not where the agent's linear heads could use it. The probe standardises each state
entry, so it reads a faint trace as well as a strong one; ``rule gap`` says how strong: the distance between the
two rules' mean states over the root-mean-square distance of the states from their overall mean (2 for a state
that is the rule one-hot and nothing else, 0 for a state that does not depend on the rule); ``rule gap shuffled``
is the same with the rules shuffled among the episodes (the median of 20 shuffles), the floor that sampling alone
gives (about 2 / sqrt(episodes)). Give it 2000 episodes or more.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from r2ac.bench.common import answers_tool_main, probed_row, share_right, tally_answers
from r2ac.bench.probe import probe_right

ENV_ID = "which_rule:WhichRule"
RULES = ("colour", "place")


def group_of(rule: int, answer: int) -> int:
    """The episode's group: 3 times its ``rule`` (0 colour, 1 place) plus its right ``answer`` (0, 1, 2)."""
    return 3 * int(rule) + int(answer)


def answers_by_rule(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0,
                    record: dict | None = None) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` WhichRule envs of
    ``options`` in lockstep; returns (right answers per rule [2], episodes per rule [2]) (``record``: each
    episode's group as in ``group_of``, answer and state, as ``tally_answers`` fills it)."""
    from examples.which_rule import WhichRule

    envs = [WhichRule(**options) for _ in range(num_envs)]
    right, seen = tally_answers(policy, envs, episodes, seed, lambda env: group_of(env.rule, env.answer), 6, record)
    return right.reshape(2, 3).sum(1), seen.reshape(2, 3).sum(1)


def rule_gap(state, rules) -> float:
    """The distance between the mean ``state`` [n, D] of the episodes of rule 0 and that of rule 1 (``rules`` [n])
    over the root-mean-square distance of the states from their overall mean; 0 where the states do not vary."""
    state, rules = np.asarray(state, np.float64), np.asarray(rules)
    gap = np.linalg.norm(state[rules == 0].mean(0) - state[rules == 1].mean(0))
    spread = np.sqrt(((state - state.mean(0)) ** 2).sum(1).mean())
    return float(gap / spread) if spread > 0 else 0.0


def shuffled_gap(state, rules, shuffles: int = 20, seed: int = 0) -> float:
    """The median ``rule_gap`` over ``shuffles`` random permutations of ``rules``: the gap of states that do not
    depend on the rule, at this many episodes."""
    rng = np.random.default_rng(seed)
    return float(np.median([rule_gap(state, rng.permutation(rules)) for _ in range(shuffles)]))


def probe_columns(record: dict) -> dict:
    """What the state at the query held (``--probe``): the share of held-out episodes (every other one) whose
    rule, and whose right answer, a linear probe fit on the others read right; the states' ``rule_gap``, and
    their ``shuffled_gap``."""
    held_out = np.arange(record["group"].size) % 2 == 1
    rules = record["group"] // 3
    cols = {"rule read": float(probe_right(record["state"], rules, 2, held_out).mean()),
            "rule gap": rule_gap(record["state"], rules), "rule gap shuffled": shuffled_gap(record["state"], rules),
            "answer read": float(probe_right(record["state"], record["group"] % 3, 3, held_out).mean())}
    if "output" in record:  # the heads' input at the query (a policy with act_with_outputs)
        cols["answer read from outputs"] = float(probe_right(record["output"], record["group"] % 3, 3,
                                                             held_out).mean())
    return cols


def row_for(name: str, step: int, span: int, right, seen) -> dict:
    row = {"run": name, "step": step, "span": span, "episodes": int(seen.sum())}
    row.update({rule: share_right(right[k:k + 1], seen[k:k + 1]) for k, rule in enumerate(RULES)})
    row["all"] = share_right(right, seen)
    return row


def played_row(name: str, policy, options: dict, episodes: int, seed: int, probe: bool = False) -> dict:
    from examples.which_rule import WhichRule

    span = WhichRule(**options).span
    return probed_row(episodes, probe, 24,
                      lambda record: row_for(name, policy.step, span,
                                             *answers_by_rule(policy, options, episodes, seed=seed, record=record)),
                      probe_columns)


def main(argv: list[str] | None = None) -> int:
    return answers_tool_main(__doc__, argv, "which_rule_answers", ENV_ID, "examples/which_rule.py's WhichRule",
                             played_row, switches={"--probe": "also read the rule and the answer from the agent's "
                                                   "state at the query with linear probes"})


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
