"""An emulated QNN HTP device running a torchvision CNN (or a small ViT), for tests.

Writes the four stores a "quantization or kernel?" diff needs (docs/metrics.md, 6c) for one of
three models, with a known fault injected at a known op, so that tests can check what
`qnn-debug diff REF DEV --sim SIM --isolated ISO` says against what was done:

    python3 tests/python/emulated_cnn.py --model resnet18 --bits 8 --flip 0.02 \\
        --fault kernel5 --out DIR

DIR then holds `ref.h5`, `dev.h5`, `sim.h5`, `iso.h5`, `encodings.json` and `truth.json`. Every
function below is importable (`emulate` does what the command line does).

**Models** (`build_model`): torchvision's `resnet18` and `mobilenet_v2` with seeded random
weights, in eval mode, their BatchNorm running statistics first measured on random images
(one training-mode forward) and then jittered, and their affine weights randomised, so that no
BatchNorm is an identity; and `vit`, a small ViT of our own (`TinyViT`): a patch-embedding
convolution, pre-norm encoder blocks whose multi-head attention is written with plain ops
(Linear, reshape, transpose, matmul, softmax), a GELU MLP and residual adds. One block's first
LayerNorm has no affine weight of its own: the weight is a separate per-channel rescale op
(`h * gamma`) with one channel 100x the others, the "massive activation" of trained ViTs and
LLMs; the Linears reading it weigh that channel 100x less, so the block's output stays normal
while the rescale's per-tensor encoding is stretched by the one channel. The models are traced
with `torch.fx.symbolic_trace` and interpreted node by node (`Plan`).

**Reference** (`ref.h5`): every op node's float32 output (call_module, call_function,
call_method), named by its fx node name, with one debug handle per op counting from 1 in graph
order; the graph input (`graph_input`, no handle) and the output (`graph_output`); and a
`graph_node` per op (op type: the module's class, the function's or the method's name).

**Device ops** (`plan_device_ops`): as on HTP, a Conv2d whose only consumer is a BatchNorm2d,
optionally followed by that BatchNorm's only consumer if it is a ReLU, ReLU6 or Hardtanh, is one
op: the device stores one tensor, named after the chain's last node, carrying every member's
handle; the values inside the chain are never quantized or stored. Every other op node is its
own device op.

**Encodings** (`calibrate`): one asymmetric per-tensor activation encoding per device tensor
(and the graph input) over [min(min, 0), max(max, 0)] of the float reference over all runs,
UFIXED_POINT_8 (raw 0..255) or UFIXED_POINT_16 (0..65535), in QNN's convention
real = (q + offset) * scale. Weights stay float: their rounding is not what is tested.

**Device** (`run_chained` with a `Kernels`): the device runs on its own values. The graph input
is quantized; each device op computes in float64 from the dequantized device values of its
inputs, and its output is quantized with its encoding (round half to even, clamp), then a
fraction `flip` of the codes, chosen at random, move one step up or down (clamped), as real
kernels round differently. Ops that only move or select values (reshape, transpose, flatten,
dropout, max pooling...) and the ViT's rescale op are exact: they get no such flips. The codes
flow downstream, and are stored with their encoding, 4-D tensors as NHWC with
`axis_order = [0, 3, 1, 2]` (reference axis i is stored axis axis_order[i];
docs/store-format.md, section 7).

**Faults** (`FAULTS`), at one device op (`--fault-op`, by default the middle one of those with
weights):

- `none`;
- `kernel5`: every code of the op gets a uniform random integer in [-5, 5] added (a broken
  kernel whose error stays a few LSB);
- `wide`: the op's encoding is 25x too wide (same centre): a coarse encoding, quantization's
  fault;
- `clip`: the op's encoding covers only the middle 40% of its range: clipping;
- `scale`: the device requantizes with a wrong scale (the op's values x1.5 before
  quantization): a kernel or runtime bug.

`wide` and `clip` change the encodings file, so the simulation and the replay see them too;
`kernel5` and `scale` happen on the device only.

**Simulation** (`sim.h5`): the device's pipeline with the same encodings, chained on its own
values, with ideal kernels (no flips, no fault). **Replay** (`iso.h5`, `run_isolated`): each
device op recomputed alone from the device's dequantized inputs and quantized ideally with its
encoding. Both have the device store's names, handles, encodings and layout, so an ideal device
(flip 0, fault none) stores exactly the simulation's codes, and so does its replay.

`truth.json` records what was done: the model, settings, every device op (name, members,
handles, the diff's group id, exactness), the faulty op and its group, the encodings as
calibrated and as used, and the ViT's rescale op and massive channel.
"""
from __future__ import annotations

import argparse
import copy
import json
import operator
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emulated_encoding import Encoding  # noqa: E402

MODELS = ("resnet18", "mobilenet_v2", "vit")
FAULTS = ("none", "kernel5", "wide", "clip", "scale")
BITS = (8, 16)

WIDE_FACTOR = 25.0  # `wide`: the encoding's scale this many times the calibrated one
CLIP_FRACTION = 0.4  # `clip`: the share of the calibrated range the encoding keeps
SCALE_FACTOR = 1.5  # `scale`: the device's values this many times the right ones
KERNEL_LSB = 5  # `kernel5`: the largest error added to each code
MASSIVE_RATIO = 100.0  # the ViT's massive channel against the others

# fused on the device: Conv2d -> BatchNorm2d [-> activation]
_ACTIVATION_MODULES = (nn.ReLU, nn.ReLU6, nn.Hardtanh)
_ACTIVATION_FUNCTIONS = (F.relu, torch.relu, F.relu6, F.hardtanh)
# ops whose outputs are some of their input's values, moved or selected: no kernel rounding
_MOVING_MODULES = (nn.Dropout, nn.Identity, nn.MaxPool2d, nn.Flatten)
_MOVING_FUNCTIONS = (torch.flatten, torch.reshape, torch.transpose, torch.permute,
                     F.max_pool2d, F.dropout, operator.getitem)
_MOVING_METHODS = ("reshape", "view", "flatten", "transpose", "permute", "contiguous",
                   "squeeze", "unsqueeze")


# ------------------------------------------------------------------------------------------
# Models


class Attention(nn.Module):
    """Multi-head self-attention of plain ops over [B, N, C] tokens (fixed N for fx)."""

    def __init__(self, dim: int, heads: int, tokens: int):
        super().__init__()
        self.heads, self.tokens, self.head_dim = heads, tokens, dim // heads
        self.dim = dim
        self.scale = self.head_dim ** -0.5
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        n, h, d = self.tokens, self.heads, self.head_dim
        q = self.q(x).reshape(-1, n, h, d).transpose(1, 2)  # [B, H, N, D]
        k = self.k(x).reshape(-1, n, h, d).transpose(1, 2)
        v = self.v(x).reshape(-1, n, h, d).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        weights = torch.softmax(scores, dim=-1)
        out = torch.matmul(weights, v).transpose(1, 2).reshape(-1, n, self.dim)
        return self.proj(out)


class Block(nn.Module):
    """Pre-norm encoder block. With `rescale`, norm1 has no affine weight and `h * gamma` is a
    separate op (gamma: one weight per channel)."""

    def __init__(self, dim: int, heads: int, tokens: int, mlp: int, rescale: bool = False):
        super().__init__()
        self.rescale = rescale
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=not rescale)
        if rescale:
            self.gamma = nn.Parameter(torch.ones(dim))
        self.attn = Attention(dim, heads, tokens)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(mlp, dim)

    def forward(self, x):
        h = self.norm1(x)
        if self.rescale:
            h = h * self.gamma
        x = x + self.attn(h)
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class TinyViT(nn.Module):
    """A small ViT: 8x8 patches, `depth` blocks, mean pooling, a linear head. Block
    `massive_block`'s rescale op makes channel `massive_channel` about MASSIVE_RATIO times the
    others."""

    def __init__(self, size: int = 64, patch: int = 8, dim: int = 64, depth: int = 4,
                 heads: int = 4, mlp: int = 128, classes: int = 10, massive_block: int = 1,
                 massive_channel: int = 5):
        super().__init__()
        if size % patch:
            raise ValueError(f"vit: --size {size} is not a multiple of the patch size {patch}")
        tokens = (size // patch) ** 2
        self.massive_block, self.massive_channel = massive_block, massive_channel
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.pos_embed = nn.Parameter(0.5 * torch.randn(1, tokens, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads, tokens, mlp, rescale=i == massive_block)
                                      for i in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.normal_(0, 0.1)
            block = self.blocks[massive_block]
            block.gamma.uniform_(0.5, 1.5)
            block.gamma[massive_channel] = MASSIVE_RATIO
            for linear in (block.attn.q, block.attn.k, block.attn.v):
                linear.weight[:, massive_channel] /= MASSIVE_RATIO

    @property
    def rescale_parameter(self) -> str:
        return f"blocks.{self.massive_block}.gamma"

    def forward(self, x):
        x = self.patch_embed(x)  # [B, C, H/8, W/8]
        x = x.flatten(2).transpose(1, 2)  # [B, N, C]
        x = x + self.pos_embed
        x = self.blocks(x)
        x = self.norm(x)
        return self.head(x.mean(dim=1))


def randomise_batchnorm(model: nn.Module, size: int, generator: torch.Generator) -> None:
    """Running statistics measured on a batch of random images, then jittered; random affine
    weights: no BatchNorm of the eval-mode model is an identity, and none blows the values up."""
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative: the one batch's statistics
    model.train()
    with torch.no_grad():
        model(torch.randn(8, 3, size, size, generator=generator))
        for m in norms:
            c = m.num_features
            std = m.running_var.sqrt()
            m.running_mean += 0.2 * std * torch.randn(c, generator=generator)
            m.running_var *= 0.6 + 0.8 * torch.rand(c, generator=generator)
            m.weight.copy_(0.6 + 0.8 * torch.rand(c, generator=generator))
            m.bias.copy_(0.2 * torch.randn(c, generator=generator))
    model.eval()


def build_model(name: str, size: int = 64, seed: int = 0) -> nn.Module:
    """The eval-mode model `name` (MODELS) with random weights from `seed`."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed + 1)
    if name == "vit":
        model = TinyViT(size=size)
    elif name in ("resnet18", "mobilenet_v2"):
        import torchvision  # only the CNNs need it

        model = getattr(torchvision.models, name)(weights=None)
        randomise_batchnorm(model, size, generator)
    else:
        raise ValueError(f"unknown model {name!r} (models: {', '.join(MODELS)})")
    for m in model.modules():  # torchvision's ReLU(inplace=True) would overwrite its input,
        if getattr(m, "inplace", False):  # the value an op before it gave (a BN, an add)
            m.inplace = False
    return model.eval()


# ------------------------------------------------------------------------------------------
# The traced graph and its device ops


@dataclass
class DeviceOp:
    """One op of the device: fx nodes run as one kernel, stored as one tensor."""

    name: str  # the device tensor's name: the last member's
    members: List[fx.Node]
    handles: List[int]
    inputs: List[str]  # names of the stored tensors it reads (from outside the op)
    exact: bool  # no kernel rounding differences (flips)

    @property
    def member_names(self) -> List[str]:
        return [m.name for m in self.members]


def op_type(node: fx.Node, gm: fx.GraphModule) -> str:
    """The module's class, the function's or the method's name."""
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)).__name__
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    return str(node.target)


def handle_group_id(handles: Sequence[int]) -> str:
    """The diff's group id of these handles ("h3-5", "h1,2", "h7"; compare/src/align.cpp)."""
    h = sorted(set(handles))
    parts, i = [], 0
    while i < len(h):
        j = i
        while j + 1 < len(h) and h[j + 1] == h[j] + 1:
            j += 1
        parts.append(f"{h[i]}-{h[j]}" if j - i >= 2 else ",".join(str(v) for v in h[i:j + 1]))
        i = j + 1
    return "h" + ",".join(parts)


class Plan:
    """A traced model: its op nodes with their handles, its device ops, and a float32 (the
    reference) and float64 (the device) interpreter of them."""

    def __init__(self, model: nn.Module, example: torch.Tensor,
                 exact_parameters: Sequence[str] = ()):
        self.gm32 = fx.symbolic_trace(model)
        self.gm64 = copy.deepcopy(self.gm32).double()
        nodes = list(self.gm32.graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        if len(placeholders) != 1:
            raise ValueError("the emulator runs models with one input")
        self.input = placeholders[0].name
        self.nodes = [n for n in nodes if n.op in ("call_module", "call_function", "call_method")]
        self.constants32 = {n.name: _fetch_attr(self.gm32, n.target)
                            for n in nodes if n.op == "get_attr"}
        self.constants64 = {n.name: _fetch_attr(self.gm64, n.target)
                            for n in nodes if n.op == "get_attr"}
        outputs = [n for n in nodes if n.op == "output"]
        result = outputs[0].args[0]
        if not isinstance(result, fx.Node):
            raise ValueError("the emulator runs models with one output tensor")
        self.output = result.name
        self.handles = {n.name: i + 1 for i, n in enumerate(self.nodes)}
        self.types = {n.name: op_type(n, self.gm32) for n in self.nodes}
        # every op must give a tensor: the graph has no shape arithmetic or tuples to carry
        values = self.reference(example)
        for n in self.nodes:
            if not isinstance(values[n.name], np.ndarray):
                raise ValueError(f"op {n.name} gives no tensor: not supported")
        exact_nodes = {n.name for n in self.nodes
                       if any(isinstance(a, fx.Node) and a.op == "get_attr"
                              and a.target in exact_parameters for a in n.args)}
        self.rescale_op = next(iter(sorted(exact_nodes)), None)  # the ViT's `h * gamma`
        self.ops = plan_device_ops(self, exact_nodes)
        self.op_of = {m.name: op for op in self.ops for m in op.members}

    # -- interpretation -------------------------------------------------------------------

    def _call(self, node: fx.Node, env, gm: fx.GraphModule, constants):
        def value(n: fx.Node):
            return constants[n.name] if n.name in constants else env[n.name]

        args, kwargs = fx.node.map_arg((node.args, node.kwargs), value)
        if node.op == "call_module":
            return gm.get_submodule(node.target)(*args, **kwargs)
        if node.op == "call_function":
            return node.target(*args, **kwargs)
        return getattr(args[0], node.target)(*args[1:], **kwargs)

    def reference(self, x: torch.Tensor) -> Dict[str, np.ndarray]:
        """The float32 value of every op node (and the input), by node name."""
        env = {self.input: x.float()}
        with torch.no_grad():
            for node in self.nodes:
                env[node.name] = self._call(node, env, self.gm32, self.constants32)
        return {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in env.items()}

    def compute(self, op: DeviceOp, inputs: Dict[str, np.ndarray]) -> np.ndarray:
        """The device op's float64 output from float64 values of its inputs (by name)."""
        env = {name: torch.from_numpy(inputs[name]) for name in op.inputs}
        with torch.no_grad():
            for node in op.members:
                env[node.name] = self._call(node, env, self.gm64, self.constants64)
        return env[op.name].numpy()


def _fetch_attr(gm: fx.GraphModule, target: str):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value.detach() if isinstance(value, torch.Tensor) else value


def _is_module(node: fx.Node, gm: fx.GraphModule, types) -> bool:
    return node.op == "call_module" and isinstance(gm.get_submodule(node.target), types)


def _only_user(node: fx.Node) -> Optional[fx.Node]:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _is_moving(node: fx.Node, gm: fx.GraphModule) -> bool:
    return (_is_module(node, gm, _MOVING_MODULES)
            or (node.op == "call_function" and node.target in _MOVING_FUNCTIONS)
            or (node.op == "call_method" and node.target in _MOVING_METHODS))


def plan_device_ops(plan: Plan, exact_nodes=frozenset()) -> List[DeviceOp]:
    """The device ops in execution order: conv+bn(+activation) chains fused, every other op node
    alone. A fused chain runs where its last member is (its conv's only consumer is its bn, so
    nothing between needs the chain's inner values)."""
    gm = plan.gm32
    chain_of: Dict[str, List[fx.Node]] = {}
    for node in plan.nodes:
        if not _is_module(node, gm, nn.Conv2d):
            continue
        bn = _only_user(node)
        if bn is None or not _is_module(bn, gm, nn.BatchNorm2d) or bn.args[0] is not node:
            continue
        chain = [node, bn]
        act = _only_user(bn)
        if act is not None and act.args and act.args[0] is bn and (
                _is_module(act, gm, _ACTIVATION_MODULES)
                or (act.op == "call_function" and act.target in _ACTIVATION_FUNCTIONS)):
            chain.append(act)
        for member in chain:
            chain_of[member.name] = chain
    ops = []
    for node in plan.nodes:
        chain = chain_of.get(node.name, [node])
        if node is not chain[-1]:
            continue
        member_names = {m.name for m in chain}
        inputs = []
        for member in chain:
            for arg in member.all_input_nodes:
                if arg.op != "get_attr" and arg.name not in member_names and arg.name not in inputs:
                    inputs.append(arg.name)
        exact = len(chain) == 1 and (_is_moving(node, gm) or node.name in exact_nodes)
        ops.append(DeviceOp(node.name, chain, [plan.handles[m.name] for m in chain], inputs, exact))
    return ops


# ------------------------------------------------------------------------------------------
# Encodings


def calibrate(plan: Plan, references: Sequence[Dict[str, np.ndarray]], bits: int
              ) -> Dict[str, Encoding]:
    """An encoding per device tensor (and the graph input) from its range over every run."""
    encodings = {}
    for name in [plan.input] + [op.name for op in plan.ops]:
        low = min(float(np.min(r[name])) for r in references)
        high = max(float(np.max(r[name])) for r in references)
        encodings[name] = Encoding.fitted(low, high, bits)
    return encodings


def faulty_encodings(encodings: Dict[str, Encoding], fault: str, fault_op: str
                     ) -> Dict[str, Encoding]:
    """The encodings the device (and the simulation) use: `wide` and `clip` change one."""
    used = dict(encodings)
    if fault == "wide":
        used[fault_op] = encodings[fault_op].widened(WIDE_FACTOR)
    elif fault == "clip":
        used[fault_op] = encodings[fault_op].widened(CLIP_FRACTION)
    return used


# ------------------------------------------------------------------------------------------
# Execution


@dataclass
class Kernels:
    """What the device's kernels do beyond the ideal: `flip` of the codes of every non-exact op
    one step off, and the kernel fault (`kernel5`, `scale`) at `fault_op`."""

    flip: float = 0.0
    fault: str = "none"
    fault_op: str = ""
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))

    def codes(self, op: DeviceOp, y: np.ndarray, encoding: Encoding) -> np.ndarray:
        faulty = op.name == self.fault_op
        if faulty and self.fault == "scale":
            y = y * SCALE_FACTOR
        q = encoding.quantize(y)
        if self.flip > 0 and not op.exact:
            moved = self.rng.random(q.shape) < self.flip
            step = np.where(self.rng.random(q.shape) < 0.5, -1.0, 1.0)
            q = np.clip(q + moved * step, 0, encoding.qmax)
        if faulty and self.fault == "kernel5":
            q = np.clip(q + self.rng.integers(-KERNEL_LSB, KERNEL_LSB + 1, q.shape), 0,
                        encoding.qmax)
        return q


def run_chained(plan: Plan, encodings: Dict[str, Encoding], x: torch.Tensor,
                kernels: Optional[Kernels] = None) -> Dict[str, np.ndarray]:
    """Codes (float64, reference layout) of every device tensor, each op on the values the ops
    before it produced: the device with `kernels`, the ideal simulation without. A tensor whose
    encoding is None is computed in float: its "codes" are its float64 values."""
    x = x.double().numpy()
    enc_in = encodings[plan.input]
    codes = {plan.input: x if enc_in is None else enc_in.quantize(x)}
    values = {plan.input: x if enc_in is None else enc_in.dequantize(codes[plan.input])}
    for op in plan.ops:
        y = plan.compute(op, values)
        enc = encodings[op.name]
        if enc is None:
            codes[op.name] = values[op.name] = y
            continue
        codes[op.name] = kernels.codes(op, y, enc) if kernels else enc.quantize(y)
        values[op.name] = enc.dequantize(codes[op.name])
    return codes


def run_isolated(plan: Plan, encodings: Dict[str, Encoding], device: Dict[str, np.ndarray]
                 ) -> Dict[str, np.ndarray]:
    """Codes of every device op run alone on the device's dequantized inputs, quantized ideally
    (the graph input: the device's own)."""
    values = {name: encodings[name].dequantize(q) for name, q in device.items()}
    codes = {plan.input: device[plan.input]}
    for op in plan.ops:
        codes[op.name] = encodings[op.name].quantize(plan.compute(op, values))
    return codes


# ------------------------------------------------------------------------------------------
# Stores


def _writer(path: str, backend: str, model: str):
    import qnn_debug

    return qnn_debug.StoreWriter(path, producer="tests/python/emulated_cnn.py", backend=backend,
                                 model=model)


def _role(plan: Plan, name: str) -> str:
    if name == plan.input:
        return "graph_input"
    return "graph_output" if name == plan.output else "intermediate"


def write_reference(path: str, plan: Plan, references: Sequence[Dict[str, np.ndarray]],
                    model: str) -> None:
    """The float store: the input and every op node's output, run by run, and the op graph."""
    with _writer(path, "cpu", model) as w:
        for node in plan.nodes:
            inputs = [a.name for a in node.all_input_nodes if a.op != "get_attr"]
            w.graph_node(node.name, plan.types[node.name], inputs, [node.name],
                         [plan.handles[node.name]])
        for k, ref in enumerate(references):
            w.begin_run(f"run{k}")
            w.write(plan.input, ref[plan.input].astype(np.float32), handles=[],
                    role="graph_input")
            for node in plan.nodes:
                w.write(node.name, ref[node.name].astype(np.float32),
                        handles=[plan.handles[node.name]], role=_role(plan, node.name))
            w.end_run()


def write_quantized(path: str, plan: Plan, encodings: Dict[str, Encoding],
                    runs: Sequence[Dict[str, np.ndarray]], *, backend: str, model: str,
                    nhwc: bool = True) -> None:
    """A device-shaped store: the input and one tensor per device op, as integer codes with their
    encodings, 4-D tensors NHWC when `nhwc`."""
    handles = {plan.input: []} | {op.name: op.handles for op in plan.ops}
    with _writer(path, backend, model) as w:
        for k, codes in enumerate(runs):
            w.begin_run(f"run{k}")
            for name in [plan.input] + [op.name for op in plan.ops]:
                enc = encodings[name]
                q = codes[name].astype(enc.storage)
                order = None
                if nhwc and q.ndim == 4:
                    q, order = np.ascontiguousarray(q.transpose(0, 2, 3, 1)), [0, 3, 1, 2]
                w.write(name, q, dtype=enc.dtype, handles=handles[name], role=_role(plan, name),
                        scale=enc.scale, offset=enc.offset, axis_order=order)
            w.end_run()


# ------------------------------------------------------------------------------------------
# The whole emulation


def default_fault_op(plan: Plan) -> str:
    """The middle device op among those with weights (a Conv2d or a Linear)."""
    weighted = [op for op in plan.ops
                if any(_is_module(m, plan.gm32, (nn.Conv2d, nn.Linear)) for m in op.members)]
    return weighted[len(weighted) // 2].name


def resolve_fault_op(plan: Plan, name: Optional[str]) -> str:
    """The device op `name` is (a device tensor or any member of a fused op), or the default."""
    if not name:
        return default_fault_op(plan)
    if name not in plan.op_of:
        raise ValueError(f"--fault-op {name!r}: no such op (device ops: "
                         f"{', '.join(op.name for op in plan.ops)})")
    return plan.op_of[name].name


def make_inputs(runs: int, size: int, seed: int) -> List[torch.Tensor]:
    """One random image per run."""
    return [torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(seed * 1000 + k))
            for k in range(runs)]


@dataclass
class Emulation:
    """Everything one emulation computed; `emulate` writes it."""

    model: nn.Module
    plan: Plan
    references: List[Dict[str, np.ndarray]]
    calibrated: Dict[str, Encoding]
    encodings: Dict[str, Encoding]
    device: List[Dict[str, np.ndarray]]
    sim: List[Dict[str, np.ndarray]]
    iso: List[Dict[str, np.ndarray]]
    fault_op: str


def run_emulation(model_name: str = "resnet18", *, bits: int = 8, flip: float = 0.02,
                  fault: str = "none", fault_op: Optional[str] = None, runs: int = 2,
                  size: int = 64, seed: int = 0) -> Emulation:
    """Calibrates, runs the device, the simulation and the replay; writes nothing."""
    if bits not in BITS:
        raise ValueError(f"--bits must be one of {BITS}, not {bits}")
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r} (faults: {', '.join(FAULTS)})")
    if not 0 <= flip <= 1:
        raise ValueError(f"--flip must be within [0, 1], not {flip}")
    model = build_model(model_name, size, seed)
    inputs = make_inputs(runs, size, seed)
    exact = [model.rescale_parameter] if isinstance(model, TinyViT) else []
    plan = Plan(model, inputs[0], exact_parameters=exact)
    references = [plan.reference(x) for x in inputs]
    calibrated = calibrate(plan, references, bits)
    op = resolve_fault_op(plan, fault_op)
    encodings = faulty_encodings(calibrated, fault, op)
    device, sim, iso = [], [], []
    for k, x in enumerate(inputs):
        kernels = Kernels(flip, fault, op, np.random.default_rng([seed, k]))
        device.append(run_chained(plan, encodings, x, kernels))
        sim.append(run_chained(plan, encodings, x))
        iso.append(run_isolated(plan, encodings, device[-1]))
    return Emulation(model, plan, references, calibrated, encodings, device, sim, iso, op)


def truth(e: Emulation, settings: dict) -> dict:
    """What was injected where, for the tests: truth.json."""
    plan = e.plan
    faulty = plan.op_of[e.fault_op]

    def describe(op: DeviceOp) -> dict:
        return {"name": op.name, "members": op.member_names,
                "op_types": [plan.types[m] for m in op.member_names], "handles": op.handles,
                "group_id": handle_group_id(op.handles), "inputs": op.inputs, "exact": op.exact}

    doc = dict(settings)
    doc.update({
        "graph_input": plan.input,
        "graph_output": plan.output,
        "reference_ops": len(plan.nodes),
        "device_tensors": [plan.input] + [op.name for op in plan.ops],
        "device_ops": [describe(op) for op in plan.ops],
        "fused": [describe(op) for op in plan.ops if len(op.members) > 1],
        "exact_ops": [op.name for op in plan.ops if op.exact],
        "fault": {"kind": settings["fault"], "op": e.fault_op,
                  "group_id": handle_group_id(faulty.handles), "members": faulty.member_names,
                  "handles": faulty.handles,
                  "calibrated_encoding": e.calibrated[e.fault_op].to_json(),
                  "used_encoding": e.encodings[e.fault_op].to_json(),
                  "device_only": settings["fault"] in ("kernel5", "scale")},
        "encodings": {name: enc.to_json() for name, enc in e.encodings.items()},
    })
    if isinstance(e.model, TinyViT):
        rescale = plan.rescale_op
        channel = e.model.massive_channel
        tokens = np.concatenate([r[rescale].reshape(-1, r[rescale].shape[-1])
                                 for r in e.references])  # [tokens of every run, channels]
        peak, rms = np.abs(tokens).max(axis=0), np.sqrt(np.mean(tokens ** 2, axis=0))
        doc["massive_activation"] = {
            "op": rescale, "channel": channel, "peak": float(peak[channel]),
            "peak_ratio": float(peak[channel] / np.delete(peak, channel).max()),
            "rms_ratio": float(rms[channel] / np.delete(rms, channel).mean())}
    return doc


def emulate(out: str, model_name: str = "resnet18", *, bits: int = 8, flip: float = 0.02,
            fault: str = "none", fault_op: Optional[str] = None, runs: int = 2, size: int = 64,
            seed: int = 0, nhwc: bool = True) -> dict:
    """Writes ref.h5, dev.h5, sim.h5, iso.h5, encodings.json and truth.json into `out`; returns
    the truth."""
    e = run_emulation(model_name, bits=bits, flip=flip, fault=fault, fault_op=fault_op, runs=runs,
                      size=size, seed=seed)
    settings = {"model": model_name, "bits": bits, "flip": flip, "fault": fault, "runs": runs,
                "size": size, "seed": seed, "nhwc": nhwc}
    return write_emulation(out, e, settings)


def write_emulation(out: str, e: Emulation, settings: dict) -> dict:
    """Writes what `emulate` writes for an emulation `e` run with `settings`; returns the
    truth."""
    os.makedirs(out, exist_ok=True)
    model_name, nhwc = settings["model"], settings["nhwc"]
    path = lambda name: os.path.join(out, name)  # noqa: E731
    write_reference(path("ref.h5"), e.plan, e.references, model_name)
    for name, runs_codes, backend in (("dev.h5", e.device, "QnnHtp"), ("sim.h5", e.sim, "sim"),
                                      ("iso.h5", e.iso, "replay")):
        write_quantized(path(name), e.plan, e.encodings, runs_codes, backend=backend,
                        model=model_name, nhwc=nhwc)
    with open(path("encodings.json"), "w") as f:
        json.dump({name: enc.to_json() for name, enc in e.encodings.items()}, f, indent=1)
    doc = truth(e, settings)
    with open(path("truth.json"), "w") as f:
        json.dump(doc, f, indent=1)
    return doc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=MODELS, default="resnet18")
    p.add_argument("--bits", type=int, choices=BITS, default=8)
    p.add_argument("--flip", type=float, default=0.02,
                   help="share of each op's codes the device rounds one step off (default 0.02)")
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--fault-op", default=None,
                   help="the faulty op: a device tensor or a member of a fused op "
                        "(default: the middle op with weights)")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--size", type=int, default=64, help="input height and width (default 64)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--nhwc", action=argparse.BooleanOptionalAction, default=True,
                   help="store 4-D device tensors as NHWC (default on)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    start = time.monotonic()
    try:
        doc = emulate(a.out, a.model, bits=a.bits, flip=a.flip, fault=a.fault,
                      fault_op=a.fault_op, runs=a.runs, size=a.size, seed=a.seed, nhwc=a.nhwc)
    except ValueError as err:
        print(f"emulated_cnn.py: {err}", file=sys.stderr)
        return 2
    fused = len(doc["fused"])
    print(f"{a.model}: {doc['reference_ops']} ops, {len(doc['device_ops'])} device ops "
          f"({fused} fused), fault {a.fault} at {doc['fault']['op']} "
          f"({doc['fault']['group_id']}), {a.runs} runs -> {a.out} "
          f"in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
