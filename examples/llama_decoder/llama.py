"""A small Llama-style decoder in plain PyTorch, with a KV cache kept as module state.

Token embedding, N decoder layers (RMSNorm, rotary position embeddings, multi-head attention
over a KV cache, SwiGLU MLP, residual adds), a final RMSNorm and an LM head. Every op is a leaf
module, so a capture with ``naming="module"`` stores each op's output under a name an engineer
recognises (``layers.1.attn.scores``) and the stored op graph connects them.

``model(tokens)`` takes the next tokens ([1, T] int64) and returns their logits ([1, T, vocab]);
the positions continue from what the cache holds, so the prompt is one call (prefill) and each
generated token another (decode). ``model.reset()`` empties the caches.

The weights are random with a fixed seed, with one planted property (``build_model``): a
"massive activation" (a feature every token embedding carries at a large value, as trained
LLMs have) that layer ``FAULT_LAYER``'s attention head 0 turns, through its rotary frequencies,
into scores that grow with the distance between query and key. On a device that computes those
scores in fp16 they outgrow 65504 after some decode steps.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Config:
    vocab: int = 256
    dim: int = 64
    layers: int = 3
    heads: int = 4
    hidden: int = 176  # SwiGLU width: about 8/3 of dim, a multiple of 16
    rope_base: float = 10000.0
    eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


# The planted property (see the module documentation).
MASSIVE_FEATURE = 0  # the embedding feature every token carries
MASSIVE_VALUE = 32.0  # its value: large enough that RMSNorm leaves it almost constant
FAULT_LAYER = 1  # whose head 0 has the growing scores
# Head 0's weight on the massive feature, in the rotary pairs 3 (query and key opposite: the
# score falls as cos(d * theta_3)) and 7 (theta_7 is so slow that the pair adds a constant): its
# score against a key d tokens back grows as (1 - cos(d * theta_3)), 2 to 4 % per token near
# fp16's limit. With a 16-token prompt and the default seeds the largest score first exceeds
# 65504 at decode step 35 (about 2 % above it; 2 % below at step 34, so the emulated device's
# own rounding cannot move the step).
SCORE_GAIN = 66.4
GROWING_PAIR, CONSTANT_PAIR = 3, 7


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Rotary(nn.Module):
    """Splits [1, T, dim] into heads and rotates each (first half, second half) pair of a head by
    position * theta_i, theta_i = base ** (-2i / head_dim) (Llama's rotate-half convention).
    Returns [1, heads, T, head_dim]."""

    def __init__(self, config: Config):
        super().__init__()
        self.heads = config.heads
        half = config.head_dim // 2
        self.register_buffer("theta", config.rope_base ** (-torch.arange(half) * 2.0 /
                                                           config.head_dim), persistent=False)

    def forward(self, x, start: int):
        b, t, _ = x.shape
        x = x.view(b, t, self.heads, -1).transpose(1, 2)
        angle = (start + torch.arange(t, dtype=torch.float32))[:, None] * self.theta[None, :]
        cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-second, first], -1) * sin


class KVCache(nn.Module):
    """Appends this call's keys ([1, heads, T, head_dim]) and values ([1, T, dim]) to what the
    earlier calls left and returns all of them (keys, values per head). The state lives here."""

    def __init__(self, config: Config):
        super().__init__()
        self.heads = config.heads
        self.reset()

    def reset(self):
        self.keys = None
        self.values = None

    @property
    def length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[2]

    def forward(self, k, v):
        b, t, _ = v.shape
        v = v.view(b, t, self.heads, -1).transpose(1, 2)
        self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=2)
        self.values = v if self.values is None else torch.cat([self.values, v], dim=2)
        return self.keys, self.values


class Scores(nn.Module):
    """q k^T / sqrt(head_dim): [1, heads, T, cache length]."""

    def __init__(self, config: Config):
        super().__init__()
        self.scale = config.head_dim ** -0.5

    def forward(self, q, k):
        return torch.matmul(q * self.scale, k.transpose(-1, -2))


class CausalSoftmax(nn.Module):
    """Softmax over the keys, each query seeing only the keys at or before its own position."""

    def forward(self, scores, start: int):
        t, length = scores.shape[-2:]
        query = start + torch.arange(t)[:, None]
        masked = scores.float().masked_fill(torch.arange(length)[None, :] > query, float("-inf"))
        return torch.softmax(masked, dim=-1)


class MixValues(nn.Module):
    """The attention-weighted values, heads merged back: [1, T, dim]."""

    def forward(self, probs, v):
        out = torch.matmul(probs, v)
        return out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1)


class Add(nn.Module):
    def forward(self, a, b):
        return a + b


class Mul(nn.Module):
    def forward(self, a, b):
        return a * b


class Attention(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        dim = config.dim
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.q_rope = Rotary(config)
        self.k_rope = Rotary(config)
        self.kv_cache = KVCache(config)
        self.scores = Scores(config)
        self.softmax = CausalSoftmax()
        self.mix = MixValues()
        self.o_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        start = self.kv_cache.length
        q = self.q_rope(self.q_proj(x), start)
        keys, values = self.kv_cache(self.k_rope(self.k_proj(x), start), self.v_proj(x))
        probs = self.softmax(self.scores(q, keys), start)
        return self.o_proj(self.mix(probs, values))


class SwiGLU(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.gate_proj = nn.Linear(config.dim, config.hidden, bias=False)
        self.up_proj = nn.Linear(config.dim, config.hidden, bias=False)
        self.act = nn.SiLU()
        self.mul = Mul()
        self.down_proj = nn.Linear(config.hidden, config.dim, bias=False)

    def forward(self, x):
        return self.down_proj(self.mul(self.act(self.gate_proj(x)), self.up_proj(x)))


class DecoderLayer(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.attn_norm = RMSNorm(config.dim, config.eps)
        self.attn = Attention(config)
        self.attn_residual = Add()
        self.mlp_norm = RMSNorm(config.dim, config.eps)
        self.mlp = SwiGLU(config)
        self.mlp_residual = Add()

    def forward(self, x):
        x = self.attn_residual(x, self.attn(self.attn_norm(x)))
        return self.mlp_residual(x, self.mlp(self.mlp_norm(x)))


class Decoder(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab, config.dim)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.layers))
        self.norm = RMSNorm(config.dim, config.eps)
        self.lm_head = nn.Linear(config.dim, config.vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))

    def reset(self):
        """Empties every layer's KV cache: the next call is a prefill at position 0."""
        for layer in self.layers:
            layer.attn.kv_cache.reset()


def build_model(seed: int = 0, config: Config = Config()) -> Decoder:
    """The decoder with random weights from `seed` and the planted property (module
    documentation), in eval mode."""
    torch.manual_seed(seed)
    model = Decoder(config).eval()
    with torch.no_grad():
        model.embed.weight[:, MASSIVE_FEATURE] = MASSIVE_VALUE
        # The LM head reads the token features, not the constant one.
        model.norm.weight[MASSIVE_FEATURE] = 0.0
        _plant_growing_scores(model.layers[FAULT_LAYER].attn, config)
    return model


def _plant_growing_scores(attn: Attention, config: Config) -> None:
    """Head 0's queries and keys read only the massive feature, in two rotary pairs: the score
    of a query against a key d tokens back is then about
    (gain * f)^2 / sqrt(head_dim) * (cos(d * theta_7) - cos(d * theta_3)), f the feature after
    RMSNorm (almost the same for every token): 0 for d = 0, growing with d."""
    head = slice(0, config.head_dim)
    half = config.head_dim // 2
    for proj in (attn.q_proj, attn.k_proj):
        proj.weight[head] = 0.0
    for pair, key_sign in ((GROWING_PAIR, -1.0), (CONSTANT_PAIR, 1.0)):
        attn.q_proj.weight[pair, MASSIVE_FEATURE] = SCORE_GAIN
        attn.k_proj.weight[pair, MASSIVE_FEATURE] = key_sign * SCORE_GAIN
    assert GROWING_PAIR < half and CONSTANT_PAIR < half


def prompt_tokens(length: int, seed: int = 1, vocab: int = Config.vocab) -> torch.Tensor:
    """A fixed random prompt, [1, length] int64."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, length), generator=generator)


def generate(run, prompt: torch.Tensor, steps: int):
    """Greedy decoding: `run(tokens, run_name)` (the model's forward, or a capture session's
    call) on the prompt as run "prefill", then on each picked token as "step 1", "step 2"...
    Returns the picked tokens. The pick is the argmax of the last logits, whatever they hold
    (a NaN counts as the largest), as a device's sampler takes whatever the device computed."""
    with torch.no_grad():
        logits = run(prompt, "prefill")
        picked = []
        for step in range(1, steps + 1):
            token = logits[:, -1:].argmax(-1)
            picked.append(int(token))
            logits = run(token, f"step {step}")
    return picked
