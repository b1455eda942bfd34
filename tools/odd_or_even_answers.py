"""Whether a trained agent keeps the parity of examples/odd_or_even.py's flashes: its answers split by the number
of flashes and by whether they all came in the first half of the episode (docs/results.md, "Odd or even").

    python tools/odd_or_even_answers.py RUN_DIR [RUN_DIR ...] [--episodes 3000] [--seed S] [--out CSV] [--probe]

Each run's newest checkpoint plays ``--episodes`` episodes (sampled actions, fresh envs at the run's span and
options). The share answered right is given per number of flashes ("1" .. "6" for the default ``max_count``),
``odd`` and ``even`` over the odd and the even counts, and ``all in the first half`` over the episodes whose every
flash came at least ``span / 2`` frames before the query. Read side by side, the counts tell what the agent
keeps: one that keeps the parity (or the whole count) is right on every count; one that counts up to 3 and no
further, on 1-3 and on 5 (it says "odd" from the third flash on) and never on 4 or 6; one that says "odd" when it
saw any flash, on the odd counts only; one that keeps nothing, on half of every count.

``--probe`` says what the agent's recurrent state held at the query (``r2ac.bench.probe``): two linear probes,
fit on the state after the query step of every other episode and scored on the rest, read the number of flashes
(``count read 1`` .. ``count read 6``: the share of held-out episodes of that count whose count the probe read
right) and its parity (``parity read 1`` .. ``6``, and ``parity read`` over all). A count the probe reads and the
agent answers wrongly was kept, but not where the agent's linear heads could read its parity: its memory is not
what failed. Give it 2000 episodes or more (a probe of 6 classes fit on fewer reads less than the state holds).
"""

from __future__ import annotations

import os
import sys

import numpy as np

from r2ac.bench.common import answers_tool_main, probed_row, share_right as share, tally_answers
from r2ac.bench.probe import probe_right

ENV_ID = "odd_or_even:OddOrEven"
SHOWN = 6  # the default max_count


def group_of(flashes, span: int) -> int:
    """The episode's group: 2 times (the number of ``flashes`` - 1), plus 1 if every flash came in the first half of
    the ``span`` frames."""
    return 2 * (len(flashes) - 1) + int(2 * max(flashes) < span)


def answers_by_group(policy, options: dict, episodes: int, num_envs: int = 100, seed: int = 0,
                     record: dict | None = None) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (``r2ac.api.Policy``-like) on ``num_envs`` OddOrEven envs of
    ``options`` in lockstep; returns (right answers per group [2 max_count], episodes per group), groups as in
    ``group_of`` (``record``: each episode's group, answer and state, as ``tally_answers`` fills it)."""
    from examples.odd_or_even import OddOrEven

    envs = [OddOrEven(**options) for _ in range(num_envs)]
    groups = 2 * (envs[0].max_count if envs else 1)
    return tally_answers(policy, envs, episodes, seed, lambda env: group_of(env.flashes, env.span), groups, record)


def probe_columns(record: dict, max_count: int) -> dict:
    """What the state at the query held (``--probe``): the share of held-out episodes (every other one) of each
    count whose count, and whose parity, a linear probe fit on the others read right; ``parity read`` over all."""
    count = record["group"] // 2 + 1
    held_out = np.arange(len(count)) % 2 == 1
    counted = probe_right(record["state"], count - 1, max_count, held_out)
    parity = probe_right(record["state"], count % 2, 2, held_out)
    shown = count[held_out]
    cols = {}
    for name, right in (("count read", counted), ("parity read", parity)):
        for k in range(1, max(max_count, SHOWN) + 1):
            cols[f"{name} {k}"] = float(right[shown == k].mean()) if (shown == k).any() else float("nan")
    cols["parity read"] = float(parity.mean())
    return cols


def row_for(name: str, step: int, span: int, right, seen) -> dict:
    right, seen = np.asarray(right, float).reshape(-1, 2), np.asarray(seen).reshape(-1, 2)
    row = {"run": name, "step": step, "span": span, "episodes": int(seen.sum())}
    # counts 1 .. 6 at least, so that runs of a smaller max_count share the default's columns (nan where unplayed)
    row.update({str(k + 1): share(right[k], seen[k]) if k < len(seen) else float("nan")
                for k in range(max(len(seen), SHOWN))})
    row["all"] = share(right, seen)
    row["odd"], row["even"] = share(right[0::2], seen[0::2]), share(right[1::2], seen[1::2])
    row["all in the first half"] = share(right[:, 1], seen[:, 1])
    return row


def played_row(name: str, policy, options: dict, episodes: int, seed: int, probe: bool = False) -> dict:
    from examples.odd_or_even import OddOrEven

    env = OddOrEven(**options)
    return probed_row(episodes, probe, 4 * env.max_count,
                      lambda record: row_for(name, policy.step, env.span,
                                             *answers_by_group(policy, options, episodes, seed=seed, record=record)),
                      lambda record: probe_columns(record, env.max_count))


def main(argv: list[str] | None = None) -> int:
    return answers_tool_main(__doc__, argv, "odd_or_even_answers", ENV_ID, "examples/odd_or_even.py's OddOrEven",
                             played_row, switches={"--probe": "also read the count and its parity from the agent's "
                                                   "state at the query with linear probes"})


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
