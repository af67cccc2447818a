"""A small Llama-style decoder as exported decoders are, for the fix tests (test_fix.py).

The model is fx-traceable: each call is one decode step that takes its KV cache as inputs
(static caches of `cache` slots, as ExecuTorch's static Llama passes them), with the rotary
cos/sin of the step's position and an additive mask (0 for written slots, MASK for the others:
a quantization-friendly mask, far enough below the scores that a masked slot's weight is below
1e-10, near enough that a 16-bit encoding over the masked scores keeps their resolution),
and returns the logits and the step's new keys and values. The loop (`decode_inputs`) runs the
float model greedily and writes each step's keys and values into the caches, so every run's
inputs are the float reference's (teacher forcing).

`calibrate(store, bits)` fits one unsigned per-tensor encoding per stored intermediate and output
over its range in every run, as a plain encodings map.
"""
from __future__ import annotations

import json
from typing import Dict, List, Tuple

import torch
from torch import nn

MASK = -30.0  # the additive mask of an unwritten slot


class Layer(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.norm1 = nn.LayerNorm(dim)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.norm2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * dim)
        self.act = nn.SiLU()
        self.down = nn.Linear(2 * dim, dim)

    def rope(self, x, cos, sin):
        half = self.head_dim // 2
        first, second = x[..., :half], x[..., half:]
        return x * cos + torch.cat([-second, first], -1) * sin

    def forward(self, x, cos, sin, mask, k_cache, v_cache):
        h = self.norm1(x)
        q = self.q(h).reshape(1, 1, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).reshape(1, 1, self.heads, self.head_dim).transpose(1, 2)
        v = self.v(h).reshape(1, 1, self.heads, self.head_dim).transpose(1, 2)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        keys = torch.cat([k_cache, k], dim=2)  # the step's slot last
        values = torch.cat([v_cache, v], dim=2)
        scores = torch.matmul(q, keys.transpose(-1, -2)) * self.head_dim ** -0.5 + mask
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, values).transpose(1, 2).reshape(1, 1, -1)
        x = x + self.o(out)
        return x + self.down(self.act(self.up(self.norm2(x)))), k, v


class Decoder(nn.Module):
    def __init__(self, vocab: int = 96, dim: int = 64, layers: int = 2, heads: int = 4,
                 seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.dim, self.heads = dim, heads
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([Layer(dim, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        with torch.no_grad():
            self.head.weight.mul_(4.0)  # a peaky next-token distribution

    def forward(self, tokens, cos, sin, mask, k_cache, v_cache):
        x = self.embed(tokens)
        new_k, new_v = [], []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, mask, k_cache[i], v_cache[i])
            new_k.append(k)
            new_v.append(v)
        return self.head(self.norm(x)), torch.stack(new_k), torch.stack(new_v)


def rotary(position: int, head_dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    half = head_dim // 2
    theta = 10000.0 ** (-torch.arange(half, dtype=torch.float32) * 2.0 / head_dim)
    angle = position * theta
    return (torch.cat([angle.cos()] * 2).reshape(1, 1, 1, -1),
            torch.cat([angle.sin()] * 2).reshape(1, 1, 1, -1))


def decode_inputs(model: Decoder, steps: int, cache: int = 16, first_token: int = 1
                  ) -> List[tuple]:
    """The inputs of `steps` greedy decode steps of the float model, one tuple per run; the
    caches hold `cache` slots, written one per step (slot p at step p)."""
    layers, head_dim = len(model.layers), model.dim // model.heads
    k_cache = torch.zeros(layers, 1, model.heads, cache, head_dim)
    v_cache = torch.zeros_like(k_cache)
    token, runs = first_token, []
    with torch.no_grad():
        for p in range(steps):
            cos, sin = rotary(p, head_dim)
            mask = torch.full((1, 1, 1, cache + 1), MASK)
            mask[..., :p] = 0.0
            mask[..., cache] = 0.0  # the step's own slot
            args = (torch.tensor([[token]]), cos, sin, mask, k_cache.clone(), v_cache.clone())
            runs.append(args)
            logits, k, v = model(*args)
            k_cache[:, :, :, p] = k[:, :, :, 0]
            v_cache[:, :, :, p] = v[:, :, :, 0]
            token = int(logits[0, -1].argmax())
    return runs


def calibrate(store, bits: int = 16) -> Dict[str, dict]:
    """A plain encodings map: every stored floating intermediate and output over [min(min, 0),
    max(max, 0)] of its values in every run."""
    ranges: Dict[str, List[float]] = {}
    for run in store.runs:
        for t in run.tensors:
            if t.role == "graph_input" or not t.dtype.startswith("FLOAT"):
                continue
            values = t.numpy()
            low, high = ranges.setdefault(t.name, [0.0, 0.0])
            ranges[t.name] = [min(low, float(values.min())), max(high, float(values.max()))]
    steps = (1 << bits) - 1
    table = {}
    for name, (low, high) in ranges.items():
        scale = max(high - low, 1e-6) / steps
        table[name] = {"scale": scale, "offset": int(round(low / scale)),
                       "dtype": f"UFIXED_POINT_{bits}"}
    return table


def clipped(table: Dict[str, dict], name: str, keep: float = 0.4) -> Dict[str, dict]:
    """`table` with `name`'s encoding narrowed to the middle `keep` of its range."""
    entry = dict(table[name])
    bits = int(entry["dtype"].rsplit("_", 1)[1])
    qmax = (1 << bits) - 1
    low, high = entry["offset"] * entry["scale"], (qmax + entry["offset"]) * entry["scale"]
    centre, scale = (low + high) / 2, entry["scale"] * keep
    entry.update(scale=scale, offset=int(round(centre / scale - qmax / 2)))
    return {**table, name: entry}


def write_json(path, doc) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)

