"""The action distributions (r2ac.agent.distributions): log-probabilities, entropies and sampling against
hand values and torch.distributions."""

import math

import pytest
import torch

from r2ac.agent.distributions import (categorical_entropy, categorical_log_prob, categorical_sample,
                                      gaussian_entropy, gaussian_log_prob, gaussian_sample)


def test_categorical_log_prob():
    logits = torch.tensor([[[0.0, math.log(3.0)]], [[2.0, 2.0]]])  # [T=2, B=1, A=2]
    actions = torch.tensor([[1], [0]])
    lp = categorical_log_prob(logits, actions)
    torch.testing.assert_close(lp, torch.log(torch.tensor([[0.75], [0.5]])))
    with pytest.raises(ValueError, match="logits shape"):
        categorical_log_prob(logits, torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        categorical_log_prob(logits, torch.zeros(2, 1))


def test_categorical_entropy():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0]], [[100.0, 0.0, 0.0, 0.0]]])
    torch.testing.assert_close(categorical_entropy(logits), torch.tensor([[math.log(4.0)], [0.0]]))
    x = torch.randn(5, 3, 6, dtype=torch.float64)
    torch.testing.assert_close(categorical_entropy(x), torch.distributions.Categorical(logits=x).entropy())


def test_categorical_sample_shape_and_frequencies():
    logits = torch.log(torch.tensor([0.1, 0.2, 0.7])).expand(20000, 3)
    a = categorical_sample(logits, torch.Generator().manual_seed(0))
    assert a.shape == (20000,) and a.dtype == torch.int64
    freq = torch.bincount(a, minlength=3).float() / a.numel()
    torch.testing.assert_close(freq, torch.tensor([0.1, 0.2, 0.7]), atol=0.015, rtol=0)
    assert categorical_sample(torch.zeros(4, 2, 3)).shape == (4, 2)
    # the same generator state gives the same actions (actors are reproducible from their seed)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(categorical_sample(logits[:50], g1), categorical_sample(logits[:50], g2))


def test_gaussian_against_torch_distributions():
    mean = torch.randn(4, 5, 2, dtype=torch.float64)
    log_std = torch.tensor([-0.5, 0.3], dtype=torch.float64)
    a = gaussian_sample(mean, log_std, torch.Generator().manual_seed(0))
    assert a.shape == (4, 5, 2)
    ref = torch.distributions.Normal(mean, torch.exp(log_std))
    torch.testing.assert_close(gaussian_log_prob(mean, log_std, a), ref.log_prob(a).sum(-1))
    torch.testing.assert_close(gaussian_entropy(mean, log_std), ref.entropy().sum(-1))
