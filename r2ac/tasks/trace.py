"""Trace conditioning and trace patterning streams (Rafiee et al. 2022, as set up in Elelimy et al. 2024 and
Javed et al. 2023).

A stream is one long sequence of observations x(t) and a cumulant c(t); the learner predicts the return

    G(t) = sum_{k >= 0} gamma^k c(t + k + 1)          (Elelimy et al. 2024, Eq. 45; Javed et al. 2023, Eq. 1)

with c = the US. Observation layout: ``[CS features..., US, distractors...]``.

Trials follow each other without a break. A trial: the CS is on for one step at time s; the US is on for
one step at s + ISI if the trial's CS predicts it; the next CS comes ITI steps after the (possibly absent)
US, so a trial lasts ISI + ITI steps. ISI ~ U{24..36} and ITI ~ U{80..120} (integers, inclusive).

- ``trace_patterning`` (Javed et al. 2023, Sec. 4): 6 CS features; at a CS step exactly 3 of them are on, one of the
  C(6,3) = 20 patterns, drawn uniformly per trial; 10 patterns (drawn once per stream seed) are followed by
  the US, the other 10 are not.
- ``trace_conditioning`` (Elelimy et al. 2024, App. E): one CS feature, always followed by the US.

Distractors (5 features by default, "not predictive of the US"): each is an independent stream of one-step
pulses with per-step probability ``distractor_rate`` (default 1/130, about one pulse per trial, like the CS).
The papers do not state the distractors' statistics; this is our choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Optional, Tuple

import numpy as np

from r2ac.tasks.sequence import as_rng


@dataclass
class TraceStream:
    x: np.ndarray  # [T, D] float32 observations
    cumulant: np.ndarray  # [T] float32 (= the US channel)
    cs_times: np.ndarray  # [n_trials] step of each CS onset
    us_times: np.ndarray  # [n_trials] step of the US, -1 when the trial has none
    patterns: np.ndarray  # [n_trials] pattern index of each trial (0 for conditioning)
    isi: np.ndarray  # [n_trials]
    iti: np.ndarray  # [n_trials]
    us_patterns: np.ndarray  # indices of the patterns followed by the US
    pattern_table: np.ndarray  # [n_patterns, n_cs] the CS vector of each pattern
    n_cs: int
    n_distractors: int

    @property
    def us_index(self) -> int:
        return self.n_cs

    def returns(self, gamma: float) -> np.ndarray:
        return discounted_return(self.cumulant, gamma)


def discounted_return(c: np.ndarray, gamma: float) -> np.ndarray:
    """G(t) = sum_{k>=0} gamma^k c(t+k+1), computed backwards (G(T-1) = 0: the stream's end is cut)."""
    c = np.asarray(c, np.float64)
    G = np.zeros_like(c)
    acc = 0.0
    for t in range(len(c) - 2, -1, -1):
        acc = c[t + 1] + gamma * acc
        G[t] = acc
    return G


def _stream(steps: int, rng, pattern_table: np.ndarray, us_patterns: np.ndarray, isi: Tuple[int, int],
            iti: Tuple[int, int], n_distractors: int, distractor_rate: Optional[float]) -> TraceStream:
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if not (1 <= isi[0] <= isi[1]) or not (0 <= iti[0] <= iti[1]):
        raise ValueError(f"bad ISI {isi} or ITI {iti} range")
    rng = as_rng(rng)
    n_patterns, n_cs = pattern_table.shape
    D = n_cs + 1 + n_distractors
    x = np.zeros((steps, D), np.float32)
    us_set = set(int(p) for p in us_patterns)
    cs_t, us_t, pats, isis, itis = [], [], [], [], []
    t = int(rng.integers(0, iti[1] + 1))  # the first CS comes after a random part of an ITI
    while t < steps:
        p = int(rng.integers(0, n_patterns))
        a = int(rng.integers(isi[0], isi[1] + 1))
        b = int(rng.integers(iti[0], iti[1] + 1))
        x[t, :n_cs] = pattern_table[p]
        u = t + a if p in us_set else -1
        if 0 <= u < steps:
            x[u, n_cs] = 1.0
        cs_t.append(t)
        us_t.append(u)
        pats.append(p)
        isis.append(a)
        itis.append(b)
        t += a + b
    if n_distractors:
        rate = distractor_rate if distractor_rate is not None else 1.0 / (0.5 * (sum(isi) + sum(iti)))
        x[:, n_cs + 1:] = (rng.random((steps, n_distractors)) < rate).astype(np.float32)
    as_arr = lambda v: np.asarray(v, np.int64)  # noqa: E731
    return TraceStream(x=x, cumulant=x[:, n_cs].copy(), cs_times=as_arr(cs_t), us_times=as_arr(us_t),
                       patterns=as_arr(pats), isi=as_arr(isis), iti=as_arr(itis),
                       us_patterns=np.sort(as_arr(list(us_set))), pattern_table=pattern_table,
                       n_cs=n_cs, n_distractors=n_distractors)


def trace_patterning(steps: int, rng=None, n_cs: int = 6, n_active: int = 3, n_us_patterns: Optional[int] = None,
                     isi: Tuple[int, int] = (24, 36), iti: Tuple[int, int] = (80, 120), n_distractors: int = 5,
                     distractor_rate: Optional[float] = None) -> TraceStream:
    """The trace patterning stream of Javed et al. 2023 (defaults: 6 CS, 3 on, 20 patterns, 10 followed by the US)."""
    rng = as_rng(rng)
    combos = list(combinations(range(n_cs), n_active))
    table = np.zeros((len(combos), n_cs), np.float32)
    for i, c in enumerate(combos):
        table[i, list(c)] = 1.0
    n_us = len(combos) // 2 if n_us_patterns is None else n_us_patterns
    us_patterns = rng.choice(len(combos), size=n_us, replace=False)
    return _stream(steps, rng, table, us_patterns, isi, iti, n_distractors, distractor_rate)


def trace_conditioning(steps: int, rng=None, isi: Tuple[int, int] = (24, 36), iti: Tuple[int, int] = (80, 120),
                       n_distractors: int = 5, distractor_rate: Optional[float] = None) -> TraceStream:
    """Trace conditioning: one CS feature, always followed by the US after ISI steps."""
    return _stream(steps, as_rng(rng), np.ones((1, 1), np.float32), np.array([0]), isi, iti, n_distractors,
                   distractor_rate)


def oracle_predictions(stream: TraceStream, gamma: float) -> np.ndarray:
    """The best prediction of G(t) from the history, estimated from the stream itself: the mean of G over
    all steps with the same (pattern of the last CS, steps since it, whether its US has come yet). Its MSRE
    is the error floor left by the random ISI (the papers' "near perfect prediction"); fitted in-sample, so
    slightly optimistic."""
    G = stream.returns(gamma)
    T = len(G)
    t = np.arange(T)
    last = np.searchsorted(stream.cs_times, t, side="right") - 1  # index of the last CS at or before t
    has = last >= 0
    li = np.where(has, last, 0)
    since = np.where(has, t - stream.cs_times[li], t)
    us = stream.us_times[li]
    seen = has & (us >= 0) & (us <= t)
    pat = np.where(has, stream.patterns[li], -1)
    key = (pat + 1) * 10_000_000 + np.minimum(since, 4_999_999) * 2 + seen
    _, inv = np.unique(key, return_inverse=True)
    sums = np.bincount(inv, weights=G)
    counts = np.bincount(inv)
    return sums[inv] / counts[inv]
