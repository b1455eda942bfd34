"""``r2ac``: the command line.

    r2ac train CONFIG [key=value ...]        train (runs/<name> holds config, metrics, plots, checkpoints)
    r2ac train --resume RUN_DIR [key=value]  continue a run from its newest checkpoint
    r2ac eval RUN_DIR|CHECKPOINT             k sets of n test episodes (mean of set means, std)
    r2ac bench core|envs [...]               benchmarks: print a table, write CSV (+ PNG)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional


def _train(args) -> int:
    from r2ac.config import apply_overrides, load_config
    from r2ac.runtime.local import train

    if args.resume:
        cfg_path = os.path.join(args.resume, "config.yaml")
        if not os.path.exists(cfg_path):
            raise SystemExit(f"r2ac train --resume {args.resume}: no config.yaml there (is it a run directory?)")
        overrides = ([args.config] if args.config else []) + args.overrides
        cfg = apply_overrides(load_config(cfg_path), overrides + [f"run_dir={args.resume}"])
    else:
        if not args.config:
            raise SystemExit("r2ac train: give a config file (e.g. configs/quickstart.yaml) or --resume RUN_DIR")
        cfg = load_config(args.config, args.overrides)
    if cfg.runtime.kind != "local":
        raise SystemExit("runtime.kind=ray is not available in this version yet; use runtime.kind=local")
    summary = train(cfg, resume=bool(args.resume))
    print(json.dumps(summary, indent=2))
    return 0


def _eval(args) -> int:
    from r2ac.runtime.local import evaluate

    res = evaluate(args.path, sets=args.sets, episodes=args.episodes, num_envs=args.num_envs)
    print(f"{res['sets']} sets x {res['episodes']} episodes at step {res['step']}: "
          f"return {res['mean']:.3f} +- {res['std']:.3f} (set means {[round(m, 3) for m in res['set_means']]})")
    return 0


def _bench(args, rest: List[str]) -> int:
    if args.what == "core":
        from r2ac.bench.core import main as bench_main
    elif args.what == "envs":
        from r2ac.envs.bench import main as bench_main
    else:  # pragma: no cover - argparse restricts choices
        raise SystemExit(f"unknown benchmark {args.what}")
    return bench_main(rest)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="r2ac", description="Recurrent RL with exact real-time recurrent learning")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="train an agent from a YAML config")
    p.add_argument("config", nargs="?", help="YAML config, e.g. configs/quickstart.yaml")
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. learner.unroll_length=50")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its newest checkpoint")
    p = sub.add_parser("eval", help="evaluate a trained agent")
    p.add_argument("path", help="run directory or checkpoint file")
    p.add_argument("--sets", type=int, default=None, help="number of test sets (default: eval.sets of the run)")
    p.add_argument("--episodes", type=int, default=None, help="episodes per set (default: eval.episodes)")
    p.add_argument("--num-envs", type=int, default=None)
    p = sub.add_parser("bench", help="benchmarks (print a table, write CSV and PNG)")
    p.add_argument("what", choices=["core", "envs"])
    args, rest = parser.parse_known_args(argv)
    from r2ac.config import ConfigError

    try:
        if args.command == "bench":
            return _bench(args, rest)
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        if args.command == "train":
            # a lone "key=value" in the config slot is an override, not a file
            if args.config and "=" in args.config and not os.path.exists(args.config) and not args.resume:
                raise SystemExit(f"r2ac train: {args.config!r} looks like an override; give the config file first")
            return _train(args)
        return _eval(args)
    except (ConfigError, FileNotFoundError, FileExistsError) as e:
        print(f"r2ac {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
