"""How large a trained core's input weights are, per kind of input, against the same network at its start
(docs/results.md, "A cue one frame later").

    python tools/input_weights.py RUN_DIR [RUN_DIR ...] [--out CSV]

For each run: its config and newest checkpoint, and the network the run started from (rebuilt from its
config and seed, as ``tools/cue_memory.py --initial`` does). The core input x(t) is laid out as the network
builds it: the stem's features (with ``stem: none`` and centred frames, the centred pixels), then the frame
centres (and spreads), the previous reward, the previous action (one-hot) and the episode-start flag, each
where the config has it. For every input weight matrix of the core (a 2-dim parameter with one column per
input: the eLSTM's F, Z, O, the RTU's W1, W2, ...) the table gives the root mean square of its columns of
each kind, trained and initial. A kind whose gradient is only noise (the pixels of noise frames) shows
as weights that grew under Adam without carrying anything. Where frames are centred, the frame centres'
columns are also given on the axes of ``model.centre_basis=contrasts`` whatever basis the run fed them in
(the weights times the rotation's transpose): "centres: grey axis" (a grey frame, noise or blank, moves the
input along it alone) and "centres: contrast axes" (where a colour lies). A run is named by its bench
directory and its own (``BENCH/RUN``).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

from r2ac.agent.inputs import helmert_basis
from r2ac.api import initial_net, load_checkpoint_for, policy_from_checkpoint
from r2ac.bench.common import print_markdown_and_csv
from r2ac.config import load_config

FIELDS = ("run", "step", "matrix", "kind", "columns", "rms_initial", "rms_trained", "ratio")


def input_kinds(net) -> list[tuple[str, int, int]]:
    """(kind, first column, end column) of the core input's parts, in the order the network concatenates
    them (``AgentNet.scaled_features`` then ``inputs.core_input``)."""
    kinds, at = [], 0
    extremes = 2 * net.frame_channels if getattr(net, "frame_extremes", False) else 0
    centroids = 2 * net.frame_channels if getattr(net, "frame_centroids", False) else 0
    centres = net.feature_size - net.stem.output_size - extremes - centroids
    for kind, width in (("features" if not net.centre_frames else "centred pixels", net.stem.output_size),
                        ("frame centres", centres), ("frame extremes", extremes), ("frame centroids", centroids),
                        ("reward", int(net.reward_input)),
                        ("action", net.num_actions if net.prev_action_input else 0),
                        ("episode start", int(net.episode_start_input))):
        if width:
            kinds.append((kind, at, at + width))
            at += width
    if at != net.core_input_size:
        raise ValueError(f"input_weights: the parts add up to {at} columns, the core takes {net.core_input_size}")
    return kinds


def centre_axes(net, w: torch.Tensor, a: int, b: int) -> list[tuple[str, torch.Tensor]]:
    """The frame centres' columns ``w[:, a:b]`` on the grey axis and on the contrast axes of each group of C
    (``inputs.helmert_basis``), whichever basis the network feeds them in."""
    C = net.frame_channels
    if not C or (b - a) % C:
        return []
    cols = w[:, a:b].unflatten(-1, ((b - a) // C, C))
    if getattr(net, "centre_basis", "channels") != "contrasts":
        cols = cols @ helmert_basis(C).to(w.dtype).T  # W x = (W H^T)(H x): the weights on the rotated inputs
    return [("centres: grey axis", cols[..., :1]), ("centres: contrast axes", cols[..., 1:])]


def rows_for(name: str, step: int, trained, initial) -> list[dict]:
    """One row per input matrix of the core and kind of input."""
    rows = []
    width = trained.core_input_size
    start = dict(initial.core.named_parameters())

    def rms(v: torch.Tensor) -> float:
        return float(v.detach().pow(2).mean().sqrt())

    for pname, w in trained.core.named_parameters():
        if w.dim() != 2 or w.shape[-1] != width:
            continue
        w0 = start[pname]
        for kind, a, b in input_kinds(trained):
            pairs = [(kind, b - a, rms(w0[:, a:b]), rms(w[:, a:b]))]
            if kind == "frame centres":
                pairs += [(k, v.shape[-1] * v.shape[-2], rms(v0), rms(v))
                          for (k, v), (_, v0) in zip(centre_axes(trained, w, a, b), centre_axes(initial, w0, a, b))]
            for k, columns, before, after in pairs:
                rows.append({"run": name, "step": step, "matrix": pname, "kind": k, "columns": columns,
                             "rms_initial": before, "rms_trained": after,
                             "ratio": after / before if before else float("nan")})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--out", default="", help="also write the table as CSV here")
    a = p.parse_args(argv)
    rows = []
    for run in a.runs:
        cfg = load_config(os.path.join(run, "config.yaml"))
        policy = policy_from_checkpoint(load_checkpoint_for(run), cfg)
        path = os.path.normpath(run)
        name = f"{os.path.basename(os.path.dirname(os.path.dirname(path)))}/{os.path.basename(path)}"
        rows += rows_for(name, policy.step, policy.net, initial_net(cfg, policy.net))
    print_markdown_and_csv(rows, FIELDS, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
