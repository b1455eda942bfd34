"""``r2ac bench tasks``: online learning (RTRL) against truncated and full BPTT on the papers' tasks,
at CPU scale. Each subcommand prints a table and writes ``tasks_<name>.csv`` and ``tasks_<name>.png`` to
``--out``.

    r2ac bench tasks copy      Irie et al. 2024, App. B.1 copy task, eLSTM: rtrl-online vs tbptt (k < l) vs bptt
    r2ac bench tasks copy-lru  Zucchet et al. 2023, Table 1: 4-layer LRU on the 20x7-bit copy task, gradient from
                               spatial backprop / 1-step truncated BPTT / the online rule / BPTT
    r2ac bench tasks listops   ListOps (generated locally), short run: rtrl-online vs bptt
    r2ac bench tasks parity    the parity of 1..max_count unmarked flashes over a span (the vector form of
                               examples/odd_or_even.py), supervised: core variants x learning modes x seeds
    r2ac bench tasks trace     online TD(lambda) on trace conditioning / patterning (Elelimy et al. 2024,
                               Javed et al. 2023):
                               columnar, ccn, rtu, elstm (RTRL) and lstm (T-BPTT) at a matched compute
                               budget per step (r2ac.online.budget)

Cores that are not registered in ``r2ac.cores.CORES`` (e.g. ``lru``, ``rtu`` before they are wired in) are
skipped with a message. ``--quick`` shrinks every run to a smoke test. Use one thread
(``--threads 1``, the default): these are small, step-by-step computations.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Dict, List, Optional

import numpy as np
import torch

from r2ac.bench.common import format_table, machine_description, write_csv
from r2ac.online import CoreUnavailable, SequenceLearner, TDLambda, build_model, fit, flops_per_step, require_core
from r2ac.online import run_stream, size_for_budget
from r2ac.tasks import (copy_b1, copy_patterns, flash_parity, listops_batch, oracle_predictions, trace_conditioning,
                        trace_patterning)


def _fmt_row(row: Dict) -> Dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}


def _save(out: str, name: str, rows: List[Dict], columns: List[str], curves: Dict[str, tuple], ylabel: str,
          xlabel: str, logy: bool = False, title: str = "") -> None:
    os.makedirs(out, exist_ok=True)
    write_csv(os.path.join(out, f"tasks_{name}.csv"), rows, columns)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({k.split("|")[0] for k in curves}) if any("|" in k for k in curves) else [""]
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 3.8), squeeze=False)
    for ax, g in zip(axes[0], groups):
        for label, (xs, ys) in curves.items():
            if g and not label.startswith(g + "|"):
                continue
            ax.plot(xs, ys, marker=".", label=label.split("|")[-1])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if logy:
            ax.set_yscale("log")
        ax.set_title(g or title)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, f"tasks_{name}.png"), dpi=110)
    plt.close(fig)
    print(f"\nwrote {out}/tasks_{name}.csv and {out}/tasks_{name}.png")


def _usable(core: str, learning: str | None) -> bool:
    """Whether ``core`` is registered (and has RTRL if ``learning == "rtrl"``); prints why not (the
    benchmark then skips that row)."""
    try:
        require_core(core, learning)
    except CoreUnavailable as e:
        print(f"  skip: {e}")
        return False
    return True


# -- copy (Irie et al. 2024, App. B.1) -------------------------------------------------------------------------------

COPY_COLUMNS = ["core", "mode", "k", "hidden", "l", "batches", "updates", "seconds", "train_loss", "eval_loss",
                "eval_acc", "eval_seq_acc", "eval_acc_at_l"]


def bench_copy(a) -> List[Dict]:
    rows, curves = [], {}
    eval_all = copy_b1(a.eval_batch, a.l, rng=10_000 + a.seed)
    eval_l = copy_b1(a.eval_batch, a.l, rng=20_000 + a.seed, min_length=a.l)
    for mode in a.modes:
        if not _usable(a.core, "rtrl" if mode.startswith("rtrl") else None):
            continue
        k = a.k if mode in ("tbptt", "rtrl-segment", "truncated") else 1
        model = build_model(a.core, (3, 2), a.hidden, mode, seed=a.seed)
        learner = SequenceLearner(model, mode, k=k, lr=a.lr, clip=1.0)
        rng = np.random.default_rng(a.seed)
        hist = fit(learner, lambda i: copy_b1(a.batch, a.l, rng), a.batches, eval_all,
                   eval_every=max(1, a.batches // 10), time_limit=a.time_limit)
        last = hist[-1]
        row = {"core": a.core, "mode": mode, "k": k if mode != "bptt" else 2 * a.l, "hidden": a.hidden, "l": a.l,
               "batches": last["batch"], "updates": last["updates"], "seconds": last["seconds"],
               "train_loss": last["train_loss"], "eval_loss": last["eval_loss"], "eval_acc": last["eval_acc"],
               "eval_seq_acc": last["eval_seq_acc"], "eval_acc_at_l": learner.evaluate(eval_l)["acc"]}
        rows.append(row)
        curves[f"{mode} (k={row['k']})"] = ([r["batch"] for r in hist], [r["eval_acc"] for r in hist])
        print("  " + str(_fmt_row(row)))
    print(format_table(rows, COPY_COLUMNS))
    _save(a.out, "copy", rows, COPY_COLUMNS, curves, "eval symbol accuracy (lengths 2..2l)", "batches",
          title=f"copy task (Irie et al. 2024, App. B.1), {a.core} N={a.hidden}, l={a.l}")
    return rows


# -- copy with a multi-layer LRU (Zucchet et al. 2023, Table 1) -----------------------------------------------------

LRU_METHODS = {  # Table 1 row -> (learner mode, k)
    "spatial": ("spatial", 1),
    "truncated": ("truncated", 1),
    "online": ("rtrl-segment", None),  # the online rule; one segment per sequence (same result for any k)
    "bptt": ("bptt", 1),
}
LRU_COLUMNS = ["method", "mode", "layers", "N", "H", "params", "batches", "seconds", "final_train_loss",
               "eval_loss", "eval_bit_acc", "paper_loss"]
PAPER_TABLE1_LRU = {"spatial": 0.466, "truncated": 0.262, "online": 0.0084, "bptt": 7.6e-6}


def bench_copy_lru(a) -> List[Dict]:
    rows, curves = [], {}
    T = 2 * a.patterns + a.delay
    eval_b = copy_patterns(a.eval_batch, rng=10_000 + a.seed, n_patterns=a.patterns, bits=a.bits, delay=a.delay)
    for method in a.methods:
        mode, k = LRU_METHODS[method]
        if not _usable(a.core, "rtrl" if mode.startswith("rtrl") else None):
            continue
        opts = dict(layers=a.layers, r_min=a.r_min, r_max=a.r_max) if a.core == "lru" else {}
        model = build_model(a.core, (a.bits + 1, a.bits), a.N, mode, encoder_size=a.H, seed=a.seed, **opts)
        learner = SequenceLearner(model, mode, k=k or T, lr=a.lr, clip=None, update="sequence")
        rng = np.random.default_rng(a.seed)
        make = lambda i: copy_patterns(a.batch, rng, n_patterns=a.patterns, bits=a.bits, delay=a.delay)  # noqa
        hist = fit(learner, make, a.batches, eval_b, eval_every=max(1, a.batches // 10), time_limit=a.time_limit)
        tail = [r["train_loss"] for r in hist[-2:]]
        row = {"method": method, "mode": mode, "layers": a.layers, "N": a.N, "H": a.H,
               "params": sum(p.numel() for p in model.parameters()), "batches": hist[-1]["batch"],
               "seconds": hist[-1]["seconds"], "final_train_loss": float(np.mean(tail)),
               "eval_loss": hist[-1]["eval_loss"], "eval_bit_acc": hist[-1]["eval_acc"],
               "paper_loss": PAPER_TABLE1_LRU.get(method, float("nan"))}
        rows.append(row)
        curves[method] = ([r["batch"] for r in hist], [r["eval_loss"] for r in hist])
        print("  " + str(_fmt_row(row)))
    print(format_table(rows, LRU_COLUMNS))
    _save(a.out, "copy_lru", rows, LRU_COLUMNS, curves, "eval loss (per-bit BCE)", "batches", logy=True,
          title=f"copy {a.patterns}x{a.bits} bits (Zucchet et al. 2023), {a.core} {a.layers}L N={a.N} H={a.H}")
    return rows


# -- ListOps ----------------------------------------------------------------------------------------------

LISTOPS_COLUMNS = ["core", "mode", "hidden", "batches", "updates", "seconds", "train_loss", "eval_loss",
                   "eval_avg_logit_acc", "eval_last_acc", "majority"]


def bench_listops(a) -> List[Dict]:
    rows, curves = [], {}
    kw = dict(max_depth=a.max_depth, max_args=a.max_args, max_length=a.max_length, min_length=a.min_length)
    eval_b = listops_batch(a.eval_batch, 10_000 + a.seed, **kw)
    labels = eval_b.y[0]
    majority = float(np.bincount(labels, minlength=10).max() / len(labels))
    print(f"  eval set: {a.eval_batch} expressions, majority-class accuracy {majority:.3f}")
    for mode in a.modes:
        if not _usable(a.core, "rtrl" if mode.startswith("rtrl") else None):
            continue
        opts = dict(layers=a.layers) if a.core == "lru" else {}
        model = build_model(a.core, (15, 10), a.hidden, mode, encoder_size=a.encoder or None, seed=a.seed, **opts)
        learner = SequenceLearner(model, mode, k=a.k, lr=a.lr, clip=1.0,
                                  update="sequence" if a.update == "sequence" else "segment")
        rng = np.random.default_rng(a.seed)
        hist = fit(learner, lambda i: listops_batch(a.batch, rng, **kw), a.batches, eval_b,
                   eval_every=max(1, a.batches // 10), time_limit=a.time_limit)
        last = hist[-1]
        row = {"core": a.core, "mode": mode, "hidden": a.hidden, "batches": last["batch"], "updates": last["updates"],
               "seconds": last["seconds"], "train_loss": last["train_loss"], "eval_loss": last["eval_loss"],
               "eval_avg_logit_acc": last["eval_avg_logit_acc"], "eval_last_acc": last["eval_last_acc"],
               "majority": majority}
        rows.append(row)
        curves[mode] = ([r["batch"] for r in hist], [r["eval_avg_logit_acc"] for r in hist])
        print("  " + str(_fmt_row(row)))
    print(format_table(rows, LISTOPS_COLUMNS))
    _save(a.out, "listops", rows, LISTOPS_COLUMNS, curves, "eval accuracy (averaged logits)", "batches",
          title=f"ListOps (depth <= {a.max_depth}, length <= {a.max_length}), {a.core}")
    return rows


# -- the parity of a count of flashes (supervised) ---------------------------------------------------------

PARITY_COLUMNS = ["variant", "mode", "k", "seed", "span", "max_count", "hidden", "lr", "amsgrad", "batches", "seconds",
                  "batches_to_target", "seconds_to_target", "best_acc", "final_acc"]


def parse_variants(specs: List[str]) -> Dict[str, Dict]:
    """``name`` or ``name:key=value,key=value`` (values true/false, numbers, or text) -> {name: core options}.
    ``default`` is the core's own defaults."""
    out: Dict[str, Dict] = {}
    for spec in specs:
        name, _, rest = spec.partition(":")
        opts: Dict = {}
        for item in filter(None, rest.split(",")):
            key, eq, value = item.partition("=")
            if not eq or not key:
                raise ValueError(f"a variant's options are key=value pairs, got {item!r} in {spec!r} "
                                 f"(e.g. signed:signed_keep=true,contractive=true)")
            low = value.lower()
            if low in ("true", "false"):
                opts[key] = low == "true"
            else:
                try:
                    opts[key] = float(value) if any(ch in value for ch in ".e") else int(value)
                except ValueError:
                    opts[key] = value
        if not name or name in out:
            raise ValueError(f"variant names must be given and distinct, got {spec!r}")
        out[name] = opts
    return out


def bench_parity(a) -> List[Dict]:
    variants = parse_variants(a.variants)
    counts = list(range(1, a.max_count + 1))
    eval_sets = {n: flash_parity(a.eval_batch, a.span, a.max_count, rng=30_000 + n, count=n) for n in counts}
    eval_all = flash_parity(a.eval_batch * a.max_count, a.span, a.max_count, rng=40_000)
    columns = PARITY_COLUMNS + [f"acc_{n}" for n in counts]
    rows, curves = [], {}
    for vname, opts in variants.items():
        for mode in a.modes:
            if not _usable(a.core, "rtrl" if mode.startswith("rtrl") else None):
                continue
            k = a.k if mode in ("tbptt", "rtrl-segment") else 1
            for seed in a.seeds:
                model = build_model(a.core, (3, 2), a.hidden, mode, seed=seed, **opts)
                learner = SequenceLearner(model, mode, k=k, lr=a.lr, clip=1.0, update="sequence", amsgrad=a.amsgrad)
                rng = np.random.default_rng(seed)
                hist = fit(learner, lambda i: flash_parity(a.batch, a.span, a.max_count, rng), a.batches, eval_all,
                           eval_every=a.eval_every, time_limit=a.time_limit)
                hit = next((r for r in hist if r["eval_acc"] >= a.target), None)
                last = hist[-1]
                row = {"variant": vname, "mode": mode, "k": k if mode != "bptt" else a.span + 1, "seed": seed,
                       "span": a.span, "max_count": a.max_count, "hidden": a.hidden, "lr": a.lr,
                       "amsgrad": a.amsgrad, "batches": last["batch"],
                       "seconds": last["seconds"], "batches_to_target": hit["batch"] if hit else float("nan"),
                       "seconds_to_target": hit["seconds"] if hit else float("nan"),
                       "best_acc": max(r["eval_acc"] for r in hist), "final_acc": last["eval_acc"]}
                row.update({f"acc_{n}": learner.evaluate(eval_sets[n])["acc"] for n in counts})
                rows.append(row)
                curves[f"{vname}|{mode} s{seed}"] = ([r["batch"] for r in hist], [r["eval_acc"] for r in hist])
                print("  " + str(_fmt_row(row)), flush=True)
    print(format_table(rows, columns))
    _save(a.out, "parity", rows, columns, curves, "eval accuracy at the query", "batches",
          title=f"parity of 1-{a.max_count} flashes over {a.span} steps, {a.core} N={a.hidden}")
    return rows


# -- trace conditioning / patterning (online TD(lambda)) --------------------------------------------------

TRACE_COLUMNS = ["task", "core", "learning", "features", "truncation", "flops_per_step", "params", "lr", "steps",
                 "seconds", "msre", "msre_last", "nmsre_last", "return_var"]


def trace_configs(a, n_in: int) -> List[Dict]:
    """The learners at a matched per-step budget (see r2ac.online.budget and docs/results-online.md):
    the sizes of Javed et al. 2023 for columnar (10), ccn (16, 4 per stage) and lstm (4 features, k = 15); rtu and
    elstm: the largest size whose estimate is <= the budget."""
    cfgs = []
    for name in a.cores:
        if name == "columnar":
            cfgs.append(dict(core="columnar", learning="rtrl", h=a.columnar_features, k=None, opts={}))
        elif name in ("ccn", "constructive"):
            u = a.ccn_per_stage if name == "ccn" else 1
            h = a.ccn_features if name == "ccn" else a.constructive_features
            opts = dict(steps_per_stage=max(1, a.steps // (h // u)), eps=a.ccn_eps)
            if name == "ccn":
                opts["columns_per_stage"] = u
            cfgs.append(dict(core=name, learning="rtrl", h=h, k=None, u=u, opts=opts))
        elif name in ("lstm", "gru"):
            cfgs.append(dict(core=name, learning="tbptt", h=a.lstm_features, k=a.truncation, opts={}))
        elif name in ("elstm", "rtu"):
            cfgs.append(dict(core=name, learning="rtrl", h=size_for_budget(name, n_in, a.budget), k=None, opts={}))
        else:
            cfgs.append(dict(core=name, learning="rtrl", h=a.default_features, k=None, opts={}))
    for c in cfgs:
        try:
            c["flops"] = flops_per_step(c["core"], n_in, c["h"], c["k"], c.get("u"))
        except ValueError:
            c["flops"] = float("nan")
    return cfgs


def bench_trace(a) -> List[Dict]:
    rows, curves = [], {}
    tasks = ["conditioning", "patterning"] if a.task == "both" else [a.task]
    for task in tasks:
        gen = trace_conditioning if task == "conditioning" else trace_patterning
        stream = gen(a.steps, a.seed)
        n_in = stream.x.shape[1]
        G = stream.returns(a.gamma)
        print(f"  {task}: {a.steps} steps, {len(stream.cs_times)} trials, {n_in} inputs, "
              f"return variance {G.var():.4f}")
        err = (oracle_predictions(stream, a.gamma) - G)[:-1] ** 2
        tail = max(1, len(err) // 10)
        rows.append({"task": task, "core": "oracle", "learning": "E[G | last CS, time since, US seen]",
                     "msre": float(err.mean()), "msre_last": float(err[-tail:].mean()),
                     "nmsre_last": float(err[-tail:].mean() / max(G[:-1].var(), 1e-12)),
                     "return_var": float(G[:-1].var())})
        print("  " + str(_fmt_row(rows[-1])))
        edges = np.linspace(0, len(err), a.bins + 1).astype(int)
        curves[f"{task}|oracle"] = ([float(e) for e in edges[1:]], [float(err[i:j].mean()) for i, j in
                                                                    zip(edges[:-1], edges[1:])])
        for c in trace_configs(a, n_in):
            if not _usable(c["core"], c["learning"]):
                continue
            best = None
            for lr in a.lr:
                torch.manual_seed(a.seed)
                from r2ac.cores import make_core

                core = make_core(c["core"], n_in, c["h"], learning=c["learning"], **c["opts"])
                learner = TDLambda(core, gamma=a.gamma, lam=a.lam, lr=lr, truncation=c["k"])
                res = run_stream(learner, stream.x, stream.cumulant, bins=a.bins, time_limit=a.time_limit)
                row = {"task": task, "core": c["core"], "learning": c["learning"], "features": core.output_size,
                       "truncation": c["k"] or "-", "flops_per_step": c["flops"],
                       "params": sum(p.numel() for p in learner.params), "lr": lr, "steps": res["steps"],
                       "seconds": res["seconds"], "msre": res["msre"], "msre_last": res["msre_last"],
                       "nmsre_last": res["msre_last"] / max(res["return_var"], 1e-12),
                       "return_var": res["return_var"]}
                print("  " + str(_fmt_row(row)))
                if best is None or row["msre"] < best[0]["msre"]:
                    best = (row, res)
            rows.append(best[0])
            res = best[1]
            n = len(res["curve"])
            xs = [(i + 1) * res["steps"] / n for i in range(n)]
            curves[f"{task}|{c['core']} ({c['learning']}, lr {best[0]['lr']:g})"] = (xs, res["curve"])
    print(format_table(rows, TRACE_COLUMNS))
    _save(a.out, "trace", rows, TRACE_COLUMNS, curves, f"MSRE per {a.steps // a.bins} steps", "steps", logy=True)
    return rows


# -- command line ----------------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="r2ac bench tasks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)

    def common(q, out="bench_out"):
        q.add_argument("--out", default=out, help="folder for the CSV and PNG")
        q.add_argument("--seed", type=int, default=0)
        q.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest for these sizes)")
        q.add_argument("--time-limit", type=float, default=None, help="seconds per run (stops early)")
        q.add_argument("--quick", action="store_true", help="tiny smoke-test sizes")

    q = sub.add_parser("copy", help="Irie et al. 2024, App. B.1 copy task")
    common(q)
    q.add_argument("--core", default="elstm")
    q.add_argument("--l", type=int, default=8, help="longest pattern (sequence length 2l)")
    q.add_argument("--hidden", type=int, default=64)
    q.add_argument("--batch", type=int, default=32)
    q.add_argument("--batches", type=int, default=1500)
    q.add_argument("--eval-batch", type=int, default=512)
    q.add_argument("--lr", type=float, default=3e-3)
    q.add_argument("--k", type=int, default=4, help="truncation / segment length for tbptt and rtrl-segment")
    q.add_argument("--modes", nargs="+", default=["rtrl-online", "rtrl-segment", "tbptt", "bptt"])

    q = sub.add_parser("copy-lru", help="Zucchet et al. 2023, Table 1 (multi-layer LRU)")
    common(q)
    q.add_argument("--core", default="lru")
    q.add_argument("--layers", type=int, default=4)
    q.add_argument("--N", type=int, default=32, help="recurrent units per layer (paper: 64)")
    q.add_argument("--H", type=int, default=64, help="model width (paper: 128)")
    q.add_argument("--r-min", type=float, default=0.0, help="|lambda| init ring (paper: the unit disk)")
    q.add_argument("--r-max", type=float, default=0.999)
    q.add_argument("--patterns", type=int, default=20)
    q.add_argument("--bits", type=int, default=7)
    q.add_argument("--delay", type=int, default=7, help="the paper's 'padding' (blank steps before recall)")
    q.add_argument("--batch", type=int, default=20)
    q.add_argument("--batches", type=int, default=600)
    q.add_argument("--eval-batch", type=int, default=200)
    q.add_argument("--lr", type=float, default=4e-3)
    q.add_argument("--methods", nargs="+", default=list(LRU_METHODS), choices=list(LRU_METHODS))

    q = sub.add_parser("listops", help="ListOps short run")
    common(q)
    q.add_argument("--core", default="elstm")
    q.add_argument("--layers", type=int, default=1, help="lru only")
    q.add_argument("--hidden", type=int, default=128)
    q.add_argument("--encoder", type=int, default=0, help="linear encoder width (0: one-hot into the core)")
    q.add_argument("--batch", type=int, default=32)
    q.add_argument("--batches", type=int, default=300)
    q.add_argument("--eval-batch", type=int, default=1000)
    q.add_argument("--lr", type=float, default=3e-3)
    q.add_argument("--k", type=int, default=1)
    q.add_argument("--update", choices=["segment", "sequence"], default="segment")
    q.add_argument("--max-depth", type=int, default=3)
    q.add_argument("--max-args", type=int, default=5)
    q.add_argument("--min-length", type=int, default=5)
    q.add_argument("--max-length", type=int, default=60)
    q.add_argument("--modes", nargs="+", default=["rtrl-online", "bptt"])

    q = sub.add_parser("parity", help="parity of a count of unmarked flashes, supervised")
    common(q)
    q.add_argument("--core", default="elstm")
    q.add_argument("--variants", nargs="+", default=["default", "signed:signed_keep=true"],
                   help="core option sets, name or name:key=value,...; one row group each")
    q.add_argument("--modes", nargs="+", default=["rtrl-segment"],
                   help="learner modes (rtrl-segment: the exact gradient; tbptt: truncated at --k)")
    q.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    q.add_argument("--span", type=int, default=150)
    q.add_argument("--max-count", type=int, default=6)
    q.add_argument("--hidden", type=int, default=64)
    q.add_argument("--batch", type=int, default=32)
    q.add_argument("--batches", type=int, default=3000)
    q.add_argument("--eval-batch", type=int, default=200, help="sequences per count in the per-count evaluation")
    q.add_argument("--eval-every", type=int, default=50)
    q.add_argument("--lr", type=float, default=3e-3)
    q.add_argument("--k", type=int, default=10, help="segment length for tbptt and rtrl-segment")
    q.add_argument("--target", type=float, default=0.9, help="accuracy that counts as learned")
    q.add_argument("--amsgrad", action="store_true", help="AMSGrad's steps (the RL learners' default)")

    q = sub.add_parser("trace", help="online TD(lambda) on trace conditioning / patterning")
    common(q)
    q.add_argument("--task", choices=["conditioning", "patterning", "both"], default="both")
    q.add_argument("--steps", type=int, default=40_000, help="stream length (papers: 2 M / 10 M)")
    q.add_argument("--cores", nargs="+", default=["columnar", "ccn", "rtu", "elstm", "lstm"])
    q.add_argument("--budget", type=float, default=4400,
                   help="operations per step for the sizes of elstm/rtu (Javed et al. 2023: ~4000; its LSTM 4:15 = "
                        "4352)")
    q.add_argument("--lr", type=float, nargs="+", default=[1e-3],
                   help="Adam step size(s); with several, each learner keeps its best by MSRE (as the papers)")
    q.add_argument("--gamma", type=float, default=0.9)
    q.add_argument("--lam", type=float, default=0.99)
    q.add_argument("--truncation", type=int, default=15, help="lstm/gru T-BPTT truncation (Javed et al. 2023: 15)")
    q.add_argument("--lstm-features", type=int, default=4)
    q.add_argument("--columnar-features", type=int, default=10)
    q.add_argument("--ccn-features", type=int, default=16)
    q.add_argument("--ccn-per-stage", type=int, default=4)
    q.add_argument("--ccn-eps", type=float, default=0.001)
    q.add_argument("--constructive-features", type=int, default=5)
    q.add_argument("--default-features", type=int, default=8, help="size for other cores")
    q.add_argument("--bins", type=int, default=20)
    return p


def _quick(a) -> None:
    if a.what == "copy":
        a.l, a.hidden, a.batches, a.batch, a.eval_batch, a.k = 3, 8, 3, 4, 16, 2
    elif a.what == "copy-lru":
        a.layers, a.N, a.H, a.patterns, a.bits, a.delay, a.batches, a.batch, a.eval_batch = 2, 4, 8, 3, 2, 1, 2, 2, 4
    elif a.what == "listops":
        a.hidden, a.batches, a.batch, a.eval_batch, a.max_length, a.max_depth = 8, 2, 2, 8, 12, 2
    elif a.what == "parity":
        a.span, a.max_count, a.hidden, a.batches, a.batch, a.eval_batch, a.eval_every = 12, 3, 4, 3, 4, 8, 2
        a.seeds = a.seeds[:1]
    elif a.what == "trace":
        a.steps, a.bins, a.lr = 200, 2, a.lr[:1]
        a.lstm_features, a.truncation, a.columnar_features, a.ccn_features, a.ccn_per_stage = 2, 3, 2, 4, 2
        a.budget, a.default_features = 300, 2


def main(argv: Optional[List[str]] = None) -> int:
    a = _parser().parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.quick:
        _quick(a)
    print(f"r2ac bench tasks {a.what} on {machine_description()}")
    t0 = time.perf_counter()
    {"copy": bench_copy, "copy-lru": bench_copy_lru, "listops": bench_listops, "parity": bench_parity,
     "trace": bench_trace}[a.what](a)
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
