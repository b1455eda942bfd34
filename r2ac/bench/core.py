"""``r2ac bench core``: exact RTRL vs truncated BPTT for a recurrent core, learner and actor side.

Learner update = forward over a segment of M steps from a carried state + backward of a loss on every
output (what the IMPALA learner does). Rates are agent steps per second (M x B per update).

- ``learner_rtrl``: identity 1 (autograd over the segment + one carry correction), exact gradient.
- ``learner_tbptt``: the same segment with the gradient stopped at its start.
- ``work_tbptt_over_rtrl``: matrix-product work (``torch.utils.flop_counter``) of the TBPTT update over the
  RTRL one: the throughput ratio a core could reach if only arithmetic counted. Below 1 the exact
  correction itself is arithmetic (the fast-weight programmer's); near 1 any gap is overhead.
- ``learner_paper``: the paper's implementation style: the sensitivity recursion at every step,
  sensitivities moved as extra recurrent state, a gradient contribution per step (also exact).
- ``actor_hidden``: the actor's per-step no-grad inference (hidden state only), M calls of one step.
- ``transport``: the actor's end-of-trajectory sensitivity update, one re-run of the segment with the
  batched closed form (identity 2), vs ``recursion``: the per-step N x D sensitivity recursion.
- peak memory of one learner update (batch incl. sensitivities + activations + gradients): on CUDA
  ``max_memory_allocated``; on CPU the peak resident set of a fresh subprocess (VmHWM, reset first).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
from typing import Dict, List

import torch

from r2ac.bench.common import format_table, machine_description, median_time, write_csv
from r2ac.cores import make_core

COLUMNS = [
    "core", "M", "learner_rtrl_sps", "learner_tbptt_sps", "rtrl_over_tbptt", "work_tbptt_over_rtrl",
    "learner_paper_sps",
    "actor_hidden_sps", "transport_ms", "recursion_ms", "transport_speedup",
    "mem_rtrl_mb", "mem_tbptt_mb", "mem_ratio",
]


def _setup(core_name, learning, N, D, B, M, device, seed=0):
    torch.manual_seed(seed)
    core = make_core(core_name, D, N, learning=learning).to(device)
    g = torch.Generator(device="cpu").manual_seed(seed + 1)
    x = torch.randn(M, B, D, generator=g).to(device)
    reset = torch.zeros(M, B, dtype=torch.bool, device=device)
    w = torch.randn(M, B, core.output_size, generator=g).to(device) / (M * B)
    with torch.no_grad():  # a realistic carried state: after a warm-up segment
        _, state = core(x[: min(M, 20)], core.initial_state(B), reset[: min(M, 20)])
    return core, x, reset, w, state


def learner_update(core, x, reset, w, state):
    y, _ = core(x, state, reset, return_state=False)
    (y * w).sum().backward()


def paper_learner_update(core, x, reset, w, state):
    """The sensitivity recursion at every step (segments of length 1), one gradient per step."""
    for t in range(x.shape[0]):
        y, state = core(x[t:t + 1], state, reset[t:t + 1])
        (y * w[t:t + 1]).sum().backward()


def actor_hidden(core, x, reset, state):
    with torch.no_grad():
        h = {k: state[k] for k in core.hidden_keys}
        for t in range(x.shape[0]):
            _, h = core(x[t:t + 1], h, reset[t:t + 1], sensitivities=False)


def transport(core, x, reset, state):
    with torch.no_grad():
        core(x, state, reset)


def recursion(core, x, reset, state):
    with torch.no_grad():
        for t in range(x.shape[0]):
            _, state = core(x[t:t + 1], state, reset[t:t + 1])


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM in /proc/self/status")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS")


def _memory_child(q, core_name, learning, N, D, B, M, device):
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    core = make_core(core_name, D, N, learning=learning).to(device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _rss_mb()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak-RSS high-water mark
    # the learner's batch: a segment and its carried start state (with sensitivities for RTRL)
    x = torch.randn(M, B, D, device=device)
    reset = torch.zeros(M, B, dtype=torch.bool, device=device)
    w = torch.randn(M, B, core.output_size, device=device)
    state = {k: torch.randn(v.shape, device=device).mul_(0.01) for k, v in core.initial_state(B).items()}
    learner_update(core, x, reset, w, state)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        q.put((torch.cuda.max_memory_allocated() - base) / 2**20)
    else:
        q.put(_peak_rss_mb() - base)


_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_ARENA_MAX": "1"}


def peak_memory_mb(core_name, learning, N, D, B, M, device) -> float:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_memory_child, args=(q, core_name, learning, N, D, B, M, device))
    # glibc: serve blocks >= 64 KiB by mmap and return them on free, so the probe's resident set follows
    # the live tensors (otherwise freed pages stay resident and the peak depends on allocation history)
    saved = {k: os.environ.get(k) for k in _MALLOC_ENV}
    os.environ.update(_MALLOC_ENV)
    try:
        p.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    while True:  # a child that dies (e.g. out of memory) must not hang the benchmark
        try:
            val = q.get(timeout=1.0)
            break
        except queue.Empty:
            if not p.is_alive():
                raise RuntimeError(f"memory probe for {core_name}/{learning} M={M} died (exit code {p.exitcode})")
    p.join()
    return float(val)


def learner_macs(core, x, reset, w, state) -> float:
    """Multiply-accumulates of the matrix products in one learner update (flop counter / 2)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        learner_update(core, x, reset, w, state)
    core.zero_grad(set_to_none=True)
    return counter.get_total_flops() / 2


def run(core_name="elstm", N=512, D=257, B=32, Ms=(10, 50, 100, 300, 1000), repeats=5, device="cpu",
        paper_max_M=300, memory=True, out_dir="bench_out") -> List[Dict]:
    rows = []
    for M in Ms:
        row: Dict = {"core": core_name, "M": M}
        c_r, x, reset, w, st_r = _setup(core_name, "rtrl", N, D, B, M, device)
        c_t, _, _, _, st_t = _setup(core_name, "tbptt", N, D, B, M, device)
        # interleave RTRL and TBPTT measurements in one process so both see the same machine state
        t_r, t_t = [], []
        for _ in range(repeats):
            t_r.append(median_time(lambda: learner_update(c_r, x, reset, w, st_r), 1, 1, device))
            t_t.append(median_time(lambda: learner_update(c_t, x, reset, w, st_t), 1, 1, device))
        t_r.sort(), t_t.sort()
        row["learner_rtrl_sps"] = M * B / t_r[len(t_r) // 2]
        row["learner_tbptt_sps"] = M * B / t_t[len(t_t) // 2]
        row["rtrl_over_tbptt"] = row["learner_rtrl_sps"] / row["learner_tbptt_sps"]
        row["work_tbptt_over_rtrl"] = learner_macs(c_t, x, reset, w, st_t) / learner_macs(c_r, x, reset, w, st_r)
        if M <= paper_max_M:
            t = median_time(lambda: paper_learner_update(c_r, x, reset, w, st_r), max(1, repeats // 2 + 1), 1, device)
            row["learner_paper_sps"] = M * B / t
        row["actor_hidden_sps"] = M * B / median_time(lambda: actor_hidden(c_r, x, reset, st_r), repeats, 1, device)
        tt = median_time(lambda: transport(c_r, x, reset, st_r), repeats, 1, device)
        tr = median_time(lambda: recursion(c_r, x, reset, st_r), max(3, repeats // 2 + 1), 1, device)
        row["transport_ms"], row["recursion_ms"] = tt * 1e3, tr * 1e3
        row["transport_speedup"] = tr / tt
        if memory:
            row["mem_rtrl_mb"] = peak_memory_mb(core_name, "rtrl", N, D, B, M, device)
            row["mem_tbptt_mb"] = peak_memory_mb(core_name, "tbptt", N, D, B, M, device)
            row["mem_ratio"] = row["mem_rtrl_mb"] / row["mem_tbptt_mb"]
        rows.append(row)
        print(format_table([row], COLUMNS).splitlines()[-1], flush=True)
    return rows


def plot(rows: List[Dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    Ms = [r["M"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    for key, label in [("learner_rtrl_sps", "learner RTRL (identity 1)"), ("learner_tbptt_sps", "learner TBPTT"),
                       ("learner_paper_sps", "learner RTRL, per-step recursion (paper style)")]:
        pts = [(r["M"], r[key]) for r in rows if key in r]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label)
    ax.set_xscale("log"), ax.set_xlabel("segment length M"), ax.set_ylabel("agent steps / s")
    ax.set_title("learner update throughput"), ax.legend(fontsize=8), ax.grid(alpha=0.3)
    ax = axes[1]
    if all("mem_rtrl_mb" in r for r in rows):
        ax.plot(Ms, [r["mem_rtrl_mb"] for r in rows], marker="o", label="RTRL (untruncated credit)")
        ax.plot(Ms, [r["mem_tbptt_mb"] for r in rows], marker="o", label="TBPTT (credit span M)")
        ax.set_xscale("log"), ax.set_yscale("log"), ax.set_xlabel("segment length M"), ax.set_ylabel("peak MB")
        ax.set_title("learner peak memory"), ax.legend(fontsize=8), ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="r2ac bench core", description=__doc__.split("\n\n")[0])
    p.add_argument("--core", default="elstm")
    p.add_argument("--hidden", type=int, default=512, help="N")
    p.add_argument("--input", type=int, default=257, help="D")
    p.add_argument("--batch", type=int, default=32, help="B")
    p.add_argument("--M", type=int, nargs="+", default=[10, 50, 100, 300, 1000])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--paper-max-M", type=int, default=300, help="skip the slow per-step learner above this M")
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0 = torch's default)")
    p.add_argument("--out", default="bench_out", help="folder for core.csv and core.png")
    a = p.parse_args(argv)
    torch.set_flush_denormal(True)  # as in training (r2ac.runtime.set_fast_math)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    print(f"r2ac bench core: {a.core} N={a.hidden} D={a.input} B={a.batch} on {a.device}; {machine_description()}")
    print(format_table([], COLUMNS))
    rows = run(a.core, a.hidden, a.input, a.batch, a.M, a.repeats, a.device, a.paper_max_M, not a.no_memory, a.out)
    print()
    print(format_table(rows, COLUMNS))
    os.makedirs(a.out, exist_ok=True)
    write_csv(os.path.join(a.out, f"core_{a.core}.csv"), rows, COLUMNS)
    plot(rows, os.path.join(a.out, f"core_{a.core}.png"))
    print(f"\nwrote {a.out}/core_{a.core}.csv and {a.out}/core_{a.core}.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
