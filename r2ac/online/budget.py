"""Per-step compute estimates, for matching learners at an equal compute budget (Javed et al. 2023, App. A.7).

Convention of Javed et al. 2023: count multiplications, additions, divisions and subtractions as one operation
each, but count a dot product of length m as m operations (one per weight); RTRL costs about 6 operations
per recurrent parameter and step on top of the forward pass; T-BPTT with truncation k costs k + 1 forward
passes. With x = input features, h = features (hidden units), k = truncation, u = features per stage:

    lstm  (T-BPTT k)        (k + 1)(4h^2 + 4hx + 4h)                          (A.7)
    gru   (T-BPTT k)        (k + 1)(3h^2 + 3hx + 3h)                          (A.7's rule for 3 gates)
    columnar (RTRL)         h(4x + 8) + 6 h(4x + 8)                           (A.7)
    ccn   (RTRL, u/stage)   h(2h + 4x + 4) + 6u(2h + 4x + 4)                  (A.7; constructive: u = 1)
    elstm (RTRL)            h(3x + h + 8) + 6(2hx + 4h) + 2(hx + h^2)         (ours: F, Z, O rows, W_o, gates;
                                                                               6 ops per recurrent parameter
                                                                               F, Z, w_f, w_z, b_f, b_z;
                                                                               backprop into O and W_o)
    rtu   (RTRL, linear)    h(2x + 10) + 6(2hx + 2h)                          (ours: W1 x, W2 x, the 2x2
                                                                               rotation; 6 per recurrent
                                                                               parameter W1, W2, nu, theta)
    lru   (1 layer, T-BPTT k) (k + 1)(4hx + 10h)   (ours: complex B x and C h)

The linear prediction head (one weight per feature) is not counted, as in A.7. These are estimates to
choose sizes, not measurements.
"""

from __future__ import annotations

from typing import Optional

RTRL_FORMULAS = ("columnar", "ccn", "constructive", "elstm", "rtu")
TBPTT_FORMULAS = ("lstm", "gru", "lru")


def flops_per_step(core: str, x: int, h: int, k: Optional[int] = None, u: Optional[int] = None) -> int:
    """Estimated operations per step (forward + learning) for ``core`` with x inputs and h features."""
    if core == "lstm":
        return (_need(k, "k") + 1) * (4 * h * h + 4 * h * x + 4 * h)
    if core == "gru":
        return (_need(k, "k") + 1) * (3 * h * h + 3 * h * x + 3 * h)
    if core == "lru":
        return (_need(k, "k") + 1) * (4 * h * x + 10 * h)
    if core == "columnar":
        return 7 * h * (4 * x + 8)
    if core in ("ccn", "constructive"):
        u = 1 if core == "constructive" else _need(u, "u")
        per = 2 * h + 4 * x + 4
        return h * per + 6 * u * per
    if core == "elstm":
        return h * (3 * x + h + 8) + 6 * (2 * h * x + 4 * h) + 2 * (h * x + h * h)
    if core == "rtu":
        return h * (2 * x + 10) + 6 * (2 * h * x + 2 * h)
    raise ValueError(f"no compute formula for core {core!r}; known: {RTRL_FORMULAS + TBPTT_FORMULAS}")


def size_for_budget(core: str, x: int, budget: float, k: Optional[int] = None, u: Optional[int] = None,
                    max_h: int = 4096) -> int:
    """The largest h (a multiple of u for ccn) whose estimated cost is <= budget (at least 1 / u)."""
    step = u if core == "ccn" else 1
    best = step
    h = step
    while h <= max_h and flops_per_step(core, x, h, k, u) <= budget:
        best = h
        h += step
    return best


def _need(v, name):
    if v is None:
        raise ValueError(f"this formula needs {name}")
    return int(v)
