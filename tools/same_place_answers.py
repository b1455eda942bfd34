"""How a trained agent answers examples/same_place.py's test, by where the test spot lies from the sample
(docs/results.md, "Same place or not: an eighth task of a user's own").

    python tools/same_place_answers.py RUN_DIR [RUN_DIR ...] [--episodes 2000] [--out CSV]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span),
and the share answered right is split by the test quadrant's relation to the sample's: the same quadrant,
the other one of the same row (top or bottom half: only x differs), the other one of the same column (only y
differs), and the diagonal one (both differ). An agent that kept only the sample's x (left or right half) is
right on every test but one in the same column (same x, other y), which it takes for the same place: on 5/6
of the episodes.
"""

from __future__ import annotations

import argparse
import os
import sys


RELATIONS = ("same", "same row", "same column", "diagonal")
FIELDS = ("run", "step", "span", "episodes", *RELATIONS, "all")


def relation(sample: int, test: int) -> int:
    """0 same quadrant, 1 the same row's other one (x differs), 2 the same column's other one (y differs), 3 the
    diagonal one (quadrants numbered 0 top left, 1 top right, 2 bottom left, 3 bottom right)."""
    if sample == test:
        return 0
    if sample // 2 == test // 2:
        return 1
    return 2 if sample % 2 == test % 2 else 3


def answers_by_relation(policy, span: int, episodes: int, num_envs: int = 100, seed: int = 0) -> dict:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like: ``initial_state(n)``,
    ``act(obs, state, reward=, done=)``) on ``num_envs`` SamePlace envs in lockstep (every episode lasts
    ``span + 1`` steps); returns {relation: (right answers, episodes)}."""
    from examples.same_place import SamePlace

    from r2ac.bench.common import tally_answers

    if num_envs < 1:
        raise ValueError(f"episodes and num_envs must be >= 1, got {episodes} and {num_envs}")
    envs = [SamePlace(span=span) for _ in range(num_envs)]
    right, seen = tally_answers(policy, envs, episodes, seed, lambda env: relation(*env.quadrants), len(RELATIONS))
    return {name: (float(right[k]), int(seen[k])) for k, name in enumerate(RELATIONS)}


def row_for(name: str, step: int, span: int, counts: dict) -> dict:
    row = {"run": name, "step": step, "span": span, "episodes": sum(n for _, n in counts.values())}
    for rel, (r, n) in counts.items():
        row[rel] = r / n if n else float("nan")
    row["all"] = sum(r for r, _ in counts.values()) / row["episodes"]
    return row


def main(argv: list[str] | None = None) -> int:
    from r2ac.api import load
    from r2ac.bench.common import print_markdown_and_csv, run_labels

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--episodes", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0, help="the first episode's env seed")
    p.add_argument("--out", default="", help="also write the table as CSV here")
    a = p.parse_args(argv)
    rows = []
    for name, run in zip(run_labels(a.runs), a.runs):
        policy = load(run, seed=a.seed)
        if not str(policy.config.env.id).endswith("same_place:SamePlace"):
            raise ValueError(f"{run} trained on {policy.config.env.id}, not examples/same_place.py's SamePlace")
        span = int((policy.config.env.options or {}).get("span", 150))
        rows.append(row_for(name, policy.step, span, answers_by_relation(policy, span, a.episodes, seed=a.seed)))
    print_markdown_and_csv(rows, FIELDS, a.out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
