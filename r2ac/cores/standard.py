"""Cores trained with truncated BPTT only: the standard LSTM and GRU cells, the feLSTM of the R2AC paper
(App. A.5: the eLSTM with full recurrent matrices on c(t-1) in both gates), and a memory-less
feed-forward layer (``none``)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as Fn
from torch import nn

from r2ac.cores.base import RecurrentCore


def _uniform(module: nn.Module, fan_in_of) -> None:
    for name, p in module.named_parameters():
        bound = 1.0 / math.sqrt(fan_in_of(name))
        nn.init.uniform_(p, -bound, bound)


class LSTMCore(RecurrentCore):
    """The standard LSTM cell (Hochreiter & Schmidhuber 1997 with forget gate), state (h, c)."""

    name = "lstm"

    def __init__(self, input_size, hidden_size, learning="tbptt", forget_bias: float = 1.0):
        super().__init__(input_size, hidden_size, learning)
        N = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(4 * N, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * N, N))
        self.bias = nn.Parameter(torch.empty(4 * N))
        _uniform(self, lambda name: N)
        with torch.no_grad():
            self.bias[N:2 * N].fill_(forget_bias)  # gate order: i, f, g, o

    def hidden_spec(self):
        return {"h": (self.hidden_size,), "c": (self.hidden_size,)}

    def _forward(self, x, state, keep, return_state, sensitivities):
        px = Fn.linear(x, self.weight_ih, self.bias).unbind(0)
        h, c = state["h"], state["c"]
        hs = []
        for t in range(x.shape[0]):
            k = keep[t, :, None]
            h, c = h * k, c * k
            i, f, g, o = torch.addmm(px[t], h, self.weight_hh.t()).chunk(4, -1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            hs.append(h)
        y = torch.stack(hs)
        return y, ({"h": h.detach(), "c": c.detach()} if return_state else None)


class GRUCore(RecurrentCore):
    """The GRU cell (Cho et al. 2014, PyTorch's convention for the reset gate)."""

    name = "gru"

    def __init__(self, input_size, hidden_size, learning="tbptt"):
        super().__init__(input_size, hidden_size, learning)
        N = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(3 * N, input_size))
        self.weight_hh = nn.Parameter(torch.empty(3 * N, N))
        self.bias_ih = nn.Parameter(torch.empty(3 * N))
        self.bias_hh = nn.Parameter(torch.empty(3 * N))
        _uniform(self, lambda name: N)

    def hidden_spec(self):
        return {"h": (self.hidden_size,)}

    def _forward(self, x, state, keep, return_state, sensitivities):
        px = Fn.linear(x, self.weight_ih, self.bias_ih).unbind(0)
        h = state["h"]
        hs = []
        for t in range(x.shape[0]):
            h = h * keep[t, :, None]
            xr, xz, xn = px[t].chunk(3, -1)
            hr, hz, hn = torch.addmm(self.bias_hh, h, self.weight_hh.t()).chunk(3, -1)
            r = torch.sigmoid(xr + hr)
            z = torch.sigmoid(xz + hz)
            n = torch.tanh(xn + r * hn)
            h = torch.lerp(n, h, z)  # (1 - z) n + z h
            hs.append(h)
        y = torch.stack(hs)
        return y, ({"h": h.detach()} if return_state else None)


class FELSTMCore(RecurrentCore):
    """feLSTM (R2AC paper, App. A.5): f = sigmoid(F x + W_f c(t-1) + b_f), z = tanh(Z x + W_z c(t-1) + b_z),
    c = f c(t-1) + (1 - f) z, h = sigmoid(O x + W_o c) * c. Full recurrence: no tractable RTRL."""

    name = "felstm"

    def __init__(self, input_size, hidden_size, learning="tbptt", forget_bias: float = 1.0):
        super().__init__(input_size, hidden_size, learning)
        N, D = hidden_size, input_size
        self.weight_ih = nn.Parameter(torch.empty(3 * N, D))  # F, Z, O stacked
        self.weight_hh = nn.Parameter(torch.empty(2 * N, N))  # W_f, W_z stacked
        self.W_o = nn.Parameter(torch.empty(N, N))
        self.bias = nn.Parameter(torch.zeros(2 * N))  # b_f, b_z
        nn.init.uniform_(self.weight_ih, -1 / math.sqrt(D), 1 / math.sqrt(D))
        nn.init.uniform_(self.weight_hh, -1 / math.sqrt(N), 1 / math.sqrt(N))
        nn.init.uniform_(self.W_o, -1 / math.sqrt(N), 1 / math.sqrt(N))
        with torch.no_grad():
            self.bias[:N].fill_(forget_bias)

    def hidden_spec(self):
        return {"c": (self.hidden_size,)}

    def _forward(self, x, state, keep, return_state, sensitivities):
        N = self.hidden_size
        pfz, po = Fn.linear(x, self.weight_ih).split([2 * N, N], -1)
        pfz = (pfz + self.bias).unbind(0)
        c = state["c"]
        cs = []
        for t in range(x.shape[0]):
            c = c * keep[t, :, None]
            f, z = torch.addmm(pfz[t], c, self.weight_hh.t()).chunk(2, -1)
            c = torch.lerp(torch.tanh(z), c, torch.sigmoid(f))
            cs.append(c)
        C = torch.stack(cs)
        y = torch.sigmoid(po + Fn.linear(C, self.W_o)) * C
        return y, ({"c": c.detach()} if return_state else None)


FEEDFORWARD_ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}


class FeedForwardCore(RecurrentCore):
    """``none``: a memory-less baseline, y(t) = phi(W x(t) + b) with phi = ``activation`` (relu, or tanh as
    the recurrent cores' outputs); its state is empty."""

    name = "none"

    def __init__(self, input_size, hidden_size, learning="tbptt", activation="relu"):
        super().__init__(input_size, hidden_size, learning)
        if activation not in FEEDFORWARD_ACTIVATIONS:
            raise ValueError(f"core 'none': activation must be one of {sorted(FEEDFORWARD_ACTIVATIONS)}, got "
                             f"{activation!r} (e.g. model.core_options={{activation: relu}})")
        self.activation = activation
        self.linear = nn.Linear(input_size, hidden_size)

    def hidden_spec(self):
        return {}

    def _forward(self, x, state, keep, return_state, sensitivities):
        return FEEDFORWARD_ACTIVATIONS[self.activation](self.linear(x)), ({} if return_state else None)
