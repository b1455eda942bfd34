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


def assert_tbptt_segments_independent(core, x, reset, w, cut):
    """TBPTT: the segmented run's gradient is the sum of each segment's gradient run alone, the second
    from the first one's detached end state. The core is put in eval mode after the first segment's state
    is computed (frozen statistics, so both ways of running see the same normalisation); buffers are
    restored before the comparison."""
    bufs = {k: v.clone() for k, v in core.named_buffers()}
    st = core.initial_state(x.shape[1])
    with torch.no_grad():
        _, st_mid = core(x[:cut], st, reset[:cut])
    core.eval()
    core.zero_grad()
    y, _ = core(x[cut:], st_mid, reset[cut:], return_state=False)
    (y * w[cut:]).sum().backward()
    g_alone = {n: p.grad.clone() for n, p in core.named_parameters() if p.grad is not None}
    g_seg = segment_grads(core, x, reset, w, cut)
    core.zero_grad()
    y, _ = core(x[:cut], st, reset[:cut])
    (y * w[:cut]).sum().backward()
    with torch.no_grad():
        for k, v in core.named_buffers():
            v.copy_(bufs[k])
    for n, p in core.named_parameters():
        if p.grad is not None:
            assert torch.allclose(g_seg[n], g_alone[n] + p.grad, atol=1e-12), n


def assert_carried_matches_stepwise(core, x, reset, ref, seg, sensitivities):
    """Run the core in segments of ``seg`` steps; after each, the state c and every sensitivity equal the
    independent step-by-step recursion ``ref`` (per step: {"c": ..., key: ...}); ``sensitivities`` maps a
    key of ``ref`` to a function reading the same quantity from the core's state."""
    T, state = x.shape[0], core.initial_state(x.shape[1])
    with torch.no_grad():
        for s in range(0, T, seg):
            _, state = core(x[s:s + seg], state, reset[s:s + seg])
            r = ref[min(s + seg, T) - 1]
            assert torch.allclose(state["c"], r["c"], rtol=1e-12, atol=1e-13)
            for k, read in sensitivities.items():
                assert torch.allclose(read(state), r[k], rtol=1e-10, atol=1e-12), k
