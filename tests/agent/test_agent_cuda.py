"""The learners on a CUDA device (skipped without one): one update on the GPU computes the CPU's loss,
statistics and gradient (float64, 1e-9 relative), for IMPALA and the A2C reference, RTRL and TBPTT, with the
raw-frame centring (the median on the GPU is torch's, on the CPU the 8-bit path; channel contrasts; frames
pooled by 2 before the core; each channel's extremes), centred flat observations, and the learner's own
sensitivities, the clipped extra passes, the KL-adapted rate and lambda-returns, and the target network of the
bootstraps (its values and its Polyak step; without one too)."""

import copy

import pytest
import torch

from r2ac.agent.a2c import A2CLearner
from r2ac.agent.actor import Actor
from r2ac.agent.learner import Learner
from r2ac.agent.trajectory import concat

from test_agent import M, _learner_cfg, _net

pytestmark = pytest.mark.usefixtures("float64")


CASES = [(Learner, "rtrl", False, {}), (Learner, "tbptt", False, {}), (A2CLearner, "rtrl", False, {}),
         (Learner, "rtrl", "median_feed_mean+spread+running", {}),
         (Learner, "rtrl", False, {"sensitivities": "learner"}),
         (Learner, "rtrl", False, {"epochs": 3, "kl_target": 1e-3, "vtrace_lambda": 0.9}),
         (A2CLearner, "rtrl", False, {"vtrace_lambda": 0.9, "log_update_kl": "true"}),
         (Learner, "rtrl", False, {"target_tau": 0.0}), (Learner, "rtrl", "median_feed_mean+spread+running",
                                                         {"target_tau": 0.5}),
         (Learner, "rtrl", "median_feed_mean+running+contrasts", {}), (Learner, "rtrl", "observations", {}),
         (Learner, "rtrl", "median_feed_mean+pool2", {}), (A2CLearner, "rtrl", "median_feed_mean+pool2", {}),
         (Learner, "rtrl", "median_feed_mean+running+contrasts+pool2+extremes", {})]


@pytest.mark.parametrize("cls, learning, pixels, extra", CASES,
                         ids=["impala-rtrl", "impala-tbptt", "a2c-rtrl", "impala-rtrl-pixels", "learner-sens",
                              "impala-passes-kl-lambda", "a2c-lambda-kl", "no-target", "pixels-target-0.5",
                              "pixels-contrasts", "centred-observations", "pixels-pooled", "a2c-pixels-pooled",
                              "pixels-extremes"])
def test_update_on_cuda_equals_the_cpu(cls, learning, pixels, extra, cuda):
    net, venv = _net(learning, pixels=pixels)
    actor = Actor(copy.deepcopy(net), venv, M, seed=3)
    batch = concat([actor.rollout() for _ in range(3)])
    cfg = _learner_cfg(**extra)
    cpu, gpu = cls(copy.deepcopy(net), cfg, 10**6), cls(copy.deepcopy(net).to(cuda), cfg, 10**6, cuda)
    s_cpu, s_gpu = cpu.update(copy.deepcopy(batch)), gpu.update(copy.deepcopy(batch))
    assert s_cpu.keys() == s_gpu.keys()
    for k, v in s_cpu.items():
        assert s_gpu[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k
    for (n, p), q in zip(cpu.net.named_parameters(), gpu.net.parameters()):  # the weights after the update(s)
        assert q.device.type == "cuda" and ((q.detach().cpu() - p.detach()).abs().max()
                                            / p.detach().abs().max().clamp_min(1e-300)) < 1e-9, n
    g_cpu = {n: p.grad for n, p in cpu.net.named_parameters() if p.grad is not None}
    g_gpu = {n: p.grad for n, p in gpu.net.named_parameters() if p.grad is not None}
    assert g_cpu.keys() == g_gpu.keys() and (g_cpu or extra.get("epochs", 1) > 1)  # extra passes leave none
    for n, g in g_cpu.items():
        assert g_gpu[n].device.type == "cuda", n
        assert ((g_gpu[n].cpu() - g).abs().max() / g.abs().max().clamp_min(1e-300)) < 1e-9, n
    for n, p in gpu.net.named_parameters():
        assert p.device.type == "cuda", n
    tau = float(extra.get("target_tau", cfg.target_tau))
    assert (gpu.target_net is None) == (cpu.target_net is None) == (tau == 0)
    if tau > 0:  # the target network moved toward the new weights by the same Polyak step on both devices
        assert "target_mean_value" in s_cpu
        t_cpu, t_gpu = cpu.target_net.state_dict(), gpu.target_net.state_dict()
        assert t_cpu.keys() == t_gpu.keys()
        for n, v in t_cpu.items():
            assert t_gpu[n].device.type == "cuda", n
            assert torch.allclose(t_gpu[n].cpu(), v, rtol=1e-9, atol=1e-12), n
    if extra.get("sensitivities") == "learner":
        assert cpu.end_sensitivities is not None
        for k, v in cpu.end_sensitivities.items():
            assert torch.allclose(gpu.end_sensitivities[k].cpu(), v, rtol=1e-9, atol=1e-12), k


def test_sampling_with_a_cpu_generator_gives_the_same_actions_for_gpu_policies(cuda):
    """PPO's actions come from the run's CPU generator: the same draws for logits (or means) on the GPU as on
    the CPU, returned on the policy's device."""
    from r2ac.agent.distributions import categorical_sample, gaussian_sample

    logits = torch.randn(64, 5, generator=torch.Generator().manual_seed(0))
    a_cpu = categorical_sample(logits, torch.Generator().manual_seed(1))
    a_gpu = categorical_sample(logits.to(cuda), torch.Generator().manual_seed(1))
    assert a_gpu.device.type == "cuda" and torch.equal(a_gpu.cpu(), a_cpu)
    mean, log_std = logits[:, :2], torch.tensor([-0.5, 0.3])
    x_cpu = gaussian_sample(mean, log_std, torch.Generator().manual_seed(2))
    x_gpu = gaussian_sample(mean.to(cuda), log_std.to(cuda), torch.Generator().manual_seed(2))
    assert x_gpu.device.type == "cuda" and torch.allclose(x_gpu.cpu(), x_cpu, rtol=1e-12, atol=1e-12)
