"""How hard full frames drive the eLSTM's keep gate: the pre-activation F x of the cue frames and of the
noise frames of the delayed cue, for trained runs of ``r2ac bench memory`` (docs/results.md, "Input scale").

    python tools/gate_drive.py RUN_DIR [RUN_DIR ...] [--out CSV] [--set key=value ...]

For each run: its config and latest checkpoint; 3000 cue frames (t = 0) and 3000 noise frames of its task
(``env.options`` with ``distractors: 1``), fed as the run fed them (``model.input_scale``,
``model.centre_frames``, ``model.frame_centre``); then, per hidden unit, the median over units of |F x| on cue
frames, of |mean F x| over noise frames, and of the standard deviation of F x over noise frames; and the
output gate's drive by the (white) query frame, the median over units of |O x| and the fraction of units where
it exceeds 10 (the gate is then shut or open whatever the cell holds). A sigmoid's slope at a pre-activation
of 10 is 5e-5. The same for the run's config freshly initialised (torch seed 0), to compare with. ``--set``
overrides the runs' configs (runs made before ``model.input_scale`` existed fed pixels unscaled: ``--set
model.input_scale=1``).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys

import torch

from r2ac.agent.nets import AgentNet
from r2ac.checkpoint import load_latest_checkpoint
from r2ac.config import load_config
from r2ac.envs.recall import CueVecEnv

FIELDS = ("run", "weights", "input_scale", "cue_abs_Fx", "noise_mean_abs_Fx", "noise_std_Fx", "query_abs_Ox",
          "query_frac_Ox_over_10")


def frames(options: dict, n: int = 3000) -> tuple[torch.Tensor, torch.Tensor]:
    """(cue frames, noise frames) of the delayed cue with these options, uint8 [n, C, H, W] each."""
    opts = {k: v for k, v in options.items() if k in ("span", "cues", "obs", "size")}
    env = CueVecEnv(n, 0, distractors=1.0, **{**opts, "span": max(int(opts.get("span", 1)), 1)})
    if env.obs != "pixels":
        raise SystemExit("gate_drive: the run's task has vector observations; this tool is for pixel frames")
    cue = torch.from_numpy(env.reset())
    noise = torch.from_numpy(env.step(torch.zeros(n, dtype=torch.int64).numpy())[0])
    return cue, noise


def drive(net: AgentNet, cue: torch.Tensor, noise: torch.Tensor) -> tuple[float, ...]:
    F = net.core.F.detach()[:, : net.feature_size]
    O = net.core.O.detach()[:, : net.feature_size]
    query = torch.full_like(cue[:1], 255)  # the query frame is white
    with torch.no_grad():
        pc = net.scaled_features(net.features(cue)) @ F.T
        pn = net.scaled_features(net.features(noise)) @ F.T
        pq = (net.scaled_features(net.features(query)) @ O.T)[0].abs()
    return (pc.abs().median(0).values.median().item(), pn.mean(0).abs().median().item(),
            pn.std(0).median().item(), pq.median().item(), (pq > 10).float().mean().item())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--out", default="", help="also write the table as CSV here")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides of the runs' configs")
    a = p.parse_args(argv)
    rows = []
    for run in a.runs:
        cfg = load_config(os.path.join(run, "config.yaml"), a.set)
        if cfg.env.id != "cue" or cfg.model.core != "elstm" or cfg.model.stem != "none":
            raise SystemExit(f"gate_drive: {run} is not an eLSTM run on the delayed cue with stem none")
        cue, noise = frames(dict(cfg.env.options))
        torch.manual_seed(0)
        net = AgentNet.from_config(cfg.model, tuple(cue.shape[1:]), int(cfg.env.options.get("cues", 3)))
        ckpt = load_latest_checkpoint(run)
        if ckpt is None:
            raise SystemExit(f"gate_drive: no checkpoint in {run}")
        rows.append((os.path.basename(os.path.normpath(run)), "initial", net.input_scale, *drive(net, cue, noise)))
        net.load_state_dict(ckpt["model"])
        rows.append((rows[-1][0], "trained", net.input_scale, *drive(net, cue, noise)))
    w = csv.writer(sys.stdout)
    print("| run | weights | input scale | median abs F x, cue frame | median abs mean F x, noise frames "
          "| median std F x, noise frames | median abs O x, query frame | units with abs O x > 10 |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print("| " + " | ".join([r[0], r[1], f"{r[2]:g}"] + [f"{v:.2f}" for v in r[3:]]) + " |")
    if a.out:
        with open(a.out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(FIELDS)
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
