"""The two RTRL identities as small, core-independent functions (docs/architecture.md, "Identity 1" and
"Identity 2").

Identity 1 (learner): for a segment starting from the carried state s(t0) and sensitivity
S(t0) = d s(t0) / d theta, the exact, untruncated gradient of the segment's loss is

    dL/dtheta = [BPTT gradient inside the segment, s(t0) treated as an input]
              + sum_{b, k} dL/ds_{b,i,k}(t0) * S_{b,i,k,...}(t0)

``rtrl_carry`` is an identity on s(t0) whose backward adds the second term to the parameters' gradients,
so one autograd pass over the segment gives the exact RTRL gradient. A parameter whose sensitivity is a
fixed per-unit linear map A of another one's (the linear RTU: dc/dW2 = i dc/dW1) needs no tensor of its
own: it contracts the stored one with A^T dL/ds(t0) (``grad_maps``).

Identity 2 (actor / end of segment): for a unit-wise recurrence whose sensitivity obeys
S(t) = g(t) * S(t-1) + u(t), the carried sensitivity after the segment is

    S(T) = a(t0, T) * S(t0) + sum_s a(s, T) * u(s),   a(s, T) = prod_{u=s+1..T} g(u)

where g already includes the reset mask (0 at an episode start). ``decay_weights`` computes a(s, T) and
a(t0, T) with a reverse cumulative product (no division).
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

#: a linear map applied to dL/ds0 [B, N, *comp] before a contraction (None: the identity)
GradMap = Optional[Callable[[Tensor], Tensor]]


def _contract(grads: Sequence[Tensor], sens: Tensor, param_shapes: Sequence[torch.Size]) -> List[Tensor]:
    """For each grad_j: the sum over batch and unit-state components of grad_j * sens, shaped like
    parameter j.

    grad_j: [B, N, *comp]; sens: [B, N, *comp, *tail]; parameter j: [N, *tail]. All contractions share one
    pass over the batch, so each sample's sens[b] is read from memory once.
    """
    B, N = sens.shape[:2]
    comp = grads[0][0, 0].numel()
    tail = sens[0, 0].numel() // comp
    g = torch.stack([gj.reshape(B, N, comp, 1) for gj in grads], 1)  # [B, J, N, comp, 1]
    s = sens.reshape(B, N, comp, tail)
    # Accumulate sample by sample: no temporary the size of the sensitivity (an einsum here copies the
    # whole sensitivity once, adding to the learner's peak memory), and measured 3-4x faster on CPU.
    out = torch.zeros(len(grads), N, comp, tail, dtype=sens.dtype, device=sens.device)
    for b in range(B):
        out.addcmul_(g[b], s[b])
    return [o.sum(1).reshape(shape) for o, shape in zip(out, param_shapes)]


class CarryRecorder:
    """Records the carried correction sum_k dL/ds_k(t0) S_k(t0) that ``rtrl_carry``'s backward adds to each
    parameter's gradient (diagnostics: its size against the gradient from inside the segment).

        with CarryRecorder() as rec:
            loss.backward()
        rec.corrections  # {parameter: its correction term, summed over the carries of the pass}
    """

    _active: List["CarryRecorder"] = []

    def __init__(self) -> None:
        self.corrections: dict = {}

    def __enter__(self) -> "CarryRecorder":
        CarryRecorder._active.append(self)
        return self

    def __exit__(self, *exc) -> None:
        CarryRecorder._active.remove(self)

    @classmethod
    def _record(cls, params: Sequence[Tensor], grads: Sequence[Optional[Tensor]]) -> None:
        for rec in cls._active:
            for p, g in zip(params, grads):
                if g is not None:
                    prev = rec.corrections.get(p)
                    rec.corrections[p] = g.detach().clone() if prev is None else prev + g.detach()


class _RTRLCarry(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s0: Tensor, groups, *rest: Tensor) -> Tensor:  # type: ignore[override]
        # groups[k]: the (parameter index, grad map) pairs that contract the k-th distinct sensitivity
        n_params = sum(len(g) for g in groups)
        params, sens = rest[:n_params], rest[n_params:]
        ctx.groups = groups
        ctx.param_shapes = [p.shape for p in params]
        ctx.params = params if CarryRecorder._active else None  # only for the diagnostics
        ctx.save_for_backward(*sens)
        return s0.clone()

    @staticmethod
    def backward(ctx, grad_s: Tensor):  # type: ignore[override]
        sens = ctx.saved_tensors
        grads: List[Optional[Tensor]] = [None] * len(ctx.param_shapes)
        for s, group in zip(sens, ctx.groups):
            mapped = [grad_s if m is None else m(grad_s) for _, m in group]
            shapes = [ctx.param_shapes[j] for j, _ in group]
            for (j, _), g in zip(group, _contract(mapped, s, shapes)):
                grads[j] = g
        if ctx.params is not None:
            CarryRecorder._record(ctx.params, grads)
        return (grad_s, None, *grads, *([None] * len(sens)))


def rtrl_carry(s0: Tensor, params: Sequence[Tensor], sens: Sequence[Tensor],
               grad_maps: Optional[Sequence[GradMap]] = None) -> Tensor:
    """Identity on the carried state ``s0`` [B, N, *comp] whose backward adds, for each parameter p_j
    [N, *tail_j], the term sum_{b,comp} M_j(dL/ds0) * sens_j (sens_j [B, N, *comp, *tail_j]) to p_j.grad.

    ``grad_maps`` (optional; one entry per parameter, None = the identity): a linear map M_j on dL/ds0
    [B, N, *comp] -> [B, N, *comp] acting on the components only. It serves a parameter whose true
    sensitivity is A S_j for a stored S_j and a per-unit linear map A on the components: then
    <dL/ds0, A S_j> = <A^T dL/ds0, S_j>, so pass S_j with M_j = A^T. Example: a complex unit in pair
    layout with dc/dW2 = i dc/dW1 passes dc_dW1 for W2 too, with M = multiplication by -i.

    Parameters given the same sensitivity tensor (the same object) share it: it is saved once (no copy)
    and contracted for all of them in one pass over the batch.
    The sensitivities are data (detached); ``s0``'s own gradient passes through unchanged.
    """
    if len(params) != len(sens):
        raise ValueError("rtrl_carry needs one sensitivity per parameter")
    maps = [None] * len(params) if grad_maps is None else list(grad_maps)
    if len(maps) != len(params):
        raise ValueError("rtrl_carry needs one grad map (or None) per parameter")
    distinct: List[Tensor] = []
    groups: List[list] = []
    for j, (s, m) in enumerate(zip(sens, maps)):
        k = next((i for i, u in enumerate(distinct) if u is s), None)
        if k is None:
            distinct.append(s)
            groups.append([])
            k = -1
        groups[k].append((j, m))
    return _RTRLCarry.apply(s0, tuple(map(tuple, groups)), *params, *[s.detach() for s in distinct])


def transport_outer(w: Tensor, x: Tensor, s0: Optional[Tensor] = None, a0: Optional[Tensor] = None) -> Tensor:
    """Identity 2 for a sensitivity that is a sum of outer products: with w [T, B, N] (the per-step factor
    already multiplied by its decay a(s, T)) and x [T, B, D], return [B, N, D]

        a0[..., None] * s0 + sum_t  w[t] outer x[t]

    as one batched matmul plus one fused multiply-add of the carried sensitivity into its result (no temporary
    the size of the sensitivity). Measured on CPU: 2x faster than einsum + add, and 4x faster than
    ``baddbmm_`` into the decayed s0 (in-place accumulation leaves the fast matmul path). ``s0`` None: a
    segment that starts from no carried sensitivity."""
    out = torch.bmm(w.permute(1, 2, 0), x.transpose(0, 1))  # [B, N, T] @ [B, T, D]
    return out if s0 is None else out.addcmul_(s0, a0[..., None])


def decay_weights(g: Tensor) -> Tuple[Tensor, Tensor]:
    """Given per-step decays g [T, ...] (reset mask included), return

        a [T, ...]  with a[s] = prod_{u=s+1..T-1} g[u]  (a[T-1] = 1)
        a0 [...]    = prod_{u=0..T-1} g[u]  (the decay of the sensitivity carried into the segment)
    """
    rev = torch.cumprod(g.flip(0), 0).flip(0)  # rev[s] = prod_{u>=s} g[u]
    a = torch.cat([rev[1:], torch.ones_like(g[:1])], 0)
    return a, rev[0]
