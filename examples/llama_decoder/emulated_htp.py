"""An emulated QNN HTP execution of the decoder: 16-bit activations, 8-bit weights, one fault.

What a QNN conversion of the model would run, emulated in PyTorch:

- **Encodings** (``write_encodings``): every op's output gets a static unsigned 16-bit encoding
  from its range over a float calibration run (``calibrate``), every Linear and Embedding
  weight a symmetric signed 8-bit encoding per output channel, in the plain-map encodings
  format qnn-debug reads (docs/formats.md, section 4).
- **Fake quantization** by ``qnn_debug.simulate`` (QNN's offset convention, docs/python.md):
  the weights once, each op's output when the op finishes (a forward hook replaces the
  output, so the ops downstream read the quantized value, as on the device).
- **The fault**: layer ``FAULT_LAYER``'s attention scores are computed in fp16 (a mixed-precision
  override) and stay fp16: a score fp16 cannot hold (above 65504) becomes inf, and the softmax
  of a row with inf is NaN (0 once its output is requantized to 16 bits). The scores grow with
  the distance to the first token (llama.py), so this starts after some decode steps.

The KV cache is not requantized: it holds the keys and values the ops before it already
quantized, as a device's cache holds their codes.
"""
from __future__ import annotations

import copy
import json

import torch
from torch import nn

from qnn_debug import simulate

from llama import FAULT_LAYER, Decoder, KVCache, Scores, generate

ACTIVATION_DTYPE = "UFIXED_POINT_16"
WEIGHT_DTYPE = "SFIXED_POINT_8"


def quantized_ops(model: Decoder):
    """(name, module) of every op whose output the device quantizes: the leaf modules but the
    KV caches."""
    return [(name, m) for name, m in model.named_modules()
            if name and next(m.children(), None) is None and not isinstance(m, KVCache)]


def calibrate(model: Decoder, prompt: torch.Tensor, steps: int):
    """{op name: (min, max)} of each op's output over a float greedy generation of `steps`
    tokens after `prompt`."""
    ranges = {}

    def record(name):
        def hook(module, args, output):
            low, high = ranges.get(name, (0.0, 0.0))  # zero is always representable
            ranges[name] = (min(low, output.min().item()), max(high, output.max().item()))
        return hook

    handles = [m.register_forward_hook(record(name)) for name, m in quantized_ops(model)]
    try:
        model.reset()
        generate(lambda tokens, run_name: model(tokens), prompt, steps)
    finally:
        for h in handles:
            h.remove()
    return ranges


def write_encodings(model: Decoder, ranges, path) -> None:
    """The encodings file: activations 16-bit per tensor from `ranges`, weights 8-bit per
    output channel."""
    encodings = {}
    for name, (low, high) in ranges.items():
        scale = max(high - low, 1e-12) / 65535
        encodings[name] = {"scale": scale, "offset": round(low / scale), "dtype": ACTIVATION_DTYPE}
    for name, m in model.named_modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            peak = m.weight.detach().abs().amax(dim=1).clamp(min=1e-12)
            encodings[f"{name}.weight"] = {"axis": 0, "scales": (peak / 127).tolist(),
                                           "offsets": [0] * len(peak), "dtype": WEIGHT_DTYPE}
    with open(path, "w") as f:
        json.dump(encodings, f, indent=1)


class Fp16Scores(Scores):
    """The fault: q k^T / sqrt(head_dim) with fp16 inputs and an fp16 result (accumulated in
    float32 here: the overflow is in the result, which fp16 cannot hold above 65504)."""

    def forward(self, q, k):
        return super().forward(q.half().float(), k.half().float()).half()


def make_device(model: Decoder, encodings_path) -> Decoder:
    """A copy of `model` that runs as the emulated device: weights fake-quantized, each op's
    output fake-quantized by a forward hook, layer FAULT_LAYER's scores in fp16."""
    table = simulate.load_encodings(encodings_path)
    device = copy.deepcopy(model)
    with torch.no_grad():
        for name, param in device.named_parameters():
            if name in table:
                param.copy_(simulate.fake_quantize(param, table[name])[0])
    faulty = device.layers[FAULT_LAYER].attn
    faulty.scores = Fp16Scores(device.config)
    for name, m in quantized_ops(device):
        if m is not faulty.scores:
            m.register_forward_hook(_quantize_output(table[name]))
    return device


def _quantize_output(encoding):
    def hook(module, args, output):
        return simulate.fake_quantize(output, encoding)[0]
    return hook
