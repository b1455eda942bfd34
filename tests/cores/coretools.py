"""Shared helpers of the core exactness tests (float64 sequences, segment-wise gradients)."""

import torch


def sequence(seed=0, T=200, B=3, D=5, out=4, p_reset=0.03):
    """Inputs x [T, B, D], resets [T, B] (t = 0, random, and one inside a segment) and the weights
    w [T, B, out] of the test loss sum_t <w(t), y(t)>."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, D, generator=g)
    reset = torch.rand(T, B, generator=g) < p_reset
    reset[0] = True
    reset[min(60, T - 1) if T > 1 else 0, 1 % B] = True
    w = torch.randn(T, B, out, generator=g)
    return x, reset, w


def segment_grads(core, x, reset, w, seg, state=None):
    """Gradients of the whole sequence's loss, learned segment by segment while carrying the state.
    Buffers (e.g. online normalisation statistics) are restored afterwards."""
    bufs = {k: v.clone() for k, v in core.named_buffers()}
    core.zero_grad(set_to_none=True)
    state = core.initial_state(x.shape[1]) if state is None else state
    for s in range(0, x.shape[0], seg):
        y, state = core(x[s:s + seg], state, reset[s:s + seg])
        (y * w[s:s + seg]).sum().backward()
    with torch.no_grad():
        for k, v in core.named_buffers():
            v.copy_(bufs[k])
    return {n: p.grad.clone() for n, p in core.named_parameters() if p.grad is not None}


def rel_err(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()


def state_shapes_over_T(core, data, B, lengths=(1, 10, 100)):
    """The (key, shape) tuples of the core's state after sequences of each length: one set, as RTRL's
    memory does not grow with T."""
    sizes = set()
    for Tn in lengths:
        x, reset, _ = data(T=Tn)
        with torch.no_grad():
            _, st = core(x, core.initial_state(B), reset)
        sizes.add(tuple((k, tuple(v.shape)) for k, v in sorted(st.items())))
    assert len(sizes) == 1, sizes
    (k_shapes,) = sizes
    return sum(torch.Size(s).numel() for _, s in k_shapes)
