"""``r2ac``: the command line.

    r2ac train CONFIG [key=value ...]        train (runs/<name> holds config, metrics, plots, checkpoints)
    r2ac train --resume RUN_DIR [key=value]  continue a run from its newest checkpoint
    r2ac eval RUN_DIR|CHECKPOINT             k sets of n test episodes (mean of set means, std)
    r2ac train CONFIG runtime.kind=ray [--address ADDR]   on Ray: a local instance, or join a cluster
    r2ac pretrain CONFIG                     TBPTT training, then export the stem (stem.safetensors)
    r2ac pipeline CONFIG                     pretrain the stem, then train with it frozen
    r2ac bench core|envs|system|tasks|memory [...]  benchmarks: print a table, write CSV (+ PNG)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional


def _train(args) -> int:
    from r2ac.agent.learner import NonFiniteLossError
    from r2ac.config import apply_overrides, load_config
    from r2ac.runtime.common import RunAborted, run_dir_of

    if args.resume:
        cfg_path = os.path.join(args.resume, "config.yaml")
        if not os.path.exists(cfg_path):
            raise SystemExit(f"r2ac train --resume {args.resume}: no config.yaml there (is it a run directory?)")
        overrides = ([args.config] if args.config else []) + args.overrides
        cfg = apply_overrides(load_config(cfg_path), overrides + [f"run_dir={args.resume}"])
    else:
        if not args.config:
            raise SystemExit(f"r2ac {args.command}: give a config file (e.g. configs/quickstart.yaml)"
                             + (" or --resume RUN_DIR" if args.command != "pipeline" else ""))
        cfg = load_config(args.config, args.overrides)
    if cfg.runtime.kind == "local" and args.address:
        print(f"r2ac {args.command}: note: --address {args.address} is ignored with runtime.kind=local",
              file=sys.stderr)
    from r2ac.runtime import pipeline as stages

    try:
        if args.command == "pipeline":
            summary = stages.pipeline(cfg, address=args.address)
        elif args.command == "pretrain":
            summary = stages.pretrain(cfg, resume=bool(args.resume), address=args.address)
        else:
            summary = stages.run_training(cfg, resume=bool(args.resume), address=args.address)
    except (NonFiniteLossError, RunAborted) as e:
        run_dir = run_dir_of(cfg)
        again = "run the same `r2ac pipeline` command again" if args.command == "pipeline" else \
            f"continue with `r2ac {args.command} --resume {run_dir}`"
        print(f"r2ac {args.command}: stopped: {e}\nThe last checkpoint is kept; after fixing the cause {again}.",
              file=sys.stderr)
        return 3
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM with runtime.kind=ray): a checkpoint was written
        run_dir = run_dir_of(cfg)
        again = "run the same `r2ac pipeline` command again" if args.command == "pipeline" else \
            f"continue with `r2ac {args.command} --resume {run_dir}`"
        print(f"r2ac {args.command}: interrupted; {again}", file=sys.stderr)
        return 130
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
    elif args.what == "system":
        from r2ac.bench.system import main as bench_main
    elif args.what == "tasks":
        from r2ac.bench.tasks import main as bench_main
    elif args.what == "memory":
        from r2ac.bench.memory import main as bench_main
    else:  # pragma: no cover - argparse restricts choices
        raise SystemExit(f"unknown benchmark {args.what}")
    return bench_main(rest)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="r2ac", description="Recurrent RL with exact real-time recurrent learning")
    sub = parser.add_subparsers(dest="command", required=True)
    for cmd, text in (("train", "train an agent from a YAML config"),
                      ("pretrain", "train with TBPTT and export the vision stem to <run_dir>/stem.safetensors"),
                      ("pipeline", "TBPTT stem pretraining, then training with the stem frozen (seed 000 Sec. 4)")):
        p = sub.add_parser(cmd, help=text)
        p.add_argument("config", nargs="?", help="YAML config, e.g. configs/quickstart.yaml")
        p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. learner.unroll_length=50")
        if cmd != "pipeline":  # a pipeline continues by running the same command again
            p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its newest checkpoint")
        p.add_argument("--address", metavar="ADDR", default=None,
                       help="runtime.kind=ray: join the Ray cluster at ADDR (host:port or 'auto'); default: "
                            "$RAY_ADDRESS, then runtime.address, else start a local Ray instance")
    p = sub.add_parser("eval", help="evaluate a trained agent")
    p.add_argument("path", help="run directory or checkpoint file")
    p.add_argument("--sets", type=int, default=None, help="number of test sets (default: eval.sets of the run)")
    p.add_argument("--episodes", type=int, default=None, help="episodes per set (default: eval.episodes)")
    p.add_argument("--num-envs", type=int, default=None)
    # no -h of its own: `r2ac bench core -h` shows the benchmark's options
    p = sub.add_parser("bench", help="benchmarks (print a table, write CSV and PNG)", add_help=False)
    p.add_argument("what", choices=["core", "envs", "system", "tasks", "memory"])
    args, rest = parser.parse_known_args(argv)
    from r2ac.config import ConfigError

    try:
        if args.command == "bench":
            return _bench(args, rest)
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        if args.command in ("train", "pretrain", "pipeline"):
            args.resume = getattr(args, "resume", None)
            # a lone "key=value" in the config slot is an override, not a file
            if args.config and "=" in args.config and not os.path.exists(args.config) and not args.resume:
                raise SystemExit(f"r2ac {args.command}: {args.config!r} looks like an override; give the config "
                                 "file first")
            return _train(args)
        return _eval(args)
    except (ConfigError, FileNotFoundError, FileExistsError, ValueError) as e:
        # bad input (config keys and values, env ids and options, files): a message, not a traceback
        print(f"r2ac {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
