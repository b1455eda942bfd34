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
    them, each ``[B, ...]``; None parts skipped) flattened per env and joined in a fixed order (dict keys sorted)
    -> ``[B, D]`` float64."""
    state = getattr(state, "core", state)
    if isinstance(state, dict):
        parts = [state_rows(state[k]) for k in sorted(state) if state[k] is not None]
    elif isinstance(state, (list, tuple)):
        parts = [state_rows(s) for s in state if s is not None]
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


def readout_net(inputs: int, actions: int, hidden: int = 0, norm: bool = False) -> torch.nn.Module:
    """A read-out like the agent's heads (``model.head_hidden``, ``model.head_norm``): optionally layer-normalised
    input, optionally one shared tanh layer of ``hidden`` units, then ``actions`` policy logits and one value."""
    if inputs < 1 or actions < 2 or hidden < 0:
        raise ValueError(f"a read-out needs inputs >= 1, actions >= 2 and hidden >= 0, "
                         f"got {inputs}, {actions}, {hidden}")
    layers: list = [torch.nn.LayerNorm(inputs, elementwise_affine=False)] if norm else []
    if hidden:
        layers += [torch.nn.Linear(inputs, hidden), torch.nn.Tanh()]
    layers.append(torch.nn.Linear(hidden or inputs, actions + 1))
    return torch.nn.Sequential(*layers).double()


def train_readout(features: np.ndarray, answers: np.ndarray, actions: int, held_out: np.ndarray, *, hidden: int = 0,
                  norm: bool = False, updates: int = 20000, batch: int = 32, learning_rate: float = 6e-3,
                  entropy_cost: float = 0.01, eval_every: int = 500, seed: int = 0, supervised: bool = False) -> dict:
    """Whether a fresh read-out (``readout_net``) learns to answer from fixed ``features`` [n, D] (an agent's core
    outputs at the query) by the agent's kind of learning: each update samples ``batch`` fitted rows, samples an
    action from the read-out's policy, pays 1 where it is the row's ``answers`` entry, and steps Adam (AMSGrad,
    ``learning_rate``) on the policy gradient with the read-out's own value as baseline, its squared error and an
    entropy bonus ``entropy_cost``: a contextual bandit, no memory to learn. Every ``eval_every`` updates the
    greedy answers on the ``held_out`` rows are scored. ``supervised``: cross-entropy on the right answers instead
    (no sampling, no value): what the read-out could learn with the answer given, not only its reward. Returns
    ``curve`` [(updates, share right)], ``right`` (bool per held-out row at the end) and ``updates_to_0.9`` (the
    first scored update at 0.9 or more, else None)."""
    features, answers, held_out = np.asarray(features, np.float64), np.asarray(answers), np.asarray(held_out, bool)
    if features.ndim != 2 or answers.shape != (len(features),) or held_out.shape != (len(features),):
        raise ValueError(f"features must be [n, D], answers and held_out [n], got {features.shape}, "
                         f"{answers.shape}, {held_out.shape}")
    if held_out.all() or not held_out.any() or answers.min() < 0 or answers.max() >= actions:
        raise ValueError(f"held_out must leave rows on both sides and answers lie in 0 .. {actions - 1}")
    if updates < 1 or batch < 1 or eval_every < 1:
        raise ValueError(f"updates, batch and eval_every must be >= 1, got {updates}, {batch}, {eval_every}")
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = readout_net(features.shape[1], actions, hidden, norm)
    opt = torch.optim.Adam(net.parameters(), lr=learning_rate, amsgrad=True)
    fx, fa = torch.from_numpy(features[~held_out]), torch.from_numpy(answers[~held_out].astype(np.int64))
    hx, ha = torch.from_numpy(features[held_out]), torch.from_numpy(answers[held_out].astype(np.int64))
    curve, right = [], None
    for u in range(1, updates + 1):
        rows = torch.randint(0, len(fx), (batch,), generator=gen)
        out = net(fx[rows])
        logp = torch.log_softmax(out[:, :actions], -1)
        if supervised:
            loss = torch.nn.functional.nll_loss(logp, fa[rows])
            opt.zero_grad()
            loss.backward()
            opt.step()
            curve, right = _score(net, hx, ha, actions, u, updates, eval_every, curve, right)
            continue
        action = torch.multinomial(logp.exp(), 1, generator=gen).squeeze(1)
        paid = (action == fa[rows]).double()
        value = out[:, actions]
        advantage = (paid - value).detach()
        entropy = -(logp.exp() * logp).sum(-1)
        loss = (-(logp.gather(1, action[:, None]).squeeze(1) * advantage) + 0.5 * (paid - value) ** 2
                - entropy_cost * entropy).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        curve, right = _score(net, hx, ha, actions, u, updates, eval_every, curve, right)
    first = next((u for u, s in curve if s >= 0.9), None)
    return {"curve": curve, "right": right, "updates_to_0.9": first}


def _score(net, hx, ha, actions: int, u: int, updates: int, eval_every: int, curve: list, right):
    """``train_readout``'s scoring after update ``u``: the greedy answers on the held-out rows, every
    ``eval_every`` updates and after the last."""
    if u % eval_every == 0 or u == updates:
        with torch.no_grad():
            right = (net(hx)[:, :actions].argmax(-1) == ha).numpy()
        curve.append((u, float(right.mean())))
    return curve, right
