"""Whether a read-out could learn odd or even from what a trained agent's heads read: read-outs trained on the
agent's fixed core outputs at the query (docs/results.md, "What the staircase keeps").

    python tools/odd_or_even_readout.py RUN_DIR [RUN_DIR ...] [--episodes 4000] [--heads linear,tanh64,own]
        [--updates 20000] [--batch 32] [--readout-seeds 0,1] [--supervised] [--seed S] [--out CSV]

Each run's newest checkpoint plays ``--episodes`` fresh episodes of examples/odd_or_even.py (its span and options);
what its heads read at the query (the core's output) is kept fixed. On three quarters of those episodes a read-out
of each kind in ``--heads`` learns to name the parity the way the agent's heads learn, from a reward of 1 for the
right answer (``r2ac.bench.probe.train_readout``: policy gradient with its own value as baseline, Adam with AMSGrad
at quickstart's 6e-3, quickstart's entropy floor and logit penalty, ``--batch`` episodes an update); the other
quarter scores its greedy answers. Kinds: ``linear`` (fresh heads like the agent's), ``tanhN`` (one shared tanh
layer of N units first, ``model.head_hidden=N``), either with ``ln-`` in front (the input layer-normalised,
``model.head_norm``), and ``own`` (the agent's own trained heads, then trained on). ``--supervised`` trains them
on the right answers instead (cross-entropy): whether the answer can be read from these outputs at all.

Read beside ``odd_or_even_answers.py --probe``: what the agent keeps, what its outputs let a read-out answer, and
whether the agent's way of learning its heads gets there from where the agent stopped.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from r2ac.bench.common import answers_tool_main, tally_answers
from r2ac.bench.probe import agent_heads, train_readout

ENV_ID = "odd_or_even:OddOrEven"
SHOWN = 6


def head_kind(text: str) -> tuple:
    """``linear``, ``tanhN``, either with ``ln-`` in front, or ``own`` (linear, from the agent's heads) -> (hidden
    units, layer-normalised input)."""
    if text == "own":
        return 0, False
    norm = text.startswith("ln-")
    kind = text[3:] if norm else text
    if kind == "linear":
        return 0, norm
    if kind.startswith("tanh") and kind[4:].isdigit() and int(kind[4:]) > 0:
        return int(kind[4:]), norm
    raise ValueError(f"a head kind is linear, tanhN (N >= 1 units), either with ln- in front, or own, got {text!r}")


def query_outputs(policy, options: dict, episodes: int, seed: int, num_envs: int = 100) -> tuple:
    """The policy's core outputs at the query of ``episodes`` fresh episodes [episodes, N] and their counts."""
    from examples.odd_or_even import OddOrEven

    envs = [OddOrEven(**options) for _ in range(num_envs)]
    record: dict = {}
    tally_answers(policy, envs, episodes, seed, lambda env: len(env.flashes) - 1, envs[0].max_count, record)
    if "output" not in record:
        raise ValueError("the policy gives no core outputs (r2ac.api.Policy.act_with_outputs)")
    return record["output"], record["group"] + 1


def readout_rows(name: str, outputs: np.ndarray, count: np.ndarray, heads: list, seeds: list, updates: int,
                 supervised: bool = False, batch: int = 32, own: tuple | None = None) -> list:
    """One row per head kind and seed: updates to 0.9 on the held-out quarter, the final share right, per count
    (``supervised``: read-outs trained on the right answers, ``train_readout``'s cross-entropy; ``batch`` episodes
    an update; ``own``: the agent's heads, ``agent_heads``, for the kind ``own``). The row's ``start`` is the
    share right before the first update (``own``: the agent's own greedy answers; fresh: about chance)."""
    held_out = np.arange(len(count)) % 4 == 3
    shown = count[held_out]
    rows = []
    for text in heads:
        hidden, norm = head_kind(text)
        for s in seeds:
            if text == "own" and own is None:
                raise ValueError("head kind own needs the agent's heads (own=agent_heads(net))")
            res = train_readout(outputs, count % 2, 2, held_out, hidden=hidden, norm=norm, updates=updates, seed=s,
                                supervised=supervised, batch=batch, initial=own if text == "own" else None)
            row = {"run": name, "head": text, "learning": "supervised" if supervised else "policy gradient",
                   "seed": s, "episodes": len(count), "batch": batch, "updates": updates, "start": res["start"],
                   "updates to 0.9": res["updates_to_0.9"] if res["updates_to_0.9"] is not None else float("nan"),
                   "final": res["curve"][-1][1]}
            row.update({str(k): float(res["right"][shown == k].mean()) if (shown == k).any() else float("nan")
                        for k in range(1, max(int(count.max()), SHOWN) + 1)})
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    def rows_of(name, policy, options, episodes, seed, supervised, heads, updates, readout_seeds, batch):
        kinds = [h for h in heads.split(",") if h]
        for h in kinds:
            head_kind(h)  # a bad kind is refused before any episode is played
        seeds = [int(s) for s in readout_seeds.split(",") if s]
        if updates < 1 or batch < 1 or not seeds or not kinds:
            raise ValueError(f"--updates and --batch must be >= 1 and --heads and --readout-seeds name one or more, "
                             f"got {updates}, {batch}, {heads!r}, {readout_seeds!r}")
        if episodes < 8:
            raise ValueError(f"give --episodes 8 or more (a quarter is held out), got {episodes}")
        outputs, count = query_outputs(policy, options, episodes, seed)
        own = agent_heads(policy.net) if "own" in kinds else None
        return readout_rows(name, outputs, count, kinds, seeds, updates, supervised, batch, own)

    arguments = {"--heads": {"default": "linear,tanh64", "help": "read-out kinds: linear, tanhN, ln-..."},
                 "--updates": {"type": int, "default": 20000, "help": "updates per read-out"},
                 "--readout-seeds": {"default": "0,1", "help": "one read-out of each kind per seed"},
                 "--batch": {"type": int, "default": 32, "help": "episodes an update"}}
    return answers_tool_main(__doc__, argv, "odd_or_even_readout", ENV_ID, "examples/odd_or_even.py's OddOrEven",
                             rows_of, episodes=4000, arguments=arguments, many_rows=True,
                             switches={"--supervised": "train the read-outs on the right answers (cross-entropy) "
                                                       "instead of by policy gradient on the reward"})


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())  # examples/ from the repository root, as r2ac's gym: ids find it
    sys.exit(main())
