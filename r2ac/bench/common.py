"""Shared helpers of the benchmark commands: timing, tables, CSV, machine description."""

from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
import torch

from r2ac.fileio import atomic_write


def machine_description() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    desc = f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads"
    if torch.cuda.is_available():
        desc += f", GPU {torch.cuda.get_device_name(0)}"
    return desc


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def median_time(fn: Callable[[], None], repeats: int, warmup: int = 1, device="cpu") -> float:
    """Median wall time of ``fn`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def format_table(rows: Sequence[Dict], columns: Sequence[str]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.0f}"
        return str(v)

    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def write_csv(path: str, rows: List[Dict], columns: Sequence[str]) -> None:
    def write(f):
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)

    atomic_write(path, write, text=True)


def print_markdown_and_csv(rows: List[Dict], columns: Sequence[str], out: str = "") -> None:
    """The probe tools' output: the rows as a markdown table on stdout (floats to 3 significant digits) and,
    with ``out``, as CSV there."""
    print("| " + " | ".join(columns) + " |\n|" + " --- |" * len(columns))
    for r in rows:
        print("| " + " | ".join(f"{r[k]:.3g}" if isinstance(r[k], float) else str(r[k]) for k in columns) + " |")
    if out:
        write_csv(out, rows, columns)


def run_labels(runs) -> list:
    """The table's name of each run: its directory name, or, where two runs share one (the same task and seed
    from two bench directories), ``BENCH_DIR/NAME`` (the directory above ``runs/``)."""
    paths = [os.path.normpath(r) for r in runs]
    names = [os.path.basename(p) for p in paths]
    labels = []
    for p, n in zip(paths, names):
        if names.count(n) > 1:
            parent = os.path.dirname(p)
            bench = os.path.dirname(parent) if os.path.basename(parent) == "runs" else parent
            n = f"{os.path.basename(bench)}/{n}"
        labels.append(n)
    return labels


def labelled_runs(runs) -> Iterator[tuple]:
    """``(run, label)`` for each of ``runs`` (labels: ``run_labels``), torch on one thread while the caller's
    loop body runs (``one_torch_thread``): the loop of the tools that play trained runs."""
    with one_torch_thread():
        yield from zip(runs, run_labels(runs))


def played_runs_parser(doc: str, episodes: int, switches: Optional[Dict[str, str]] = None) -> argparse.ArgumentParser:
    """The command line of a tool that plays trained runs' newest checkpoints on fresh envs (tools/*_memory.py):
    run directories, ``--episodes`` (default ``episodes``), ``--seed``, ``--out`` (a CSV of the table), and the
    tool's own on/off ``switches`` (``{"--flag": "help"}``); the description is the first paragraph of ``doc``.
    Parse with ``parse_played_runs``."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--episodes", type=int, default=episodes)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--out", default="", help="also write the table as CSV here")
    for flag, text in (switches or {}).items():
        p.add_argument(flag, action="store_true", help=text)
    return p


def parse_played_runs(p: argparse.ArgumentParser, argv, tool: str) -> argparse.Namespace:
    """``p.parse_args(argv)``, refusing fewer than one episode (the message names ``tool``)."""
    a = p.parse_args(argv)
    if a.episodes < 1:
        raise SystemExit(f"{tool}: --episodes must be >= 1")
    return a


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Torch on one thread inside the block (small batches: a thread pool only adds waiting on a busy
    machine), the previous setting after it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def report_table(header: Sequence[str], cells: List[Sequence[str]], rows: List[Dict], columns: Sequence[str],
                 out: str = "") -> None:
    """Print a markdown table (``header``, one line of ``cells`` per row) and, given ``out``, write ``rows``
    there as CSV with ``columns`` (the tools' output)."""
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join(["---"] * len(header)) + " |")
    for c in cells:
        print("| " + " | ".join(c) + " |")
    if out:
        write_csv(out, rows, columns)


#: the ``--untrained`` switch of the tools that play trained runs (``played_runs_parser``'s ``switches``)
UNTRAINED = {"--untrained": "freshly initialised weights of each run's config"}


def played_policies(a: argparse.Namespace) -> Iterator[tuple]:
    """``(label, policy)`` for each run of a command line parsed by ``parse_played_runs``: the run's newest
    checkpoint (sampled actions, seeded with ``--seed``), or with ``--untrained`` (``UNTRAINED``) a freshly
    initialised network of its config (``untrained_policy``); torch on one thread, as ``labelled_runs``."""
    from r2ac.api import load

    for run, label in labelled_runs(a.runs):
        fresh = getattr(a, "untrained", False)
        yield label, untrained_policy(run, a.seed) if fresh else load(run, greedy=False, seed=a.seed)


def untrained_policy(run: str, seed: int):
    """An ``r2ac.api.Policy`` of ``run``'s config (its ``config.yaml``) with freshly initialised weights (torch
    seeded with the config's ``seed``): what the tools that play trained runs compare them with (``--untrained``)."""
    from r2ac.api import Policy
    from r2ac.config import load_config
    from r2ac.envs import make_vec_env
    from r2ac.runtime import build_net

    cfg = load_config(os.path.join(run, "config.yaml"))
    venv = make_vec_env(cfg.env.id, 1, cfg.seed, **dict(cfg.env.options))
    torch.manual_seed(cfg.seed)
    net = build_net(cfg, venv.observation_shape, venv.num_actions, load_stem=False)
    net.observation_shape = tuple(venv.observation_shape)
    venv.close()
    return Policy(net, cfg, seed=seed)


def play_lockstep(policy, envs: Sequence, length: int, seed: int, states: Optional[list] = None,
                  outputs: Optional[list] = None) -> np.ndarray:
    """Reset ``envs`` (Gymnasium envs of fixed-length episodes giving channels-last frames) with seeds ``seed``,
    ``seed + 1``, ..., and play ``policy`` (``r2ac.api.Policy``-like: ``initial_state(n)``, ``act(obs, state,
    reward=, done=)``) on them in lockstep for the ``length`` steps of an episode; returns the rewards of the
    last step [len(envs)]. The envs keep the episode's state for the caller to read (what was asked, what was
    shown); given a list ``states``, the policy's state after its last step (the one its answer was read from,
    ``r2ac.bench.probe.state_rows``: [len(envs), D]) is appended to it, and given ``outputs`` (a policy with
    ``act_with_outputs``), what its heads read at that step (``core_output``: [len(envs), N]). Raises if an
    episode did not end at its last step."""
    frames = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    state, reward, done = policy.initial_state(len(envs)), None, None
    for t in range(length):
        obs = np.stack(frames).transpose(0, 3, 1, 2)  # channels first, as r2ac's envs give frames
        if outputs is not None and t == length - 1:
            action, state, out = policy.act_with_outputs(obs, state, reward=reward, done=done)
            outputs.append(out["core_output"].detach().cpu().double().numpy())
        else:
            action, state = policy.act(obs, state, reward=reward, done=done)
        steps = [env.step(int(a)) for env, a in zip(envs, action)]
        frames = [s[0] for s in steps]
        reward = np.array([s[1] for s in steps], np.float32)
        done = np.array([s[2] for s in steps])
    if not done.all():
        raise RuntimeError(f"an episode of {type(envs[0]).__name__} did not end after {length} steps")
    if states is not None:
        from r2ac.bench.probe import state_rows  # probe uses this module's one_torch_thread

        states.append(state_rows(state))
    return reward


def answers_tool_main(doc: str, argv, tool: str, env_id: str, task: str, row_of: Callable,
                      episodes: int = 3000, switches: Optional[Dict[str, str]] = None,
                      arguments: Optional[Dict[str, dict]] = None, many_rows: bool = False) -> int:
    """The main of a tool that splits a task's right answers (tools/*_answers.py): each run's newest checkpoint
    (``played_policies``) must have trained on an env whose id ends in ``env_id`` (else a ValueError naming
    ``task``); ``row_of(label, policy, options, episodes, seed)`` gives its row (a list of rows with
    ``many_rows``), with the tool's on/off ``switches`` (``{"--flag": "help"}``) and other ``arguments``
    (``{"--name": add_argument's keywords}``) passed as keywords (``flag=True``, ``name=value``); the rows are
    printed and, with ``--out``, written (``print_markdown_and_csv``), a column a row lacks (a run of other
    options) as nan."""
    p = played_runs_parser(doc, episodes=episodes, switches=switches)
    for flag, spec in (arguments or {}).items():
        p.add_argument(flag, **spec)
    a = parse_played_runs(p, argv, tool)
    names = [f.lstrip("-").replace("-", "_") for f in [*(switches or {}), *(arguments or {})]]
    given = {n: getattr(a, n) for n in names}
    rows = []
    for name, policy in played_policies(a):
        if not str(policy.config.env.id).endswith(env_id):
            raise ValueError(f"{name} trained on {policy.config.env.id}, not {task}")
        got = row_of(name, policy, dict(policy.config.env.options or {}), a.episodes, a.seed, **given)
        rows.extend(got if many_rows else [got])
    columns = list(dict.fromkeys(k for r in rows for k in r))  # runs of other options may have more columns
    print_markdown_and_csv([{k: r.get(k, float("nan")) for k in columns} for r in rows], columns, a.out)
    return 0


def share_right(right, seen) -> float:
    """The share answered right of the episodes counted in ``seen`` (arrays of ``tally_answers``' groups, or any
    slice of them): ``right.sum() / seen.sum()``, nan where no episode was seen (the answers tools' columns)."""
    total = seen.sum()
    return float(right.sum() / total) if total else float("nan")


def probed_row(episodes: int, probe: bool, least: int, play: Callable, columns: Callable) -> dict:
    """The row of an answers tool's ``played_row`` with its ``--probe`` switch: ``play(record)`` plays the episodes
    and returns the row (``record``: a dict for ``tally_answers`` to fill with ``--probe``, None without); with
    ``--probe`` the row gets ``columns(record)`` (the probes' reads), and fewer than ``least`` episodes are refused
    before anything is played (a probe is fit on every other episode and scored on the rest)."""
    if probe and episodes < least:
        raise ValueError(f"--probe needs at least {least} episodes (give 2000 or more), got {episodes}")
    record = {} if probe else None
    row = play(record)
    if probe:
        row.update(columns(record))
    return row


def tally_answers(policy, envs: Sequence, episodes: int, seed: int, group_of: Callable, groups: int,
                  record: Optional[dict] = None) -> tuple:
    """Play ``episodes`` episodes of ``policy`` on ``envs`` (fixed-length episodes of ``envs[0].span + 1`` steps)
    in rounds of ``play_lockstep``, round r seeded from ``seed + r * len(envs)``; each episode is counted in group
    ``group_of(env)`` (0 .. ``groups`` - 1, read off the env after its episode). Returns (right answers per group
    [groups], episodes per group [groups]). Given a dict ``record``, it is filled with each episode's
    ``"group"`` [episodes], ``"right"`` [episodes] and the policy's ``"state"`` at the answer [episodes, D], and
    for a policy with ``act_with_outputs`` its heads' input there, ``"output"`` [episodes, N] (for
    ``r2ac.bench.probe``)."""
    if episodes < 1 or not envs:
        raise ValueError(f"episodes and num_envs must be >= 1, got {episodes} and {len(envs)}")
    right, seen = np.zeros(groups), np.zeros(groups, int)
    done, rnd = 0, 0
    states, kept = ([], []) if record is not None else (None, None)
    outputs = [] if record is not None and hasattr(policy, "act_with_outputs") else None
    while done < episodes:
        n = min(len(envs), episodes - done)
        reward = play_lockstep(policy, envs[:n], envs[0].span + 1, seed + rnd * len(envs), states, outputs)
        for env, paid in zip(envs[:n], reward):
            k = group_of(env)
            seen[k] += 1
            right[k] += paid
            if kept is not None:
                kept.append((k, paid))
        done += n
        rnd += 1
    if record is not None:
        record["group"] = np.array([k for k, _ in kept], int)
        record["right"] = np.array([p for _, p in kept], float)
        record["state"] = np.concatenate(states)
        if outputs is not None:
            record["output"] = np.concatenate(outputs)
    return right, seen
