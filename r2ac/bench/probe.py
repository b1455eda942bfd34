"""Linear probes: what a trained agent's recurrent state holds, told apart from what its heads make of it.

An answers tool (tools/*_answers.py) says which episodes an agent answers right; a probe says whether the state
its heads read held what those answers needed. ``probe_right`` fits a softmax regression from the state at the
query (one row per episode) to a label of the episode (the count of flashes, its parity, ...) on one set of
episodes and scores it on another: a label the probe reads right on held-out episodes is in the state, linearly.
The agent's heads are linear too (``model.head_hidden`` 0), so a label the probe reads and the agent does not
answer is kept but not in a form its read-out can use.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import torch

from r2ac.bench.common import one_torch_thread


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

    with one_torch_thread():
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
                  entropy_cost: float = 0.05, entropy_floor: float = 0.9, logit_penalty: float = 1e-3,
                  eval_every: int = 500, seed: int = 0, supervised: bool = False,
                  initial: Optional[tuple] = None) -> dict:
    """Whether a fresh read-out (``readout_net``) learns to answer from fixed ``features`` [n, D] (an agent's core
    outputs at the query) by the agent's kind of learning: each update samples ``batch`` fitted rows, samples an
    action from the read-out's policy, pays 1 where it is the row's ``answers`` entry, and steps Adam (AMSGrad,
    ``learning_rate``) on the policy gradient with the read-out's own value as baseline, its squared error, and
    quickstart's regularisers: the entropy bonus ``entropy_cost`` on min(H, ``entropy_floor`` ln A) (0: the plain
    bonus) and ``logit_penalty`` on the centred logits' squared size. A contextual bandit: no memory to learn.
    ``initial``: (weight [actions + 1, D], bias [actions + 1]) to start a linear read-out from (an agent's own
    policy and value heads, ``agent_heads``) instead of fresh weights. Every ``eval_every`` updates the
    greedy answers on the ``held_out`` rows are scored. ``supervised``: cross-entropy on the right answers instead
    (no sampling, no value): what the read-out could learn with the answer given, not only its reward. Returns
    ``curve`` [(updates, share right)], ``right`` (bool per held-out row at the end), ``updates_to_0.9`` (the
    first scored update at 0.9 or more, else None) and ``start`` (the share right before the first update)."""
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
    if initial is not None:
        if hidden or norm:
            raise ValueError("initial weights are for a linear read-out (hidden 0, no norm)")
        weight, bias = (torch.as_tensor(np.asarray(w), dtype=torch.float64) for w in initial)
        if weight.shape != (actions + 1, features.shape[1]) or bias.shape != (actions + 1,):
            raise ValueError(f"initial weights must be [{actions + 1}, {features.shape[1]}] and [{actions + 1}], "
                             f"got {tuple(weight.shape)} and {tuple(bias.shape)}")
        with torch.no_grad():
            net[-1].weight.copy_(weight)
            net[-1].bias.copy_(bias)
    cap = entropy_floor * math.log(actions) if entropy_floor else math.inf
    fx, fa = torch.from_numpy(features[~held_out]), torch.from_numpy(answers[~held_out].astype(np.int64))
    hx, ha = torch.from_numpy(features[held_out]), torch.from_numpy(answers[held_out].astype(np.int64))
    with torch.no_grad():
        start = float((net(hx)[:, :actions].argmax(-1) == ha).double().mean())
    with one_torch_thread():
        return _train(net, fx, fa, hx, ha, actions, gen, start, cap, updates, batch, learning_rate, entropy_cost,
                      logit_penalty, eval_every, supervised)


def _train(net, fx, fa, hx, ha, actions, gen, start, cap, updates, batch, learning_rate, entropy_cost,
           logit_penalty, eval_every, supervised) -> dict:
    """``train_readout``'s loop (one torch thread: a read-out is far too small to share out)."""
    opt = torch.optim.Adam(net.parameters(), lr=learning_rate, amsgrad=True)
    curve, right = [], None
    for u in range(1, updates + 1):
        rows = torch.randint(0, len(fx), (batch,), generator=gen)
        out = net(fx[rows])
        logits, value = out[:, :actions], out[:, actions]
        logp = torch.log_softmax(logits, -1)
        if supervised:
            loss = torch.nn.functional.nll_loss(logp, fa[rows])
        else:
            action = torch.multinomial(logp.exp(), 1, generator=gen).squeeze(1)
            paid = (action == fa[rows]).double()
            entropy = (-(logp.exp() * logp).sum(-1)).clamp(max=cap)
            centred = logits - logits.mean(-1, keepdim=True)
            loss = (-logp.gather(1, action[:, None]).squeeze(1) * (paid - value).detach()
                    + 0.5 * (paid - value) ** 2 - entropy_cost * entropy
                    + logit_penalty * (centred * centred).sum(-1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if u % eval_every == 0 or u == updates:
            with torch.no_grad():
                right = (net(hx)[:, :actions].argmax(-1) == ha).numpy()
            curve.append((u, float(right.mean())))
    first = next((u for u, share in curve if share >= 0.9), None)
    return {"curve": curve, "right": right, "updates_to_0.9": first, "start": start}


def agent_heads(net) -> tuple:
    """An agent network's linear policy and value heads as ``train_readout``'s ``initial`` (weight [A + 1, N], bias
    [A + 1]); refused where its heads are not linear on the core's output alone."""
    if getattr(net, "head_trunk", None) is not None or getattr(net, "head_norm", None) is not None \
            or getattr(net, "head_input", False):
        raise ValueError("the agent's heads are not linear on the core's output (model.head_hidden, head_norm or "
                         "head_input): its own heads cannot start a linear read-out")
    weight = torch.cat([net.policy.weight, net.baseline.weight]).detach().double().cpu().numpy()
    bias = torch.cat([net.policy.bias, net.baseline.bias]).detach().double().cpu().numpy()
    return weight, bias
