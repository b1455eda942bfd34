"""``r2ac sweep``: one config trained over seeds and a grid of values, as Ray tasks or one after another.

    r2ac sweep CONFIG [--seeds 0,1,2] 'key=[a,b]' ['key2=[x,y]' ...] [key=value ...] [--local] [--name NAME]

Every ``key=[a, b, ...]`` is a grid axis; the runs are the cross product of the axes and the seeds, each with
its own run directory under the sweep directory (``runs/sweeps/<name>/<label>_seed<k>``). A ``key=value``
without brackets applies to every run. A key whose value is itself a list (``logger.wandb_tags``,
``model.stem_channels``) is swept by a list of lists (``'model.stem_channels=[[16, 32], [32, 64]]'``).

Every run's config is built and checked (config keys and values, env ids and env options) before the first
run starts, and every problem is reported at once. The runs then go to Ray as tasks (a local Ray instance
sized to this machine, or ``--address``), each asking for what it uses: ``runtime.torch_threads`` CPUs for a
``runtime.kind=local`` run (its actors and learner share that process), one GPU with ``device=cuda``; a
``runtime.kind=ray`` run's learner and actors are Ray actors of their own (one CPU each), so its task asks for
none and the sweep starts it only when ``runtime.num_actors + 1`` CPUs are free. ``--local`` runs them one
after another in this process instead.

With ``logger.wandb``, a sweep's runs form one W&B group (the sweep's name) and each run is named
``<sweep>/<label>/seed<k>``. At the end one table (status, agent steps, final training return, final
evaluation return where ``eval.at_end`` ran, wall time) is printed and written to ``<sweep_dir>/results.csv``;
``<sweep_dir>/sweep.json`` describes the sweep (``r2ac plot SWEEP_DIR`` groups the runs by grid point) and
``<sweep_dir>/logs/`` holds each run's output and ``<sweep_dir>/configs/`` each run's resolved config.

Ctrl-C or SIGTERM (``kill``, ``ray job stop``, a batch scheduler's limit) stops the sweep cleanly: each run
in progress stops after its update, writes its checkpoint and summary, and the table marks it
``interrupted``. ``r2ac sweep --resume SWEEP_DIR [key=value ...]`` then continues the sweep: runs that finished
are kept, interrupted (and failed) runs continue from their newest checkpoint, runs never started start, each
with the config saved for it at the sweep's start and the overrides given (``total_steps=...`` also extends
finished runs).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml

from r2ac.config import Config, ConfigError, config_to_dict, load_config, save_config
from r2ac.fileio import atomic_write_text

RESULT_COLUMNS = ("run", "seed", "status", "steps", "final_return", "eval_return", "wall_s", "run_dir")
RESERVED_KEYS = ("seed", "name", "run_dir")


@dataclass
class SweepRun:
    """One run of a sweep: its grid point (key -> override text of the value), seed, config and places."""
    label: str
    point: Dict[str, str]
    seed: int
    name: str
    run_dir: str
    log_path: str
    cfg: Config = field(repr=False)

    @property
    def title(self) -> str:
        return f"{self.label}/seed{self.seed}" if self.label else f"seed{self.seed}"


@dataclass
class Sweep:
    name: str
    sweep_dir: str
    config: str
    overrides: List[str]
    grid: List[Tuple[str, List[str]]]
    seeds: List[int]
    runs: List[SweepRun]

    def describe(self) -> Dict[str, Any]:
        return {"name": self.name, "config": self.config, "overrides": self.overrides,
                "grid": {k: v for k, v in self.grid}, "seeds": self.seeds,
                "runs": [{"label": r.label, "point": r.point, "seed": r.seed, "name": r.name,
                          "run_dir": os.path.relpath(r.run_dir, self.sweep_dir)} for r in self.runs]}


# ------------------------------------------------------------------ the command line's grid


def parse_seeds(text: str) -> List[int]:
    """``"0,1,2"`` or ``"0-4"`` (inclusive) or a mix -> distinct seeds in order."""
    seeds: List[int] = []
    for part in str(text).split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise ValueError(f"--seeds {text!r}: expected seeds >= 0 as a comma list or a range, e.g. 0,1,2 or 0-4")
        lo, hi = int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(1))
        seeds += [s for s in range(lo, hi + 1) if s not in seeds]
    return seeds


def _list_keys() -> set:
    """Dotted keys of the schema whose values are lists (swept by a list of lists)."""
    out = set()

    def walk(d: Dict, prefix: str) -> None:
        for k, v in d.items():
            key = f"{prefix}.{k}" if prefix else k
            if isinstance(v, dict):
                walk(v, key)
            elif isinstance(v, list):
                out.add(key)
    walk(config_to_dict(Config()), "")
    return out


def _value_text(v: Any) -> str:
    """The override text of one grid value (YAML flow style; strings as written)."""
    if isinstance(v, str):
        return v
    text = yaml.safe_dump(v, default_flow_style=True, width=1 << 20).strip()
    return text[:-4].strip() if text.endswith("\n...") else text


def parse_grid(items: Sequence[str]) -> Tuple[List[str], List[Tuple[str, List[str]]]]:
    """Split ``key=value`` arguments into the overrides every run gets and the grid axes
    ``[(key, [value text, ...]), ...]`` (``key=[a, b]``). Every problem in one ConfigError."""
    fixed, grid, errors = _parse_grid(items)
    if errors:
        raise ConfigError(errors, source="the sweep's arguments")
    return fixed, grid


def _parse_grid(items: Sequence[str]) -> Tuple[List[str], List[Tuple[str, List[str]]], List[str]]:
    fixed: List[str] = []
    grid: List[Tuple[str, List[str]]] = []
    errors: List[str] = []
    seen: Dict[str, str] = {}
    list_keys = _list_keys()
    for item in items:
        if not isinstance(item, str) or "=" not in item:
            errors.append(f"{item!r} is neither key=value nor a grid key=[a, b, ...]")
            continue
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key:
            errors.append(f"{item!r} has no key before '='")
            continue
        if key in seen:
            errors.append(f"{key!r} is given twice ({seen[key]!r} and {item!r})")
            continue
        seen[key] = item
        text = raw.strip()
        if not text.startswith("["):
            if key in RESERVED_KEYS:
                errors.append(f"{item!r}: the sweep sets {key} for each run"
                              + (" (use --seeds)" if key == "seed" else ""))
            else:
                fixed.append(item)
            continue
        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError as e:
            first = " ".join(str(e).split("\n")[:1])
            errors.append(f"grid {item!r}: not a YAML list of values, e.g. {key}=[a, b] ({first})")
            continue
        if not isinstance(values, list):
            errors.append(f"grid {item!r}: not a YAML list of values, e.g. {key}=[a, b]")
            continue
        if key in list_keys and not (values and all(isinstance(v, list) for v in values)):
            fixed.append(item)  # a list-valued key set to one list (sweep it with a list of lists)
            continue
        if key in RESERVED_KEYS:
            errors.append(f"grid {item!r}: the sweep sets {key} for each run"
                          + (" (use --seeds)" if key == "seed" else ""))
            continue
        if not values:
            errors.append(f"grid {item!r}: no values")
            continue
        texts = [_value_text(v) for v in values]
        dups = sorted({t for t in texts if texts.count(t) > 1})
        if dups:
            errors.append(f"grid {item!r}: value(s) {', '.join(dups)} listed twice")
            continue
        grid.append((key, texts))
    return fixed, grid, errors


def _short_keys(keys: Sequence[str]) -> Dict[str, str]:
    """Each grid key's last component, or the whole key where two would read the same."""
    last = [k.split(".")[-1] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last)}


def _dir_label(label: str) -> str:
    text = re.sub(r"[^A-Za-z0-9._=,+-]+", "_", label).strip("_.") or "run"
    return text[:80]


# ------------------------------------------------------------------ building and checking the runs


def run_problems(cfg: Config) -> List[str]:
    """What a run of ``cfg`` would stop on at its start, found without making anything: the core name, the env
    id and options, combinations the runtimes refuse."""
    from r2ac.cores import CORES, core_options
    from r2ac.envs import env_options, parse_env_id

    problems = []
    if cfg.model.core not in CORES:
        problems.append(f"model.core: unknown core {cfg.model.core!r}; available cores: {', '.join(sorted(CORES))}")
    else:
        unknown = sorted(set(cfg.model.core_options) - set(core_options(cfg.model.core)))
        if unknown:
            problems.append(f"model.core_options: unknown option(s) {unknown} for core {cfg.model.core!r}; its "
                            f"options: {core_options(cfg.model.core) or 'none'} (e.g. model.core_options={{}})")
    try:
        kind, _ = parse_env_id(cfg.env.id)
        allowed = env_options(kind)
        unknown = sorted(set(cfg.env.options) - set(allowed))
        if allowed and unknown:
            listing = ", ".join(f"{k}={v!r}" for k, v in allowed.items())
            problems.append(f"env.options: unknown option(s) {unknown} for env {cfg.env.id!r}; allowed (with "
                            f"defaults): {listing}")
    except ValueError as e:
        problems.append(f"env.id: {e}")
    if cfg.algo == "ppo" and cfg.runtime.kind == "ray":
        problems.append("algo=ppo runs in one process: use runtime.kind=local")
    if cfg.algo == "a2c":
        from r2ac.runtime.pipeline import check_a2c

        try:
            check_a2c(cfg)
        except ConfigError as e:
            problems += e.errors
    return problems


def _distinct(lines: List[str]) -> List[str]:
    return list(dict.fromkeys(lines))


def _cross(grid: Sequence[Tuple[str, Sequence[str]]]) -> List[Dict[str, str]]:
    points: List[Dict[str, str]] = [{}]
    for key, values in grid:
        points = [{**p, key: v} for p in points for v in values]
    return points


def _plain(message: str) -> str:
    return re.sub(r" \(in override '.*'\)$", "", message)


def build_sweep(config: str, args: Sequence[str], seeds: Optional[Sequence[int]] = None, *,
                name: Optional[str] = None, sweep_dir: Optional[str] = None) -> Sweep:
    """Every run of the sweep with its validated config; raises one ConfigError with every problem found
    (grid syntax, unknown keys, bad values, env ids and options, cores, combinations the runtimes refuse)
    before anything is written. Each problem is one line, named by what it belongs to: nothing (every run),
    one grid value (``lr=0.1: ...``) or the grid points it occurs at."""
    fixed, grid, errors = _parse_grid(args)
    try:
        base = load_config(config, fixed)  # the overrides shared by every run
    except ConfigError as e:
        raise ConfigError(errors + e.errors, source=f"the sweep of {config}") from None
    seeds = list(seeds) if seeds else [base.seed]
    name = name or f"{base.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    if "/" in name or not name.strip() or name in (".", ".."):
        raise ValueError(f"--name {name!r}: a sweep name is one path component (it names the sweep directory)")
    sweep_dir = sweep_dir or os.path.join("runs", "sweeps", name)
    short = _short_keys([k for k, _ in grid])

    def label_of(point: Dict[str, str]) -> str:
        return ",".join(f"{short[k]}={v}" for k, v in point.items())

    # 1. each grid value on its own: an unknown key or a bad value is one line, not one per grid point
    good: List[Tuple[str, List[str]]] = []
    for key, values in grid:
        ok = []
        for v in values:
            try:
                load_config(config, fixed + [f"{key}={v}"])
                ok.append(v)
            except ConfigError as e:
                errors += [_plain(m) for m in e.errors]
        if ok:
            good.append((key, ok))  # an axis without one good value is left out of the checks below
    # 2. every grid point of the good values: combinations, env ids and options, cores, runtimes
    points = _cross(good)
    found: Dict[str, List[int]] = {}
    for i, point in enumerate(points):
        try:
            problems = run_problems(load_config(config, fixed + [f"{k}={v}" for k, v in point.items()]))
        except ConfigError as e:
            problems = [_plain(m) for m in e.errors]
        for m in problems:
            found.setdefault(m, []).append(i)
    for m, where in found.items():
        if len(where) == len(points):
            errors.append(m)  # every run: the config or the shared overrides
            continue
        owner = next((f"{short[k]}={v}" for k, vs in good for v in vs
                      if {i for i, p in enumerate(points) if p[k] == v} == set(where)), None)
        if owner is None:
            labels = [label_of(points[i]) for i in where]
            owner = "; ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
        errors.append(f"{owner}: {m}")
    if errors:
        raise ConfigError(_distinct(errors), source=f"the sweep of {config}")

    runs: List[SweepRun] = []
    used: Dict[str, int] = {}
    for point in _cross(grid):
        label = label_of(point)
        dlabel = _dir_label(label) if label else ""
        if dlabel in used:  # two labels that read the same once made path-safe
            used[dlabel] += 1
            dlabel = f"{dlabel}-{used[dlabel]}"
        used.setdefault(dlabel, 0)
        for seed in seeds:
            cfg = load_config(config, fixed + [f"{k}={v}" for k, v in point.items()] + [f"seed={seed}"])
            leaf = f"{dlabel}_seed{seed}" if dlabel else f"seed{seed}"
            run_name = "/".join(p for p in (name, label, f"seed{seed}") if p)
            cfg.name, cfg.run_dir = run_name, os.path.join(sweep_dir, leaf)
            cfg.logger.wandb_group = name
            runs.append(SweepRun(label, dict(point), seed, run_name, cfg.run_dir,
                                 os.path.join(sweep_dir, "logs", leaf + ".log"), cfg))
    return Sweep(name, sweep_dir, str(config), fixed, grid, seeds, runs)


def _leaf(sweep: Sweep, run: SweepRun) -> str:
    return os.path.relpath(run.run_dir, sweep.sweep_dir)


def _config_path(sweep_dir: str, leaf: str) -> str:
    return os.path.join(sweep_dir, "configs", leaf + ".yaml")


def save_sweep(sweep: Sweep) -> None:
    """``sweep.json`` and every run's resolved config (``configs/<leaf>.yaml``): what ``--resume`` reads."""
    os.makedirs(os.path.join(sweep.sweep_dir, "logs"), exist_ok=True)
    os.makedirs(os.path.join(sweep.sweep_dir, "configs"), exist_ok=True)
    for run in sweep.runs:
        save_config(run.cfg, _config_path(sweep.sweep_dir, _leaf(sweep, run)))
    atomic_write_text(os.path.join(sweep.sweep_dir, "sweep.json"), json.dumps(sweep.describe(), indent=2) + "\n")


def load_sweep(sweep_dir: str, overrides: Sequence[str] = ()) -> Sweep:
    """The sweep saved in ``sweep_dir`` (``sweep.json`` and ``configs/``), for ``r2ac sweep --resume``: each
    run's config as saved at the sweep's start (for a sweep saved without them: as its run saved it, or, for a
    run never started, built again from the sweep's config, overrides, grid point and seed), with ``key=value``
    ``overrides`` for every run (e.g. a longer ``total_steps``)."""
    reserved = [o for o in overrides if o.split("=", 1)[0].strip() in RESERVED_KEYS]
    if reserved:
        raise ConfigError([f"{o}: a run's {o.split('=', 1)[0].strip()} is fixed by the sweep; start a new sweep "
                           "to change it" for o in reserved], source=f"--resume {sweep_dir}")
    path = os.path.join(sweep_dir, "sweep.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--resume {sweep_dir}: no sweep.json there (is it a sweep directory? `r2ac sweep` "
                                "writes one at its start)")
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    runs = []
    for r in d["runs"]:
        leaf = r["run_dir"]
        run_dir = os.path.join(sweep_dir, leaf)
        cfg_path = next((p for p in (_config_path(sweep_dir, leaf), os.path.join(run_dir, "config.yaml"))
                         if os.path.isfile(p)), None)
        if cfg_path is not None:
            cfg = load_config(cfg_path, [*overrides, f"run_dir={run_dir}"])
        else:  # a run never started of a sweep saved without configs/: built again as build_sweep built it
            cfg = load_config(d["config"], [*d.get("overrides", []), *(f"{k}={v}" for k, v in r["point"].items()),
                                             f"seed={r['seed']}", *overrides, f"run_dir={run_dir}"])
            cfg.name, cfg.logger.wandb_group = r["name"], d["name"]
        runs.append(SweepRun(r["label"], dict(r["point"]), int(r["seed"]), r["name"], run_dir,
                             os.path.join(sweep_dir, "logs", leaf + ".log"), cfg))
    grid = [(k, list(v)) for k, v in d.get("grid", {}).items()]
    return Sweep(d["name"], sweep_dir, d["config"], list(d.get("overrides", [])), grid,
                 [int(x) for x in d.get("seeds", [])], runs)


def summary_row(run_dir: str, status: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """A results row from a run's ``summary.json`` (``None`` where there is none): its status (or ``status``),
    agent steps, final training return and final evaluation return; ``wall_s`` is left to the caller."""
    try:
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
    except (OSError, ValueError):
        return None
    ev = summary.get("eval") or {}
    row = {"status": status or summary.get("status", "finished"), "steps": int(summary.get("step", 0)),
           "final_return": summary.get("recent_return"), "eval_return": ev.get("mean")}
    for k in ("final_return", "eval_return"):
        row[k] = float("nan") if row[k] is None else float(row[k])
    return row


def _previous_wall(sweep: Sweep) -> Dict[str, float]:
    """Each run's wall time in the sweep's last ``results.csv`` (by run directory)."""
    try:
        with open(os.path.join(sweep.sweep_dir, "results.csv"), encoding="utf-8", newline="") as f:
            return {os.path.normpath(r["run_dir"]): float(r["wall_s"] or "nan") for r in csv.DictReader(f)}
    except (OSError, KeyError, ValueError):
        return {}


# ------------------------------------------------------------------ running


def run_resources(cfg: Config, capacity: float) -> Dict[str, float]:
    """What one run holds while it trains: ``cpus`` (its share of the sweep's CPU slots), the Ray task's own
    ``num_cpus`` and ``num_gpus``. A local-runtime run computes in its own process with
    ``runtime.torch_threads`` threads (0: torch's default, every core); a Ray-runtime run's learner and
    actors are Ray actors of one CPU each."""
    if cfg.runtime.kind == "ray":
        return {"cpus": float(cfg.runtime.num_actors + 1), "num_cpus": 0.0, "num_gpus": 0.0}
    threads = float(cfg.runtime.torch_threads or capacity)
    cpus = min(threads, capacity)
    return {"cpus": cpus, "num_cpus": cpus, "num_gpus": 1.0 if cfg.device == "cuda" else 0.0}


def task_config(cfg: Config, resources: Dict[str, float]) -> Config:
    """The config a run trains in its Ray task. Ray leaves every GPU of the node visible to a task that reserved
    none, so ``device=auto`` there would put every run of the sweep on the first GPU, which Ray counts as free:
    a local-runtime run that reserved no GPU trains on the CPU (``device=cuda`` reserves one per run). A
    Ray-runtime run decides in its learner process (``learner_device``)."""
    if cfg.device == "auto" and cfg.runtime.kind != "ray" and not resources["num_gpus"]:
        return replace(cfg, device="cpu")
    return cfg


def _holds_checkpoints(d: str) -> bool:
    for root, _, files in os.walk(d):
        if os.path.basename(root) == "checkpoints" and any(f.endswith(".pt") for f in files):
            return True
    return False


def _one_line(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())


@contextlib.contextmanager
def _interruptible():
    """Within the block, Ctrl-C and ``ray.cancel`` reach this process's main thread. A process started with
    SIGINT ignored (a background job of a script, ``nohup ... &``: the shell ignores it there, and Ray's
    workers inherit that from the driver) drops the interrupt with which Ray cancels a task, and a run would not
    stop when its sweep does; the default handler raises ``KeyboardInterrupt``, which the run turns into a clean
    stop. The previous handler is restored at the end."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not \
            signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_one(cfg: Config, log_path: str, resume: bool = False) -> Dict[str, Any]:
    """Train one run of a sweep (in a Ray task or in this process), its output to ``log_path``; ``resume``
    continues it from its newest checkpoint. Never raises: a failed run is a row with its one-line reason (and
    leaves no run directory without a checkpoint behind)."""
    from r2ac.runtime.pipeline import run_training

    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    t0 = time.time()
    row: Dict[str, Any] = {"status": "failed", "steps": 0, "final_return": float("nan"),
                           "eval_return": float("nan")}
    with open(log_path, "a", encoding="utf-8") as log, contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log), _interruptible():
        try:
            summary = run_training(cfg, resume=resume)
            row.update(status=summary.get("status", "finished"), steps=int(summary.get("step", 0)),
                       final_return=summary.get("recent_return"))
            if summary.get("eval"):
                row["eval_return"] = summary["eval"]["mean"]
        except KeyboardInterrupt:  # the run wrote its checkpoint and summary on the way out: report where it got
            row.update(summary_row(cfg.run_dir, "interrupted") or {"status": "interrupted"})
        except Exception as e:
            import traceback

            traceback.print_exc()  # the whole story in the log; the table gets one line
            row["status"] = f"failed: {_one_line(e)}"[:300]
            if os.path.isdir(cfg.run_dir) and not _holds_checkpoints(cfg.run_dir):
                shutil.rmtree(cfg.run_dir, ignore_errors=True)
    row["wall_s"] = time.time() - t0
    for k in ("final_return", "eval_return"):
        v = row[k]
        row[k] = float("nan") if v is None else float(v)
    return row


def _ray_task():
    import ray

    return ray.remote(max_retries=0)(run_one)


def _run_on_ray(sweep: Sweep, todo: Dict[int, bool], address: Optional[str], num_cpus: Optional[int],
                report) -> Dict[int, Dict[str, Any]]:
    import ray

    from r2ac.runtime import sigterm_as_interrupt

    capacity = float(num_cpus or os.cpu_count() or 1)
    owns = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            need = max(run_resources(sweep.runs[i].cfg, capacity)["cpus"] for i in todo)
            ray.init(num_cpus=int(max(capacity, math.ceil(need))), include_dashboard=False, log_to_driver=False)
        owns = True
    try:
        # SIGTERM as Ctrl-C (ray.init's own handler would end this process at once, and the runs with it)
        with sigterm_as_interrupt():
            return _run_tasks(sweep, todo, report, float(ray.cluster_resources().get("CPU", capacity)))
    finally:
        if owns:
            ray.shutdown()


def _run_tasks(sweep: Sweep, todo: Dict[int, bool], report, capacity: float) -> Dict[int, Dict[str, Any]]:
    """Start the runs ``todo`` (index -> resume it) as Ray tasks while ``capacity`` CPUs allow and collect
    their rows; on Ctrl-C (or SIGTERM) the running ones are cancelled (each stops after its update and writes
    its checkpoint and summary) and ``_Interrupted`` carries the rows."""
    import ray

    task = _ray_task()
    results: Dict[int, Dict[str, Any]] = {}
    waiting = list(todo)
    running: Dict[Any, Tuple[int, float]] = {}
    used = 0.0
    try:
        while waiting or running:
            # start runs in order while their CPUs are free (one always runs, whatever it asks for)
            while waiting:
                i = waiting[0]
                res = run_resources(sweep.runs[i].cfg, capacity)
                if running and used + res["cpus"] > capacity + 1e-9:
                    break
                ref = task.options(num_cpus=res["num_cpus"], num_gpus=res["num_gpus"]).remote(
                    task_config(sweep.runs[i].cfg, res), sweep.runs[i].log_path, todo[i])
                running[ref] = (i, res["cpus"])
                used += res["cpus"]
                waiting.pop(0)
                report("start", sweep.runs[i], None)
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                i, cpus = running.pop(ref)
                used -= cpus
                try:
                    results[i] = ray.get(ref)
                except Exception as e:  # the task itself died (its worker process lost)
                    results[i] = {"status": f"failed: {_one_line(e)}"[:300], "steps": 0,
                                  "final_return": float("nan"), "eval_return": float("nan"),
                                  "wall_s": float("nan")}
                report("done", sweep.runs[i], results[i])
    except KeyboardInterrupt:
        t0 = time.time()
        for ref in running:  # the runs get a KeyboardInterrupt: each writes a checkpoint and stops
            ray.cancel(ref)
        for ref, (i, _) in running.items():
            try:
                results[i] = ray.get(ref, timeout=120)
            except Exception:  # cancelled: the run's summary says where it stopped
                row = summary_row(sweep.runs[i].run_dir, "interrupted")
                if row is not None:
                    results[i] = dict(row, wall_s=time.time() - t0)
        raise _Interrupted(results)
    return results


class _Interrupted(Exception):
    def __init__(self, results):
        super().__init__("interrupted")
        self.results = results


def run_sweep(sweep: Sweep, *, local: bool = False, address: Optional[str] = None,
              num_cpus: Optional[int] = None, out=None, resume: bool = False) -> List[Dict[str, Any]]:
    """Run every run of ``sweep`` and write ``results.csv``; returns the result rows (in run order). With
    ``resume`` (a sweep from :func:`load_sweep`) the runs whose summary says finished at their ``total_steps``
    are kept, those with a checkpoint continue from it and the others start."""
    out = out or sys.stdout
    total = len(sweep.runs)
    results: List[Optional[Dict[str, Any]]] = [None] * total
    todo: Dict[int, bool] = {}  # run index -> resume it from its checkpoint
    if resume:
        wall = _previous_wall(sweep)
        for i, run in enumerate(sweep.runs):
            row = summary_row(run.run_dir)
            if row is not None and row["status"] == "finished" and row["steps"] >= run.cfg.total_steps:
                results[i] = dict(row, wall_s=wall.get(os.path.normpath(run.run_dir), float("nan")))
            else:
                todo[i] = _holds_checkpoints(run.run_dir)
    else:
        if os.path.isdir(sweep.sweep_dir) and os.listdir(sweep.sweep_dir):
            raise FileExistsError(f"sweep directory {sweep.sweep_dir} exists and is not empty; continue it with "
                                  f"`r2ac sweep --resume {sweep.sweep_dir}`, or give another --name")
        save_sweep(sweep)
        todo = {i: False for i in range(total)}
    finished = [total - len(todo)]
    resumed = {id(sweep.runs[i]) for i, again in todo.items() if again}

    def report(event: str, run: SweepRun, row: Optional[Dict[str, Any]]) -> None:
        if event == "start":
            how = "resumed" if id(run) in resumed else "started"
            print(f"[sweep {sweep.name}] {how} {run.title} ({run.run_dir})", file=out, flush=True)
        else:
            finished[0] += 1
            print(f"[sweep {sweep.name}] {finished[0]}/{total} {run.title}: {row['status']}, {row['steps']:,} steps, "
                  f"return {_fmt(row['final_return'])}, {_fmt(row['wall_s'], 1)} s", file=out, flush=True)

    if resume:
        print(f"[sweep {sweep.name}] {total - len(todo)} of {total} runs finished before: kept; "
              f"{sum(todo.values())} resume from their checkpoints, {len(todo) - sum(todo.values())} start",
              file=out, flush=True)
    interrupted = False
    if not todo:
        pass
    elif local:
        for i, resume_it in todo.items():
            run = sweep.runs[i]
            report("start", run, None)
            results[i] = run_one(run.cfg, run.log_path, resume_it)
            report("done", run, results[i])
            if results[i]["status"] == "interrupted":
                interrupted = True
                break
    else:
        try:
            done = _run_on_ray(sweep, todo, address, num_cpus, report)
        except _Interrupted as e:
            done, interrupted = e.results, True
        for i, row in done.items():
            results[i] = row
    rows = result_rows(sweep, results)
    write_results(sweep, rows)
    print(format_table(sweep, rows), file=out, flush=True)
    if interrupted:
        raise KeyboardInterrupt
    return rows


# ------------------------------------------------------------------ the results table


def result_rows(sweep: Sweep, results: Sequence[Optional[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    rows = []
    for run, res in zip(sweep.runs, results):
        res = res or {"status": "not run", "steps": 0, "final_return": float("nan"), "eval_return": float("nan"),
                      "wall_s": float("nan")}
        rows.append({"run": run.label or "-", "seed": run.seed, **{k: run.point.get(k, "") for k, _ in sweep.grid},
                     **{k: res.get(k) for k in ("status", "steps", "final_return", "eval_return", "wall_s")},
                     "run_dir": run.run_dir})
    return rows


def _fmt(v: Any, digits: int = 3) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.{digits}f}"
    return str(v)


def write_results(sweep: Sweep, rows: List[Dict[str, Any]]) -> str:
    cols = ["run", "seed", *[k for k, _ in sweep.grid], *RESULT_COLUMNS[2:]]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(cols)
    for r in rows:
        w.writerow(["" if isinstance(r[c], float) and math.isnan(r[c]) else
                    (f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]) for c in cols])
    path = os.path.join(sweep.sweep_dir, "results.csv")
    atomic_write_text(path, buf.getvalue())
    return path


def format_table(sweep: Sweep, rows: List[Dict[str, Any]]) -> str:
    """The runs (one line each) and, per grid point, the mean final return over its finished seeds."""
    cols = ["run", "seed", "status", "steps", "final_return", "eval_return", "wall_s"]
    cells = [[_fmt(r[c], 1 if c == "wall_s" else 3) if c != "steps" else f"{r[c]:,}" for c in cols] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    lines = [f"sweep {sweep.name}: {len(rows)} runs in {sweep.sweep_dir} (results.csv)",
             "  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(x.ljust(w) for x, w in zip(cell, widths)) for cell in cells]
    if sweep.grid or len(sweep.seeds) > 1:
        lines.append("")
        lines.append("per grid point, over finished seeds: final return mean +- std (n)")
        for label in dict.fromkeys(r["run"] for r in rows):
            vals = [r["final_return"] for r in rows if r["run"] == label and str(r["status"]) == "finished"
                    and not math.isnan(r["final_return"])]
            if vals:
                mean = sum(vals) / len(vals)
                std = (sum((v - mean) ** 2 for v in vals) / len(vals)) ** 0.5
                lines.append(f"  {label}: {mean:.3f} +- {std:.3f} ({len(vals)})")
            else:
                lines.append(f"  {label}: - (0)")
    return "\n".join(lines)
