"""An emulated int16 QNN HTP decode of a Llama-style decoder with a KV cache, for tests.

Writes the stores of a decode loop (prefill, then one run per generated token) with a known
fault at a known op and step, so that tests can check what `qnn-debug diff REF DEV [--sim SIM]`
says about decode steps and KV caches (docs/metrics.md, 6d) against what was done:

    python3 tests/python/emulated_decoder.py --dim 256 --layers 4 --heads 8 --prefill 16 \\
        --steps 24 --cache 64 --fault rope --fault-layer 2 --fault-step 12 --out DIR

DIR then holds `ref.h5`, `dev.h5`, `sim.h5` and `truth.json`. Every function below is
importable (`emulate` does what the command line does). Only numpy and the qnn_debug package
(its `StoreWriter`) are needed.

**Model** (`build_model`, `forward`): token embedding; `layers` decoder layers, each RMSNorm,
q/k/v projections, rotary position embedding (Llama's rotate-half convention) of q and k, a KV
cache of `cache` slots written at the current positions, attention scores
q k^T / sqrt(head_dim) over every cache slot with the slots after the query's position (not
yet written, or in the future of a prefill query) masked, softmax, probs @ V, the output
projection, a residual add, RMSNorm, a SwiGLU MLP and a residual add; a final RMSNorm and the
LM head. The weights are random (seeded); q and k are scaled by QK_GAIN so that the scores
have a spread of some QK_GAIN^2 and the softmax is peaky, not uniform.

**Runs**: run 0 is the prefill of `prefill` prompt tokens (positions 0 .. prefill-1), run k
decode step k: one token at position prefill + k - 1. Teacher forcing: every store runs the
reference's greedy tokens (the argmax of the reference's last logits of the run before), so
runs align whatever the device computes.

**Tensors** (`build_graph`): every op's output is stored under a stable name
(`layers.2.attn.q_proj`, `layers.2.attn.rope_k`, `layers.2.attn.k_cache`,
`layers.2.attn.scores`, `layers.2.attn.probs`, `layers.2.attn.out` (probs @ V, heads merged),
`layers.2.attn.o_proj`, `layers.2.mlp.down_proj`, ...) with one debug handle per op, counted
from 1 in graph order, the same in every run and every store; the graph input `tokens`
(INT_32, no handle) and the graph output `lm_head` (the logits). Every store holds the op graph
(`graph_node`, inputs and outputs by tensor name). `k_cache` and `v_cache` are stored whole in
every run, [1, heads, cache, head_dim], the slots not yet written zero.

**Reference** (`ref.h5`, `Reference`): float32 throughout. The masked scores hold -inf
(`--mask-value inf`, what a float softmax with a -inf mask sees) or float32's lowest finite
value -3.4028235e38 (`--mask-value lowest`, the `torch.finfo(dtype).min` mask of exported
decoders); their probabilities are exactly 0.

**Encodings** (`calibrate`): one per-tensor asymmetric encoding per op output, UFIXED_POINT_16
(or UFIXED_POINT_8 with `--bits 8`), fitted to the reference's [min(min, 0), max(max, 0)] over
every run, in QNN's convention real = (q + offset) * scale. The scores' range is taken over the
positions that are not masked. A KV cache has the encoding of the tensor it caches (`rope_k`,
`v_proj`): a device's cache holds those codes, not requantized. Weights stay float: their
rounding is not what is tested.

**Device** (`dev.h5`, `Quantized`): chained on its own values. Each op computes in float64
from the dequantized device values of its inputs, and its output is quantized (round half to
even, clamp); then a fraction `flip` of the codes, chosen at random, move one step up or down
(clamped), as real kernels round differently. Codes the quantizer saturated (a value at or
beyond the end of the encoding's range) do not move, nor do the codes of ops that only select
or copy codes (the embedding gather and the cache writes). The unwritten cache slots hold the
code of 0.0 (-offset).

**The mask on the device**, as QNN runs an exported decoder: the scores op is the scaled
q k^T plus the attention mask, a large negative constant (DEVICE_MASK) at the masked positions,
quantized like any output. The encoding is calibrated on the scores the mask leaves alone, so
every masked position clamps to the encoding's lowest code (0): the device "masks" exactly
where the reference does, with the encoding's lowest value instead of -inf. The device's
softmax then reads that lowest value, so each masked slot keeps a weight of exp(low - row max),
as on a device. That is negligible for a row whose best score is well above the encoding's low
end, but not for the first queries of a prefill (one or a few visible slots, all of them
possibly low, against every other slot masked): with the defaults a prefill row leaks up to 4%
of its mass into masked slots, with `--cache 512` (dim 1024) up to 85%, which takes that
layer's prefill probs to some 25 dB. Decode rows, which see every earlier token, leak nothing
measurable.

**Faults** (`--fault`):

- `none`: clean;
- `rope`: from decode step `fault_step` on, layer `fault_layer`'s RoPE of the key rotates by
  position p + 1 instead of p (an off-by-one position), on the device only. The wrongly rotated
  key is written into that layer's k_cache at the step's slot (position prefill + fault_step -
  1 first), so the cache differs from that slot on, in every later run too, and every later
  query's scores against those slots.

**Simulation** (`sim.h5`): the device's integer pipeline with the same encodings, chained on its
own values, with ideal kernels: no flips, no fault. An ideal device (flip 0, fault none) stores
exactly the simulation's codes.

The reference runs first (its greedy tokens and ranges are what the others need); the device and
the simulation then run side by side on two threads. The defaults take about 2 s; dim 1024, 8
layers, 16 heads, 32 steps and a 512-slot cache some 35-45 s on two cores (numpy's reference
BLAS), writing 2.3 GB of stores (every run holds every cache whole).

`truth.json` records what was done: the settings, every run (name, start position, tokens), every
op (name, type, inputs, handle, the diff's group id), the encodings, and the fault: its layer and
step, the first tensor it touches (`rope_k` of that layer), the runs that have it, and the
k_cache slot that first differs (and in which run).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emulated_encoding import Encoding  # noqa: E402

FAULTS = ("none", "rope")
BITS = (8, 16)
MASK_VALUES = ("inf", "lowest")

QK_GAIN = 2.0  # q and k weights' RMS times sqrt(dim): the scores' spread is about QK_GAIN^2
LM_GAIN = 3.0  # the LM head's RMS times sqrt(dim): logits with a clear argmax
DEVICE_MASK = -65504.0  # what the device adds at masked scores: fp16's lowest, an exporter's mask
PRODUCER = "tests/python/emulated_decoder.py"


# ------------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class Config:
    """The model's shape."""

    vocab: int = 512
    dim: int = 256
    layers: int = 4
    heads: int = 8
    hidden: int = 0  # SwiGLU width; 0: about 8/3 of dim, a multiple of 64
    cache: int = 64  # KV cache slots
    rope_base: float = 10000.0
    eps: float = 1e-5

    def __post_init__(self):
        if self.hidden == 0:
            object.__setattr__(self, "hidden", 64 * math.ceil(8 * self.dim / 3 / 64))
        if self.dim <= 0 or self.heads <= 0 or self.dim % self.heads:
            raise ValueError(f"--dim {self.dim} must be a positive multiple of --heads "
                             f"{self.heads}")
        if self.head_dim % 2:
            raise ValueError(f"the head size {self.head_dim} must be even (RoPE rotates pairs)")
        if self.layers <= 0 or self.vocab <= 1 or self.cache <= 0:
            raise ValueError("--layers, --vocab and --cache must be positive (vocab above 1)")

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


@dataclass(frozen=True)
class Settings:
    """One emulation: the decode loop, the device's encodings and kernels, the fault."""

    prefill: int = 16
    steps: int = 24
    bits: int = 16
    flip: float = 0.02
    fault: str = "none"
    fault_layer: int = 0
    fault_step: int = 1
    mask_value: str = "inf"
    seed: int = 0

    def check(self, config: Config) -> None:
        if self.bits not in BITS:
            raise ValueError(f"--bits must be one of {BITS}, not {self.bits}")
        if self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r} (faults: {', '.join(FAULTS)})")
        if self.mask_value not in MASK_VALUES:
            raise ValueError(f"--mask-value must be one of {', '.join(MASK_VALUES)}")
        if not 0 <= self.flip <= 1:
            raise ValueError(f"--flip must be within [0, 1], not {self.flip}")
        if self.prefill < 1 or self.steps < 0:
            raise ValueError("--prefill must be 1 or more and --steps 0 or more")
        if self.prefill + self.steps > config.cache:
            raise ValueError(f"--prefill {self.prefill} + --steps {self.steps} tokens do not fit "
                             f"a cache of {config.cache} slots")
        if self.fault != "none":
            if not 0 <= self.fault_layer < config.layers:
                raise ValueError(f"--fault-layer {self.fault_layer}: the model has layers "
                                 f"0..{config.layers - 1}")
            if not 1 <= self.fault_step <= self.steps:
                raise ValueError(f"--fault-step {self.fault_step}: the decode steps are "
                                 f"1..{self.steps}")

    @property
    def runs(self) -> int:
        return self.steps + 1

    def start(self, run: int) -> int:
        """The position of the run's first token."""
        return 0 if run == 0 else self.prefill + run - 1

    def run_name(self, run: int) -> str:
        return "prefill" if run == 0 else f"step {run}"

    def key_shift(self, layer: int, run: int) -> int:
        """The device's error in the key's RoPE position at this layer and run (the fault)."""
        faulty = self.fault == "rope" and layer == self.fault_layer and run >= self.fault_step
        return 1 if faulty else 0


# ------------------------------------------------------------------------------------------
# Model


@dataclass
class Layer:
    attn_norm: np.ndarray  # [dim]
    wq: np.ndarray  # [dim, dim], y = x @ w.T
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    mlp_norm: np.ndarray
    w_gate: np.ndarray  # [hidden, dim]
    w_up: np.ndarray
    w_down: np.ndarray  # [dim, hidden]


@dataclass
class Model:
    config: Config
    embed: np.ndarray  # [vocab, dim]
    layers: List[Layer]
    norm: np.ndarray
    lm_head: np.ndarray  # [vocab, dim]
    theta: np.ndarray  # [head_dim / 2] rotary frequencies, float64

    def astype(self, dtype) -> "Model":
        """The same weights in `dtype` (float32 -> float64 is exact)."""
        cast = lambda a: a.astype(dtype)  # noqa: E731
        layers = [Layer(**{k: cast(v) for k, v in vars(layer).items()}) for layer in self.layers]
        return Model(self.config, cast(self.embed), layers, cast(self.norm), cast(self.lm_head),
                     self.theta)


def build_model(config: Config, seed: int = 0) -> Model:
    """Random float32 weights from `seed`."""
    rng = np.random.default_rng(seed)
    dim, hidden = config.dim, config.hidden

    def matrix(rows, cols, gain=1.0):
        return (rng.standard_normal((rows, cols)) * gain / math.sqrt(cols)).astype(np.float32)

    def norm_weight():
        return (1.0 + 0.1 * rng.standard_normal(dim)).astype(np.float32)

    layers = [Layer(norm_weight(), matrix(dim, dim, QK_GAIN), matrix(dim, dim, QK_GAIN),
                    matrix(dim, dim), matrix(dim, dim), norm_weight(), matrix(hidden, dim),
                    matrix(hidden, dim), matrix(dim, hidden))
              for _ in range(config.layers)]
    embed = rng.standard_normal((config.vocab, dim)).astype(np.float32)
    theta = config.rope_base ** (-np.arange(config.head_dim // 2) * 2.0 / config.head_dim)
    return Model(config, embed, layers, norm_weight(), matrix(config.vocab, dim, LM_GAIN), theta)


def prompt_tokens(length: int, vocab: int, seed: int = 0) -> np.ndarray:
    """A fixed random prompt, [1, length] int32."""
    return np.random.default_rng([seed, 1]).integers(0, vocab, (1, length)).astype(np.int32)


# Ops, in the dtype of their inputs (float32 for the reference, float64 on the device).

def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + x.dtype.type(eps)) * weight


def split_heads(x, heads):
    """[1, T, dim] -> [1, heads, T, head_dim]."""
    b, t, _ = x.shape
    return x.reshape(b, t, heads, -1).transpose(0, 2, 1, 3)


def merge_heads(x):
    """[1, heads, T, head_dim] -> [1, T, dim]."""
    b, h, t, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)


def rope(x, positions, theta):
    """Rotates each (first half, second half) pair i of every head of x [1, heads, T, head_dim]
    by position * theta_i (Llama's rotate-half convention); angles in float64."""
    angle = np.asarray(positions, np.float64)[:, None] * theta[None, :]
    cos, sin = np.cos(angle).astype(x.dtype), np.sin(angle).astype(x.dtype)
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def silu(x):
    return x / (1 + np.exp(-x))


def forward(model: Model, ex: "Executor", tokens: np.ndarray, start: int) -> np.ndarray:
    """One run of the decoder on `tokens` ([1, T]) at positions start .. start + T - 1. Every
    op's output goes through `ex.out` (or `ex.cache`, `ex.scores`), which stores it and returns
    what the ops after it read. Returns the logits as read."""
    config = model.config
    heads, t = config.heads, tokens.shape[1]
    positions = start + np.arange(t)
    masked = np.arange(config.cache)[None, :] > positions[:, None]  # [T, cache]
    inv_sqrt_d = 1.0 / math.sqrt(config.head_dim)

    x = ex.out("embed", model.embed[tokens], exact=True)
    for index, layer in enumerate(model.layers):
        p = f"layers.{index}."
        h = ex.out(p + "attn_norm", rms_norm(x, layer.attn_norm, config.eps))
        q = ex.out(p + "attn.q_proj", h @ layer.wq.T)
        k = ex.out(p + "attn.k_proj", h @ layer.wk.T)
        v = ex.out(p + "attn.v_proj", h @ layer.wv.T)
        rq = ex.out(p + "attn.rope_q", rope(split_heads(q, heads), positions, model.theta))
        key_positions = positions + ex.key_shift(index)
        rk = ex.out(p + "attn.rope_k", rope(split_heads(k, heads), key_positions, model.theta))
        keys = ex.cache(p + "attn.k_cache", start, rk)
        values = ex.cache(p + "attn.v_cache", start, split_heads(v, heads))
        raw = (rq @ keys.transpose(0, 1, 3, 2)) * x.dtype.type(inv_sqrt_d)
        scores = ex.scores(p + "attn.scores", raw, masked)
        probs = ex.out(p + "attn.probs", softmax(scores))
        mixed = ex.out(p + "attn.out", merge_heads(probs @ values))
        o = ex.out(p + "attn.o_proj", mixed @ layer.wo.T)
        x = ex.out(p + "attn_residual", x + o)
        h = ex.out(p + "mlp_norm", rms_norm(x, layer.mlp_norm, config.eps))
        gate = ex.out(p + "mlp.gate_proj", h @ layer.w_gate.T)
        up = ex.out(p + "mlp.up_proj", h @ layer.w_up.T)
        act = ex.out(p + "mlp.act", silu(gate))
        mul = ex.out(p + "mlp.mul", act * up)
        down = ex.out(p + "mlp.down_proj", mul @ layer.w_down.T)
        x = ex.out(p + "mlp_residual", x + down)
    x = ex.out("norm", rms_norm(x, model.norm, config.eps))
    return ex.out("lm_head", x @ model.lm_head.T)


# ------------------------------------------------------------------------------------------
# The op graph: what `forward` stores, in order


GRAPH_INPUT = "tokens"
GRAPH_OUTPUT = "lm_head"


@dataclass(frozen=True)
class Node:
    name: str
    op_type: str
    inputs: Tuple[str, ...]
    handle: int

    @property
    def group_id(self) -> str:
        """The diff's group id of the op (its one debug handle)."""
        return f"h{self.handle}"


def build_graph(config: Config) -> List[Node]:
    """Every op `forward` runs, in its order, with its inputs (tensor names) and handle."""
    ops: List[Tuple[str, str, Tuple[str, ...]]] = [("embed", "Gather", (GRAPH_INPUT,))]
    x = "embed"
    for index in range(config.layers):
        p = f"layers.{index}."
        a, m = p + "attn.", p + "mlp."
        ops += [
            (p + "attn_norm", "RMSNorm", (x,)),
            (a + "q_proj", "Linear", (p + "attn_norm",)),
            (a + "k_proj", "Linear", (p + "attn_norm",)),
            (a + "v_proj", "Linear", (p + "attn_norm",)),
            (a + "rope_q", "RoPE", (a + "q_proj",)),
            (a + "rope_k", "RoPE", (a + "k_proj",)),
            (a + "k_cache", "KVCacheUpdate", (a + "rope_k",)),
            (a + "v_cache", "KVCacheUpdate", (a + "v_proj",)),
            (a + "scores", "AttentionScores", (a + "rope_q", a + "k_cache")),
            (a + "probs", "Softmax", (a + "scores",)),
            (a + "out", "MatMul", (a + "probs", a + "v_cache")),
            (a + "o_proj", "Linear", (a + "out",)),
            (p + "attn_residual", "Add", (x, a + "o_proj")),
            (p + "mlp_norm", "RMSNorm", (p + "attn_residual",)),
            (m + "gate_proj", "Linear", (p + "mlp_norm",)),
            (m + "up_proj", "Linear", (p + "mlp_norm",)),
            (m + "act", "SiLU", (m + "gate_proj",)),
            (m + "mul", "Mul", (m + "act", m + "up_proj")),
            (m + "down_proj", "Linear", (m + "mul",)),
            (p + "mlp_residual", "Add", (p + "attn_residual", m + "down_proj")),
        ]
        x = p + "mlp_residual"
    ops += [("norm", "RMSNorm", (x,)), (GRAPH_OUTPUT, "Linear", ("norm",))]
    return [Node(name, op_type, inputs, handle) for handle, (name, op_type, inputs)
            in enumerate(ops, start=1)]


CACHE_SOURCES = {"k_cache": "rope_k", "v_cache": "v_proj"}


def cache_source(name: str) -> Optional[str]:
    """The tensor a KV cache holds (`layers.0.attn.rope_k` for `layers.0.attn.k_cache`)."""
    prefix, _, leaf = name.rpartition(".")
    return f"{prefix}.{CACHE_SOURCES[leaf]}" if leaf in CACHE_SOURCES else None


# ------------------------------------------------------------------------------------------
# Encodings


def calibrate(graph: Sequence[Node], ranges: Dict[str, Tuple[float, float]], bits: int
              ) -> Dict[str, Encoding]:
    """An encoding per op output from its reference range over every run; a cache takes the
    encoding of the tensor it holds."""
    encodings = {}
    for node in graph:
        source = cache_source(node.name)
        if source is None:
            encodings[node.name] = Encoding.fitted(*ranges[node.name], bits)
    for node in graph:
        source = cache_source(node.name)
        if source is not None:
            encodings[node.name] = encodings[source]
    return encodings


# ------------------------------------------------------------------------------------------
# Executors: what an op's output becomes, and the store it goes to


class Executor:
    """Runs `forward`'s ops for one store: `out` stores an op's output and returns what the ops
    after it read. Checks that the ops come in the graph's order (the handles rely on it)."""

    def __init__(self, path: str, graph: Sequence[Node], config: Config, backend: str,
                 model_name: str):
        import qnn_debug

        self.graph = list(graph)
        self.nodes = {node.name: node for node in self.graph}
        self.config = config
        self.writer = qnn_debug.StoreWriter(path, producer=PRODUCER, backend=backend,
                                            model=model_name)
        for node in self.graph:
            self.writer.graph_node(node.name, node.op_type, list(node.inputs), [node.name],
                                   [node.handle])
        self.run = -1
        self._cursor = 0

    # the decode loop

    def begin_run(self, run: int, name: str, tokens: np.ndarray) -> None:
        self.run, self._cursor = run, 0
        self.writer.begin_run(name)
        self.writer.write(GRAPH_INPUT, tokens.astype(np.int32), handles=[], role="graph_input")

    def end_run(self) -> None:
        if self._cursor != len(self.graph):
            raise RuntimeError(f"run {self.run} stored {self._cursor} of {len(self.graph)} ops")
        self.writer.end_run()

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        self.writer.abort()

    def _node(self, name: str) -> Node:
        expected = self.graph[self._cursor] if self._cursor < len(self.graph) else None
        if expected is None or expected.name != name:
            raise RuntimeError(f"op {name!r} out of the graph's order "
                               f"(expected {expected.name if expected else 'none'})")
        self._cursor += 1
        return expected

    @staticmethod
    def _role(name: str) -> str:
        return "graph_output" if name == GRAPH_OUTPUT else "intermediate"

    # what the forward calls

    def out(self, name: str, value: np.ndarray, *, exact: bool = False) -> np.ndarray:
        """Stores op `name`'s output `value` and returns it as the ops after it read it.
        `exact`: the op only selects or copies values (no kernel rounding of its own)."""
        raise NotImplementedError

    def cache(self, name: str, start: int, new: np.ndarray) -> np.ndarray:
        """Writes `new` ([1, heads, T, head_dim]) into the cache's slots start .. start + T - 1,
        stores the whole cache and returns it as the ops read it."""
        raise NotImplementedError

    def scores(self, name: str, raw: np.ndarray, masked: np.ndarray) -> np.ndarray:
        """The scores with the slots `masked` ([T, cache]) masked, stored; returns them as read."""
        raise NotImplementedError

    def key_shift(self, layer: int) -> int:
        """Added to the key's RoPE positions at `layer` (the fault; 0 when clean)."""
        return 0


class Reference(Executor):
    """The float32 reference; records every op output's range over the runs for `calibrate`
    (the scores' over the positions not masked)."""

    def __init__(self, path: str, graph: Sequence[Node], config: Config, *, mask_value: str,
                 model_name: str = "llama-decoder"):
        super().__init__(path, graph, config, "cpu", model_name)
        self.mask = -np.inf if mask_value == "inf" else np.finfo(np.float32).min
        self.ranges: Dict[str, Tuple[float, float]] = {}
        shape = (1, config.heads, config.cache, config.head_dim)
        self.caches = {node.name: np.zeros(shape, np.float32) for node in self.graph
                       if cache_source(node.name)}

    def _record(self, name: str, values: np.ndarray) -> None:
        if values.size:
            low, high = float(values.min()), float(values.max())
            old = self.ranges.get(name, (low, high))
            self.ranges[name] = (min(old[0], low), max(old[1], high))

    def _store(self, name: str, value: np.ndarray, *, calibrate_on=None) -> np.ndarray:
        node = self._node(name)
        value = np.ascontiguousarray(value, dtype=np.float32)
        self._record(name, value if calibrate_on is None else calibrate_on)
        self.writer.write(name, value, handles=[node.handle], role=self._role(name))
        return value

    def out(self, name, value, *, exact=False):
        return self._store(name, value)

    def cache(self, name, start, new):
        cache = self.caches[name]
        cache[:, :, start:start + new.shape[2]] = new
        return self._store(name, cache)

    def scores(self, name, raw, masked):
        visible = np.broadcast_to(~masked, raw.shape)
        return self._store(name, np.where(masked, np.float32(self.mask), raw),
                           calibrate_on=raw[visible])


class Quantized(Executor):
    """The emulated device (with `flip` and the settings' fault) or, with flip 0 and no fault,
    the ideal simulation: every op output quantized with its encoding, stored as codes, and
    dequantized (float64) for the ops after it."""

    def __init__(self, path: str, graph: Sequence[Node], config: Config,
                 encodings: Dict[str, Encoding], settings: Settings, *, backend: str,
                 flip: float, faulty: bool, model_name: str = "llama-decoder"):
        super().__init__(path, graph, config, backend, model_name)
        self.encodings = encodings
        self.settings = settings
        self.flip = flip
        self.faulty = faulty
        self.rng = np.random.default_rng(0)
        shape = (1, config.heads, config.cache, config.head_dim)
        self.cache_codes = {}
        for node in self.graph:
            if cache_source(node.name):
                enc = encodings[node.name]
                self.cache_codes[node.name] = np.full(shape, enc.zero_code, enc.storage)

    def begin_run(self, run, name, tokens):
        super().begin_run(run, name, tokens)
        # one stream per run: runs before a fault draw the same flips as without it
        self.rng = np.random.default_rng([self.settings.seed, run])

    def key_shift(self, layer):
        return self.settings.key_shift(layer, self.run) if self.faulty else 0

    def _codes(self, enc: Encoding, value: np.ndarray, exact: bool) -> np.ndarray:
        """Round, clamp, then move a share `flip` of the codes one step (not an exact op's, nor
        a code the quantizer saturated)."""
        unrounded = enc.unrounded(value)
        q = np.clip(np.rint(unrounded), 0, enc.qmax)
        if self.flip > 0 and not exact:
            inside = (unrounded > 0) & (unrounded < enc.qmax)
            moved = (self.rng.random(q.shape) < self.flip) & inside
            step = np.where(self.rng.random(q.shape) < 0.5, -1.0, 1.0)
            q = np.clip(q + moved * step, 0, enc.qmax)
        return q.astype(enc.storage)

    def _store(self, name: str, codes: np.ndarray) -> None:
        node = self._node(name)
        enc = self.encodings[name]
        self.writer.write(name, codes, dtype=enc.dtype, handles=[node.handle],
                          role=self._role(name), scale=enc.scale, offset=enc.offset)

    def out(self, name, value, *, exact=False):
        enc = self.encodings[name]
        codes = self._codes(enc, value, exact)
        self._store(name, codes)
        return enc.dequantize(codes)

    def cache(self, name, start, new):
        enc = self.encodings[name]
        codes = self.cache_codes[name]
        # `new` is the source's dequantized codes, in the same encoding: quantizing gives them back
        codes[:, :, start:start + new.shape[2]] = enc.quantize(new)
        self._store(name, codes)
        return enc.dequantize(codes)

    def scores(self, name, raw, masked):
        return self.out(name, raw + np.where(masked, DEVICE_MASK, 0.0))


# ------------------------------------------------------------------------------------------
# The whole emulation


@dataclass
class Emulation:
    """What `run_emulation` did: the model, its graph, the runs' tokens and the encodings."""

    config: Config
    settings: Settings
    graph: List[Node]
    tokens: List[np.ndarray]  # per run, [1, T]
    ranges: Dict[str, Tuple[float, float]]
    encodings: Dict[str, Encoding]
    seconds: Dict[str, float] = field(default_factory=dict)


def _loop(model: Model, ex: Executor, settings: Settings, tokens: List[np.ndarray],
          teacher: bool) -> None:
    """Every run on `ex`; with `teacher`, appends each run's greedy token to `tokens`."""
    try:
        for run in range(settings.runs):
            ex.begin_run(run, settings.run_name(run), tokens[run])
            logits = forward(model, ex, tokens[run], settings.start(run))
            ex.end_run()
            if teacher and run + 1 < settings.runs:
                tokens.append(np.array([[int(np.argmax(logits[0, -1]))]], np.int32))
        ex.close()
    except BaseException:
        ex.abort()
        raise


def run_emulation(out: str, config: Config = Config(), settings: Settings = Settings()
                  ) -> Emulation:
    """Writes ref.h5, dev.h5 and sim.h5 into `out` (created if needed)."""
    settings.check(config)
    os.makedirs(out, exist_ok=True)
    path = lambda name: os.path.join(out, name)  # noqa: E731
    graph = build_graph(config)
    model32 = build_model(config, settings.seed)
    model64 = model32.astype(np.float64)
    tokens = [prompt_tokens(settings.prefill, config.vocab, settings.seed)]
    seconds = {}

    clock = time.monotonic()
    ref = Reference(path("ref.h5"), graph, config, mask_value=settings.mask_value)
    _loop(model32, ref, settings, tokens, teacher=True)
    seconds["ref"] = time.monotonic() - clock
    encodings = calibrate(graph, ref.ranges, settings.bits)

    def quantized(name, backend, flip, faulty):
        clock = time.monotonic()
        ex = Quantized(path(name), graph, config, encodings, settings, backend=backend,
                       flip=flip, faulty=faulty)
        _loop(model64, ex, settings, tokens, teacher=False)
        seconds[name[:3]] = time.monotonic() - clock

    # The device and the simulation are independent: two threads (numpy's BLAS calls and the
    # store writer release the GIL; libhdf5 is thread-safe)
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = [pool.submit(quantized, "dev.h5", "QnnHtp", settings.flip, True),
                pool.submit(quantized, "sim.h5", "sim", 0.0, False)]
        for future in done:
            future.result()
    return Emulation(config, settings, graph, tokens, ref.ranges, encodings, seconds)


def fault_truth(e: Emulation) -> dict:
    """Where the fault is, what it touches first, and which runs and cache slots differ."""
    s, nodes = e.settings, {n.name: n for n in e.graph}
    if s.fault == "none":
        return {"kind": "none", "layer": None, "step": None, "first_tensor": None, "runs": [],
                "k_cache": None, "first_differing_slot": None, "first_differing_run": None}
    p = f"layers.{s.fault_layer}.attn."
    first_slot = s.start(s.fault_step)
    runs = list(range(s.fault_step, s.runs))
    return {
        "kind": s.fault,
        "description": "the key's RoPE uses position p + 1 instead of p, on the device only",
        "layer": s.fault_layer,
        "step": s.fault_step,
        "first_tensor": p + "rope_k",
        "first_tensor_group_id": nodes[p + "rope_k"].group_id,
        "runs": runs,
        "k_cache": p + "k_cache",
        "k_cache_group_id": nodes[p + "k_cache"].group_id,
        "first_differing_slot": first_slot,
        "first_differing_run": s.fault_step,
        # the slots written with the wrong key, per run: [first, last]
        "differing_slots": {str(run): [first_slot, s.start(run)] for run in runs},
        "downstream_first": [p + "scores", p + "probs", p + "out"],
        "device_only": True,
    }


def truth(e: Emulation) -> dict:
    """What was emulated, for the tests: truth.json."""
    s = e.settings
    return {
        "config": asdict(e.config),
        "settings": asdict(s),
        "files": {"reference": "ref.h5", "device": "dev.h5", "simulation": "sim.h5"},
        "graph_input": GRAPH_INPUT,
        "graph_output": GRAPH_OUTPUT,
        "runs": [{"run": run, "name": s.run_name(run), "start": s.start(run),
                  "tokens": e.tokens[run][0].tolist()} for run in range(s.runs)],
        "ops": [{"name": n.name, "op_type": n.op_type, "inputs": list(n.inputs),
                 "handle": n.handle, "group_id": n.group_id} for n in e.graph],
        "kv_caches": [n.name for n in e.graph if cache_source(n.name)],
        "mask": {"reference": "-inf" if s.mask_value == "inf" else
                 float(np.finfo(np.float32).min), "device": "the encoding's lowest code (0)",
                 "device_mask_constant": DEVICE_MASK},
        "fault": fault_truth(e),
        "encodings": {name: enc.to_json() for name, enc in e.encodings.items()},
        "ranges": {name: list(r) for name, r in e.ranges.items()},
        "seconds": {k: round(v, 3) for k, v in e.seconds.items()},
    }


def emulate(out: str, config: Config = Config(), settings: Settings = Settings()) -> dict:
    """Writes ref.h5, dev.h5, sim.h5 and truth.json into `out`; returns the truth."""
    doc = truth(run_emulation(out, config, settings))
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(doc, f, indent=1)
    return doc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dim", type=int, default=Config.dim)
    p.add_argument("--layers", type=int, default=Config.layers)
    p.add_argument("--heads", type=int, default=Config.heads)
    p.add_argument("--hidden", type=int, default=0, help="SwiGLU width (default: ~8/3 dim)")
    p.add_argument("--vocab", type=int, default=Config.vocab)
    p.add_argument("--cache", type=int, default=Config.cache, help="KV cache slots")
    p.add_argument("--prefill", type=int, default=Settings.prefill, help="prompt tokens (run 0)")
    p.add_argument("--steps", type=int, default=Settings.steps, help="decode steps (runs 1..)")
    p.add_argument("--bits", type=int, choices=BITS, default=Settings.bits,
                   help="activation bits (default 16)")
    p.add_argument("--flip", type=float, default=Settings.flip,
                   help="share of each op's codes the device rounds one step off (default 0.02)")
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--fault-layer", type=int, default=Settings.fault_layer)
    p.add_argument("--fault-step", type=int, default=Settings.fault_step,
                   help="the first decode step with the fault (1..steps)")
    p.add_argument("--mask-value", choices=MASK_VALUES, default=Settings.mask_value,
                   help="the reference's masked scores: -inf or float32's lowest (default inf)")
    p.add_argument("--seed", type=int, default=Settings.seed)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    clock = time.monotonic()
    try:
        config = Config(vocab=a.vocab, dim=a.dim, layers=a.layers, heads=a.heads,
                        hidden=a.hidden, cache=a.cache)
        settings = Settings(prefill=a.prefill, steps=a.steps, bits=a.bits, flip=a.flip,
                            fault=a.fault, fault_layer=a.fault_layer, fault_step=a.fault_step,
                            mask_value=a.mask_value, seed=a.seed)
        doc = emulate(a.out, config, settings)
    except ValueError as err:
        print(f"emulated_decoder.py: {err}", file=sys.stderr)
        return 2
    f = doc["fault"]
    where = "" if f["kind"] == "none" else \
        (f" at {f['first_tensor']} from step {f['step']} (k_cache slot "
         f"{f['first_differing_slot']} first differs in run {f['first_differing_run']})")
    print(f"decoder dim {a.dim}, {a.layers} layers, {a.heads} heads, cache {a.cache}: "
          f"{len(doc['ops'])} ops, {len(doc['runs'])} runs, {a.bits}-bit, fault "
          f"{f['kind']}{where} -> {a.out} in {time.monotonic() - clock:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
