"""The cores on a CUDA device (skipped without one): exact RTRL on the GPU gives full BPTT's gradient (computed
on the CPU) and the same outputs and carried state as the CPU, float64."""

import pytest
import torch

from test_cores import B, EXACT, RTRL, _data, _ids, _make, exact_case

from coretools import rel_err, segment_grads

pytestmark = pytest.mark.usefixtures("float64")


@pytest.mark.parametrize("name, options", EXACT, ids=_ids(EXACT))
def test_rtrl_gradient_on_cuda_equals_full_bptt_on_cpu(name, options, cuda):
    """Every exact-RTRL core: the 200-step sequence with resets, learned by RTRL on the GPU in segments of 7
    steps while carrying state and sensitivities there, gives the gradient of one full BPTT pass on the CPU
    to 1e-9 relative."""
    core, x, reset, w, full = exact_case(name, options)
    gpu = core.to(cuda)
    got = segment_grads(gpu, x.to(cuda), reset.to(cuda), w.to(cuda), 7, state=gpu.initial_state(B))
    assert full and set(got) == set(full)
    for pname in full:
        assert got[pname].device.type == "cuda", pname
        assert rel_err(got[pname].cpu(), full[pname]) < 1e-9, pname


@pytest.mark.parametrize("name, options", RTRL, ids=_ids(RTRL))
def test_outputs_and_carried_state_on_cuda_equal_the_cpu(name, options, cuda):
    """Every RTRL core, with and without sensitivities (the actor's path): outputs and every carried state
    tensor (sensitivities included) agree between GPU and CPU, and the state stays on the GPU."""
    core = _make(name, **options)
    gpu = _make(name, **options).to(cuda)
    gpu.load_state_dict(core.state_dict())
    x, reset, _ = _data(T=40)
    with torch.no_grad():
        for sens in (True, False):
            y, st = core(x, core.initial_state(B), reset, sensitivities=sens)
            yg, stg = gpu(x.to(cuda), gpu.initial_state(B), reset.to(cuda), sensitivities=sens)
            assert yg.device.type == "cuda" and torch.allclose(yg.cpu(), y, rtol=1e-10, atol=1e-12)
            assert set(stg) == set(st)
            for k in st:
                assert stg[k].device.type == "cuda", k
                assert torch.allclose(stg[k].cpu(), st[k], rtol=1e-10, atol=1e-12), k
