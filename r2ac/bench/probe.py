"""Linear probes: what a trained agent's recurrent state holds, told apart from what its heads make of it.

An answers tool (tools/*_answers.py) says which episodes an agent answers right; a probe says whether the state
its heads read held what those answers needed. ``probe_right`` fits a softmax regression from the state at the
query (one row per episode) to a label of the episode (the count of flashes, its parity, ...) on one set of
episodes and scores it on another: a label the probe reads right on held-out episodes is in the state, linearly.
The agent's heads are linear too (``model.head_hidden`` 0), so a label the probe reads and the agent does not
answer is kept but not in a form its read-out can use.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def state_rows(state: Any) -> np.ndarray:
    """One row per env of a policy's state: a ``PolicyState``'s core (or any tensor, array, dict, list or tuple of
    them, each ``[B, ...]``) flattened per env and joined in a fixed order (dict keys sorted) -> ``[B, D]`` float64."""
    state = getattr(state, "core", state)
    if isinstance(state, dict):
        parts = [state_rows(state[k]) for k in sorted(state)]
    elif isinstance(state, (list, tuple)):
        parts = [state_rows(s) for s in state]
    else:
        a = state.detach().cpu().numpy() if isinstance(state, torch.Tensor) else np.asarray(state)
        if a.ndim < 1:
            raise ValueError(f"a state part must have one row per env, got a scalar {a!r}")
        return a.reshape(len(a), -1).astype(np.float64)
    if not parts:
        raise ValueError("the state holds no tensors to probe")
    if len({len(p) for p in parts}) != 1:
        raise ValueError(f"the state's parts have different numbers of rows: {[len(p) for p in parts]}")
    return np.concatenate(parts, axis=1)


def fit_softmax_probe(x: np.ndarray, labels: np.ndarray, classes: int, l2: float = 1e-3, iters: int = 500):
    """A softmax regression from ``x`` [n, D] to ``labels`` [n] in 0 .. ``classes`` - 1, on standardised
    features with an L2 penalty ``l2`` on the weights (full-batch L-BFGS, float64, deterministic). Returns
    ``predict(x) -> labels``."""
    x, labels = np.asarray(x, np.float64), np.asarray(labels)
    if x.ndim != 2 or labels.shape != (len(x),):
        raise ValueError(f"x must be [n, D] and labels [n], got {x.shape} and {labels.shape}")
    if classes < 2:
        raise ValueError(f"a probe tells 2 classes or more apart, got classes={classes}")
    if len(x) == 0 or labels.min() < 0 or labels.max() >= classes:
        raise ValueError(f"labels must be in 0 .. {classes - 1} and at least one row given, "
                         f"got {len(x)} rows in {labels.min() if len(x) else '-'} .. {labels.max() if len(x) else '-'}")
    mean, scale = x.mean(0), x.std(0) + 1e-8
    X = torch.from_numpy((x - mean) / scale)
    y = torch.from_numpy(labels.astype(np.int64))
    W = torch.zeros(x.shape[1], classes, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([W, b], max_iter=iters, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(X @ W + b, y) + l2 * (W * W).sum()
        loss.backward()
        return loss

    opt.step(closure)
    W, b = W.detach(), b.detach()

    def predict(z: np.ndarray) -> np.ndarray:
        Z = torch.from_numpy((np.asarray(z, np.float64) - mean) / scale)
        return (Z @ W + b).argmax(1).numpy()

    return predict


def probe_right(x: np.ndarray, labels: np.ndarray, classes: int, held_out: np.ndarray) -> np.ndarray:
    """Fit a probe (``fit_softmax_probe``) on the rows of ``x`` not ``held_out`` (a bool mask [n]) and say for each
    held-out row whether it reads that row's label right -> bool [held_out.sum()], in row order."""
    held_out = np.asarray(held_out, bool)
    if held_out.shape != (len(x),) or held_out.all() or not held_out.any():
        raise ValueError("held_out must be a bool mask over the rows with both fitted and held-out rows")
    labels = np.asarray(labels)
    predict = fit_softmax_probe(np.asarray(x)[~held_out], labels[~held_out], classes)
    return predict(np.asarray(x)[held_out]) == labels[held_out]
