"""Where a delayed-cue agent loses the cue: is it written, is it kept, is it read? For runs of
``r2ac bench memory`` on the delayed cue (``cue-pixels``, ``cue-vector``, with or without noise frames) whose
core is the eLSTM (docs/results.md, "Where the distractor cue at 100x M stalls").

    python tools/cue_memory.py RUN_DIR [RUN_DIR ...] [--episodes N] [--out CSV] [--initial] [--set key=value ...]

For each run: its newest checkpoint (``--initial``: also the weights the run started from, its config
initialised after seeding torch with the run's seed, as the run did) plays
``--episodes`` fresh episodes of its task side by side, and we record

- ``decode_t0`` / ``decode_query``: how well the cue can be read from the cell state c, right after the cue frame
  (at whatever step the episode shows it: env option ``cue_delay``) and at the query frame: a least-squares
  linear read-out (one-hot targets, fitted on half the episodes, scored on the other half; chance 1 / cues).
  This is what the policy head could reach with ideal learning.
- ``policy``: how often the action at the query names the cue (sampled, as in training), ``greedy`` likewise.
- ``policy_by_cue`` / ``decode_by_cue``: the same two per cue ("cue 0 / cue 1 / ..."), and ``answers``: for each
  cue (rows, split by "|") the share of episodes whose sampled query action named each cue: a plateau at two
  cues of three shows which cue is lost and what the agent names instead.
- ``snr_best`` / ``snr_median``: per unit, the variance of c at the query between cues over its variance
  within a cue; the best unit and the median unit.
- ``write_cue`` / ``write_noise`` / ``write_blank``: the median over units of the write rate 1 - f on the cue
  frame, on noise frames and on blank frames (those before and after the cue; eLSTM: c(t) = f c(t-1) +
  (1 - f) z). Keeping the cue through noise needs write_noise far below write_cue.

``--set`` overrides the runs' configs (as in ``tools/gate_drive.py``).
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys

import numpy as np
import torch

from r2ac.api import Policy, initial_net, load_checkpoint_for, policy_from_checkpoint
from r2ac.bench.common import print_markdown_and_csv
from r2ac.config import load_config
from r2ac.envs.recall import CueVecEnv

FIELDS = ("run", "weights", "episodes", "decode_t0", "decode_query", "policy", "greedy", "policy_by_cue",
          "decode_by_cue", "answers", "snr_best", "snr_median", "write_cue", "write_noise", "write_blank")


def linear_readout(c: np.ndarray, cue: np.ndarray, cues: int) -> tuple[np.ndarray, np.ndarray]:
    """A least-squares linear read-out of ``cue`` [n] from ``c`` [n, N], fitted on the first half of the
    episodes: its guesses on the second half, and the true cues there."""
    n = len(cue) // 2
    X = np.concatenate([c, np.ones((len(c), 1))], 1)
    Y = np.eye(cues)[cue]
    W, *_ = np.linalg.lstsq(X[:n], Y[:n], rcond=None)
    return (X[n:] @ W).argmax(1), cue[n:]


def linear_decode(c: np.ndarray, cue: np.ndarray, cues: int) -> float:
    """Held-out accuracy of a least-squares linear read-out of ``cue`` [n] from ``c`` [n, N]."""
    guess, truth = linear_readout(c, cue, cues)
    return float((guess == truth).mean())


def answer_shares(cue: np.ndarray, answer: np.ndarray, cues: int) -> np.ndarray:
    """[cues, cues]: row k, the share of cue-k episodes whose answer named each cue (nan for a cue not dealt)."""
    counts = np.zeros((cues, cues))
    np.add.at(counts, (cue, answer), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return counts / counts.sum(1, keepdims=True)


def by_cue(shares: np.ndarray) -> str:
    """The diagonal of ``answer_shares``: each cue's share of right answers, "0.99/0.98/0.31"."""
    return "/".join(f"{v:.2f}" for v in np.diag(shares))


def rows_text(shares: np.ndarray) -> str:
    """``answer_shares`` as text, one cue's row after another: "0.99 0.01 0.00 | 0.00 0.98 0.02 | ..."."""
    return " | ".join(" ".join(f"{v:.2f}" for v in row) for row in shares)


def unit_snr(c: np.ndarray, cue: np.ndarray, cues: int) -> np.ndarray:
    """Per unit: variance of the per-cue means over the mean within-cue variance."""
    means = np.stack([c[cue == k].mean(0) for k in range(cues)])
    within = np.stack([c[cue == k].var(0) for k in range(cues)]).mean(0)
    return means.var(0) / np.maximum(within, 1e-12)


@torch.no_grad()
def probe(policy: Policy, options: dict, episodes: int, seed: int = 12345) -> dict:
    net = policy.net
    if getattr(net.core, "name", "") != "elstm":
        raise SystemExit("cue_memory: the run's core is not the eLSTM (the write rates read its keep gate)")
    accepted = inspect.signature(CueVecEnv).parameters  # every option of the run's env (cue_delay_min too)
    opts = {k: v for k, v in options.items() if k in accepted and k not in ("num_envs", "seed")}
    env = CueVecEnv(episodes, seed, **opts)
    cues = env.cues
    obs = env.reset()
    cue, cue_step, query_step = env.cue.copy(), env.cue_step.copy(), env.query_step.copy()
    state = policy.initial_state(episodes)
    writes = {"cue": [], "noise": [], "blank": []}
    c0 = np.zeros((episodes, net.core.hidden_size), dtype=np.float32)
    cq = np.zeros_like(c0)
    answer = np.zeros(episodes, dtype=np.int64)
    greedy_right = np.zeros(episodes, dtype=bool)
    reward = done = None
    for t in range(int(query_step.max()) + 1):  # each env's first episode, from its frame 0 to its query
        x = torch.as_tensor(obs)
        first = state.first.clone() if done is None else torch.as_tensor(done)
        feats = net.features(x.unsqueeze(0))[0]
        r = torch.zeros(episodes) if reward is None else torch.as_tensor(reward, dtype=torch.float32)
        xin = net.core_input(feats.unsqueeze(0), r.unsqueeze(0), state.action.unsqueeze(0), first.unsqueeze(0))[0]
        c_prev = state.core["c"] * (~first).to(xin.dtype)[:, None]
        f = torch.sigmoid(xin @ net.core.F.T + net.core.w_f * c_prev + net.core.b_f)
        at_cue = torch.as_tensor(t == cue_step)
        between = torch.as_tensor((t != cue_step) & (t < query_step))  # blank or noise frames of the episode
        if at_cue.any():
            writes["cue"].append((1 - f[at_cue]))
        if between.any():
            is_noise = x.reshape(episodes, -1).float().abs().sum(1) > 0
            for key, m in (("noise", between & is_noise), ("blank", between & ~is_noise)):
                if m.any():
                    writes[key].append((1 - f[m]).mean(0))  # per step: the mean over episodes
        action, state, logits = policy.act_with_logits(obs, state, reward=reward, done=done)
        c = state.core["c"].numpy()
        c0[t == cue_step] = c[t == cue_step]
        at_q = t == query_step
        cq[at_q] = c[at_q]
        answer[at_q] = np.asarray(action)[at_q]
        greedy_right[at_q] = (logits.argmax(-1).numpy() == cue)[at_q]
        obs, reward, done, _ = env.step(np.asarray(action))
    right, greedy_right = float((answer == cue).mean()), float(greedy_right.mean())
    shares = answer_shares(cue, answer, cues)
    guess, truth = linear_readout(cq, cue, cues)
    snr = unit_snr(cq, cue, cues)

    def med(key):  # cue: per unit the median over episodes; noise, blank: the mean over steps; then over units
        if not writes[key]:
            return float("nan")
        per_unit = torch.cat(writes[key]).median(0).values if key == "cue" else torch.stack(writes[key]).mean(0)
        return float(per_unit.median())

    return {"episodes": episodes, "decode_t0": linear_decode(c0, cue, cues),
            "decode_query": float((guess == truth).mean()), "policy": right, "greedy": greedy_right,
            "policy_by_cue": by_cue(shares), "decode_by_cue": by_cue(answer_shares(truth, guess, cues)),
            "answers": rows_text(shares),
            "snr_best": float(snr.max()), "snr_median": float(np.median(snr)),
            "write_cue": med("cue"), "write_noise": med("noise"), "write_blank": med("blank")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--episodes", type=int, default=1200)
    p.add_argument("--initial", action="store_true", help="also probe each run's config freshly initialised")
    p.add_argument("--out", default="", help="also write the table as CSV here")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides of the runs' configs")
    a = p.parse_args(argv)
    if a.episodes < 20:
        raise SystemExit("cue_memory: --episodes must be at least 20 (half fit the read-out, half score it)")
    rows = []
    for run in a.runs:
        cfg = load_config(os.path.join(run, "config.yaml"), a.set)
        if cfg.env.id != "cue":
            raise SystemExit(f"cue_memory: {run} is not a delayed-cue run (env.id {cfg.env.id!r})")
        policy = policy_from_checkpoint(load_checkpoint_for(run), cfg)
        name = os.path.basename(os.path.normpath(run))
        if a.initial:
            fresh = initial_net(cfg, policy.net)
            rows.append({"run": name, "weights": "initial",
                         **probe(Policy(fresh, cfg), dict(cfg.env.options), a.episodes)})
        rows.append({"run": name, "weights": f"step {policy.step}", **probe(policy, dict(cfg.env.options), a.episodes)})
    print_markdown_and_csv(rows, FIELDS, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
