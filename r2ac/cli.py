"""``r2ac``: the command line.

    r2ac train CONFIG [key=value ...]        train (runs/<name> holds config, metrics, plots, checkpoints)
    r2ac train --resume RUN_DIR [key=value]  continue a run from its newest checkpoint
    r2ac train ... --minutes N               stop after N minutes of training (a checkpoint; --resume goes on)
    r2ac eval RUN_DIR|CHECKPOINT [key=value ...] [--checkpoint STEP] [--greedy] [--episodes N] [--sets K]
              [--seed S] [--video]          test episodes; a row appended to RUN_DIR/eval.csv
    r2ac train CONFIG runtime.kind=ray [--address ADDR]   on Ray: a local instance, or join a cluster
    r2ac pretrain CONFIG                     TBPTT training, then export the stem (stem.safetensors)
    r2ac pipeline CONFIG                     pretrain the stem, then train with it frozen
    r2ac bench core|envs|system|tasks|memory|vecenv [...]  benchmarks: print a table, write CSV (+ PNG)
    r2ac sweep CONFIG [--seeds 0,1,2] 'key=[a,b]' [key=value ...] [--local] [--name NAME]
                                             seeds x grid values as Ray tasks (or one by one); a results table
    r2ac plot RUN|SWEEP_DIR ... [--x env_frames] [--y episode_return] [--out PNG]
                                             curves over seeds with confidence bands, IQM of final scores
    r2ac list envs|cores|configs             what there is to train
    r2ac --version

CONFIG is a YAML file or the name of a config shipped with r2ac (``r2ac list configs``), e.g. ``quickstart``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import List, Optional

BENCHMARKS = {
    "core": ("r2ac.bench.core", "RTRL vs TBPTT learner cost of a core"),
    "envs": ("r2ac.bench.envs", "raw env stepping rates"),
    "system": ("r2ac.bench.system", "whole-system rates vs raw env stepping"),
    "tasks": ("r2ac.bench.tasks", "the supervised long-credit tasks"),
    "memory": ("r2ac.bench.memory", "memory of RTRL vs TBPTT over credit spans"),
    "vecenv": ("r2ac.bench.vecenv", "r2ac's Gymnasium vector env vs gymnasium Sync/AsyncVectorEnv"),
}


def _holds_checkpoints(d: str) -> bool:
    for root, _, files in os.walk(d):
        if os.path.basename(root) == "checkpoints" and any(f.endswith(".pt") for f in files):
            return True
    return False


def _again(command: str, run_dir: str) -> str:
    return ("run the same `r2ac pipeline` command again" if command == "pipeline"
            else f"continue with `r2ac {command} --resume {run_dir}`")


def _train(args) -> int:
    from r2ac.agent.learner import NonFiniteLossError
    from r2ac.config import apply_overrides, load_config
    from r2ac.runtime import RunAborted, run_dir_of

    if args.resume:
        cfg_path = os.path.join(args.resume, "config.yaml")
        if not os.path.exists(cfg_path):
            raise FileNotFoundError(f"--resume {args.resume}: no config.yaml there (is it a run directory?)")
        overrides = ([args.config] if args.config else []) + args.overrides
        cfg = apply_overrides(load_config(cfg_path), overrides + [f"run_dir={args.resume}"])
    else:
        if not args.config:
            raise SystemExit(f"r2ac {args.command}: give a config (a YAML file, or a name from `r2ac list configs`, "
                             "e.g. quickstart)" + (" or --resume RUN_DIR" if args.command != "pipeline" else ""))
        cfg = load_config(args.config, args.overrides)
    if args.command == "pretrain" and cfg.pipeline.pretrain_steps > 0:
        # `r2ac pretrain` is stage 1 of `r2ac pipeline` run alone: the same budget and M
        p = cfg.pipeline
        cfg = apply_overrides(cfg, [f"total_steps={p.pretrain_steps}",
                                    f"learner.unroll_length={p.pretrain_unroll_length}", *p.pretrain_overrides])
    if cfg.runtime.kind == "local" and args.address:
        print(f"r2ac {args.command}: note: --address {args.address} is ignored with runtime.kind=local",
              file=sys.stderr)
    from r2ac.runtime import pipeline as stages

    run_dir = run_dir_of(cfg)
    fresh = not os.path.exists(run_dir)
    minutes = getattr(args, "minutes", None)
    limit = None if minutes is None else minutes * 60.0
    try:
        if args.command == "pipeline":
            summary = stages.pipeline(cfg, address=args.address)
        elif args.command == "pretrain":
            summary = stages.pretrain(cfg, resume=bool(args.resume), address=args.address, time_limit_s=limit)
        else:
            summary = stages.run_training(cfg, resume=bool(args.resume), address=args.address, time_limit_s=limit)
    except (NonFiniteLossError, RunAborted) as e:
        print(f"r2ac {args.command}: stopped: {e}\nThe last checkpoint is kept; after fixing the cause "
              f"{_again(args.command, run_dir)}.", file=sys.stderr)
        return 3
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the run wrote a checkpoint on its way out
        print(f"r2ac {args.command}: interrupted; {_again(args.command, run_dir)}", file=sys.stderr)
        return 130
    except BaseException:
        # a start that failed (unknown env, missing DMLab, bad option) leaves no half-made run directory:
        # one this command created and that holds no checkpoint has nothing worth keeping
        if fresh and os.path.isdir(run_dir) and not _holds_checkpoints(run_dir):
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    print(json.dumps(summary, indent=2))
    if summary.get("status") == "stopped: solved":
        reached = summary.get("stop_reached", {})
        print(f"r2ac {args.command}: solved: stop.success {cfg.stop.success:g} reached at step {reached.get('step')} "
              f"(mean {reached.get('mean', float('nan')):.3f} over the last {cfg.stop.window_episodes} episodes); "
              f"stopped at step {summary.get('step')}", file=sys.stderr)
    if summary.get("status") == "stopped: time limit":
        print(f"r2ac {args.command}: stopped at the time limit (--minutes {minutes:g}) at step {summary.get('step')} "
              f"of {cfg.total_steps}; {_again(args.command, run_dir)} (with --minutes for another budget)",
              file=sys.stderr)
    return 0


def _minutes(text: str) -> float:
    """``--minutes``: a wall-clock budget in minutes, > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes (e.g. --minutes 30)") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of minutes > 0 (e.g. --minutes 30); without "
                                         "--minutes a run stops at total_steps")
    return value


def _eval(args) -> int:
    from r2ac.evaluation import evaluate_run

    if args.episodes is not None and args.episodes < 1 or args.sets is not None and args.sets < 1:
        raise ValueError("--episodes and --sets must be >= 1")
    res = evaluate_run(args.path, args.overrides, checkpoint=args.checkpoint, sets=args.sets,
                       episodes=args.episodes, seed=args.seed, greedy=True if args.greedy else None,
                       num_envs=args.num_envs, video=True if args.video else None)
    print(f"{res['sets']} sets x {res['episodes']} episodes at step {res['step']} ({res['mode']} actions, seed "
          f"{res['seed']}): return {res['mean']:.3f} +- {res['std']:.3f} (set means "
          f"{[round(m, 3) for m in res['set_means']]})")
    for key, stat in (res.get("episode_info") or {}).items():
        print(f"  {key}: {stat['mean']:.3f} (mean over the {stat['count']} episodes where defined)")
    for path in res.get("videos") or ([res["video"]] if res.get("video") else []):
        print(f"video: {path}")
    return 0


def _sweep(args) -> int:
    from r2ac.sweep import build_sweep, load_sweep, parse_seeds, run_sweep

    if args.num_cpus is not None and args.num_cpus < 1:
        raise ValueError("--num-cpus must be >= 1")
    where = "one after another in this process" if args.local else (
        f"as Ray tasks on {args.address}" if args.address else "as Ray tasks on a local Ray instance")
    if args.resume:
        overrides = ([args.config] if args.config else []) + args.overrides
        given = [f"--{k}" for k in ("seeds", "name", "dir") if getattr(args, k) is not None]
        given += [o for o in overrides if "=" not in o]  # a config: the sweep's own is saved there
        if given:
            raise SystemExit(f"r2ac sweep --resume: {', '.join(given)} cannot be given on resume (the sweep's runs "
                             f"and configs are the ones saved in {args.resume}); give --resume SWEEP_DIR, key=value "
                             "overrides for every run and where to run (--local, --address, --num-cpus)")
        sweep = load_sweep(args.resume, overrides)
        print(f"sweep {sweep.name}: resuming {len(sweep.runs)} runs {where}, in {sweep.sweep_dir}", flush=True)
    else:
        if not args.config:
            raise SystemExit("r2ac sweep: give a config (a YAML file, or a name from `r2ac list configs`, e.g. "
                             "quickstart) or --resume SWEEP_DIR")
        seeds = parse_seeds(args.seeds) if args.seeds is not None else None
        sweep = build_sweep(args.config, args.overrides, seeds, name=args.name, sweep_dir=args.dir)
        points = len(sweep.runs) // max(len(sweep.seeds), 1)
        print(f"sweep {sweep.name}: {len(sweep.runs)} runs ({points} grid point{'s' * (points != 1)} x "
              f"{len(sweep.seeds)} seed{'s' * (len(sweep.seeds) != 1)}) {where}, in {sweep.sweep_dir}", flush=True)
    try:
        rows = run_sweep(sweep, local=args.local, address=args.address, num_cpus=args.num_cpus,
                         resume=bool(args.resume))
    except KeyboardInterrupt:
        print(f"r2ac sweep: interrupted; the runs' rows are in {sweep.sweep_dir}/results.csv; continue with "
              f"`r2ac sweep --resume {sweep.sweep_dir}`", file=sys.stderr)
        return 130
    failed = [r for r in rows if r["status"] != "finished"]
    if failed:
        print(f"r2ac sweep: {len(failed)} of {len(rows)} runs did not finish (their logs: "
              f"{sweep.sweep_dir}/logs/)", file=sys.stderr)
    return 1 if failed else 0


def _plot(args) -> int:
    from r2ac.plotting import plot_runs

    out = plot_runs(args.runs, out=args.out, x=args.x, y=args.y, smooth=args.smooth, final=args.final,
                    final_fraction=args.final_fraction, reps=args.reps, seed=args.seed)
    print(out["table"])
    print(f"plot: {out['png']}")
    print(f"aggregates: {out['csv']}")
    return 0


def _list(args) -> int:
    if args.what == "cores":
        from r2ac.cores import CORES

        print(f"{'core':<14} {'learning':<22} description")
        for name, cls in CORES.items():
            how = ("rtrl (exact), tbptt" if cls.supports_rtrl and cls.exact_rtrl else
                   "rtrl (approximate), tbptt" if cls.supports_rtrl else "tbptt")
            doc = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split()).replace("``", "")
            print(f"{name:<14} {how:<22} {doc[:90]}")
        print("\nmodel.core=NAME model.learning=rtrl|tbptt; options: model.core_options (docs/architecture.md)")
    elif args.what == "envs":
        from r2ac.envs import ENV_KINDS, POMDP_KINDS, env_options

        ids = {"tmaze": "tmaze", "watermaze": "watermaze", "cue": "cue", "copy": "copy", "keydoor": "keydoor",
               "atari": "atari:<Game>",
               "procgen": "procgen:<game>", "dmlab": "dmlab:<level>", "gym": "gym:<id> | <module>:<Id>",
               "gymc": "gymc:<id>", "mujoco": "mujoco:<Env-vN>", "mujoco-p": "mujoco-p:<Env-vN>",
               "mujoco-v": "mujoco-v:<Env-vN>", "popgym": "popgym:<Name>", "minigrid": "minigrid:<Id>"}
        print(f"{'env.id':<26} {'actions':<12} options (defaults)")
        for kind in list(ENV_KINDS) + list(POMDP_KINDS):
            opts = env_options(kind)
            text = ", ".join(f"{k}={v!r}" for k, v in opts.items()) or "keyword arguments of the env"
            acts = "discrete" if kind in ENV_KINDS else "continuous"
            print(f"{ids.get(kind, kind):<26} {acts:<12} {text}")
        print("\nenv.id=ID env.options='{key: value}' (docs/environments.md); continuous actions need algo=ppo")
    else:
        from r2ac.config import PACKAGED_CONFIGS, load_config, packaged_configs

        print(f"{'config':<44} {'algo':<7} {'env.id':<30} core/learning")
        for name in packaged_configs():
            try:
                c = load_config(os.path.join(PACKAGED_CONFIGS, *name.split("/")) + ".yaml")
                print(f"{name:<44} {c.algo:<7} {c.env.id:<30} {c.model.core}/{c.model.learning}")
            except Exception as e:  # a config that needs a file first (a stem) still gets listed
                print(f"{name:<44} ({str(e).splitlines()[0][:70]})")
        print(f"\n`r2ac train NAME` trains one (files in {PACKAGED_CONFIGS})")
    return 0


def _bench(args, rest: List[str]) -> int:
    import importlib

    if args.what in (None, "-h", "--help"):
        print("usage: r2ac bench {" + ",".join(BENCHMARKS) + "} [options]\n\nbenchmarks (each prints a table and "
              "writes CSV; `r2ac bench NAME -h` shows its options):")
        for name, (_, text) in BENCHMARKS.items():
            print(f"  {name:<8} {text}")
        return 0
    module, _ = BENCHMARKS[args.what]
    return importlib.import_module(module).main(rest)


def _version() -> str:
    import r2ac

    return f"r2ac {r2ac.__version__}"


def _user_errors():
    from r2ac.checkpoint import CheckpointError
    from r2ac.config import ConfigError

    return (ConfigError, CheckpointError, FileNotFoundError, FileExistsError, NotADirectoryError,
            PermissionError, ValueError, ImportError)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="r2ac", description="Recurrent RL with exact real-time recurrent learning",
                                     epilog="CONFIG: a YAML file or a shipped config's name (r2ac list configs)")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    for cmd, text in (("train", "train an agent from a YAML config"),
                      ("pretrain", "train with TBPTT and export the vision stem to <run_dir>/stem.safetensors "
                                   "(pipeline.pretrain_steps/pretrain_unroll_length apply when set)"),
                      ("pipeline", "TBPTT stem pretraining, then training with the stem frozen (Irie et al. 2024, "
                                   "Sec. 4)")):
        p = sub.add_parser(cmd, help=text, description=text)
        p.add_argument("config", nargs="?", help="YAML config or a shipped config's name, e.g. quickstart")
        p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. learner.unroll_length=50")
        if cmd != "pipeline":  # a pipeline continues by running the same command again
            p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its newest checkpoint")
            p.add_argument("--minutes", type=_minutes, default=None, metavar="N",
                           help="stop after N minutes of training (counted from this command's start of training, "
                                "also on --resume) or at total_steps, whichever comes first: a final checkpoint "
                                "and summary (status 'stopped: time limit'); --resume RUN_DIR goes on from there")
        p.add_argument("--address", metavar="ADDR", default=None,
                       help="runtime.kind=ray: join the Ray cluster at ADDR (host:port or 'auto'); default: "
                            "$RAY_ADDRESS, then runtime.address, else start a local Ray instance")
    p = sub.add_parser("eval", help="evaluate a trained agent (a row appended to RUN_DIR/eval.csv)",
                       description="Test episodes of a trained agent: k sets of n episodes, mean of the set means "
                                   "and std over sets; a row appended to RUN_DIR/eval.csv, eval/ metrics on "
                                   "TensorBoard and W&B (when the run logs there).")
    p.add_argument("path", help="run directory or checkpoint file")
    p.add_argument("overrides", nargs="*", help="key=value overrides for this evaluation, e.g. env.num_envs=4 "
                                                "env.options.corridor_length=60")
    p.add_argument("--checkpoint", type=int, default=None, metavar="STEP",
                   help="the checkpoint at this agent step (default: the newest)")
    p.add_argument("--greedy", action="store_true", help="argmax actions (default: sampled, or eval.greedy)")
    p.add_argument("--sets", type=int, default=None, help="number of test sets (default: eval.sets of the run)")
    p.add_argument("--episodes", type=int, default=None, help="episodes per set (default: eval.episodes)")
    p.add_argument("--seed", type=int, default=None, help="env and action seed (default 12345)")
    p.add_argument("--num-envs", type=int, default=None, help="envs stepped together (default: eval.num_envs, "
                                                              "else env.num_envs)")
    p.add_argument("--video", action="store_true",
                   help="record one episode to RUN_DIR/videos/ (GIF, and MP4 with PyAV: pip install r2ac[video])")
    p = sub.add_parser("sweep", help="train a config over seeds and a grid of values (Ray tasks, or --local)",
                       description="Train CONFIG for every combination of --seeds and the grid values "
                                   "('key=[a, b]'; a plain key=value applies to every run), each run in its own "
                                   "directory under the sweep directory; every config is checked before any run "
                                   "starts. At the end a results table, also in SWEEP_DIR/results.csv. With "
                                   "logger.wandb the runs form one W&B group named after the sweep. Ctrl-C or "
                                   "SIGTERM stops every run with a checkpoint; --resume SWEEP_DIR continues.")
    p.add_argument("config", nargs="?", default=None,
                   help="YAML config or a shipped config's name, e.g. quickstart")
    p.add_argument("overrides", nargs="*", help="grid axes 'key=[a, b]' and key=value overrides for every run")
    p.add_argument("--seeds", default=None, help="seeds, e.g. 0,1,2 or 0-4 (default: the config's seed)")
    p.add_argument("--local", action="store_true", help="run one after another in this process instead of on Ray")
    p.add_argument("--name", default=None, help="sweep name: W&B group and directory name (default: "
                                                "<config name>-<date>-<time>)")
    p.add_argument("--dir", default=None, metavar="SWEEP_DIR", help="sweep directory (default runs/sweeps/NAME)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPU slots of the local Ray instance, which runs "
                                                             "share by what they use (default: all cores)")
    p.add_argument("--address", default=None, metavar="ADDR", help="run the tasks on the Ray cluster at ADDR")
    p.add_argument("--resume", default=None, metavar="SWEEP_DIR",
                   help="continue the sweep in SWEEP_DIR: finished runs are kept, interrupted ones continue from "
                        "their checkpoints, the rest start (each with the config saved at the sweep's start and "
                        "the key=value overrides given, e.g. a longer total_steps)")
    p = sub.add_parser("plot", help="learning curves over seeds and IQM of final scores (PNG + CSV)",
                       description="Curves of RUN directories (or every run of a sweep directory) against env "
                                   "frames: runs that differ only in the seed (or share a sweep's grid point) are "
                                   "one curve, the mean over seeds with a 95%% bootstrap confidence band; final "
                                   "scores aggregated with rliable (interquartile mean, stratified bootstrap "
                                   "95%% CIs). Writes a PNG and a CSV of the aggregates.")
    p.add_argument("runs", nargs="+", help="run directories, sweep directories, or directories holding runs")
    p.add_argument("--x", default="env_frames", choices=["env_frames", "step", "wall_time"],
                   help="x axis (default env frames)")
    p.add_argument("--y", default="episode_return", help="metric of metrics.csv (default episode_return)")
    p.add_argument("--out", default=None, metavar="PNG", help="the PNG (the CSV goes beside it); default: "
                                                             "plot.png in the sweep, run or common directory")
    p.add_argument("--smooth", type=float, default=0.6, help="EMA weight per run before averaging (0 = raw)")
    p.add_argument("--final", choices=["train", "eval"], default="train",
                   help="final score: the metric over the last --final-fraction of training, or the last "
                        "evaluation of eval.csv")
    p.add_argument("--final-fraction", type=float, default=0.1, help="share of the x range the final training "
                                                                      "score averages over (default 0.1)")
    p.add_argument("--reps", type=int, default=2000, help="bootstrap replications (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p = sub.add_parser("list", help="list env ids, cores or shipped configs")
    p.add_argument("what", choices=["envs", "cores", "configs"])
    # no -h of its own: `r2ac bench core -h` shows the benchmark's options
    p = sub.add_parser("bench", help="benchmarks (print a table, write CSV and PNG)", add_help=False)
    p.add_argument("what", nargs="?", choices=list(BENCHMARKS) + ["-h", "--help"])
    args, rest = parser.parse_known_args(argv)
    import warnings

    # warnings (a skipped unreadable checkpoint, a logging back-end switched off) as one line each
    warnings.formatwarning = lambda message, category, *a, **k: f"r2ac: warning: {message}\n"
    errors = _user_errors()
    try:
        if args.command == "bench":
            return _bench(args, rest)
        if hasattr(args, "overrides"):  # overrides after the options (`--minutes 5 key=value`)
            args.overrides += [r for r in rest if "=" in r and not r.startswith("-")]
            rest = [r for r in rest if not ("=" in r and not r.startswith("-"))]
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        if args.command == "list":
            return _list(args)
        if args.command == "sweep":
            return _sweep(args)
        if args.command == "plot":
            return _plot(args)
        if args.command in ("train", "pretrain", "pipeline"):
            args.resume = getattr(args, "resume", None)
            # a lone "key=value" in the config slot is an override, not a file
            if args.config and "=" in args.config and not os.path.exists(args.config) and not args.resume:
                raise SystemExit(f"r2ac {args.command}: {args.config!r} looks like an override; give the config "
                                 "file first")
            return _train(args)
        return _eval(args)
    except errors as e:
        # bad input (config keys and values, env ids and options, files, checkpoints, a missing optional
        # package): one message, no traceback
        text = " ".join(str(e).split("\n")) if not hasattr(e, "errors") or len(e.errors) < 2 else str(e)
        print(f"r2ac {args.command}: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
