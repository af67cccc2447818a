#!/usr/bin/python3
"""What qnn_debug.capture_torch costs over copying every intermediate out to numpy yourself.

    PYTHONPATH=build/python /usr/bin/python3 tests/bench/python_capture_bench.py [--repeats 7]
        [--blocks 12] [--dir DIR] [--profile]

The model is a stack of residual blocks (depthwise 3x3 conv, 1x1 conv, ReLU, add) on a
1x32x128x128 float32 input: cheap ops, so moving the tensors is a large share of the time (a
stack of full 3x3 convolutions would hide any capture cost behind arithmetic). Every op output
is 2 MiB; with 12 blocks a forward makes about 100 MB of intermediates.

Measured in one process, each the median of --repeats runs after one warm-up:
  forward   the plain forward pass, nothing copied (for scale only)
  baseline  the forward through a torch.fx.Interpreter that copies every node's output tensor
            to numpy (`.numpy().copy()`): the least any capture can do
  capture   qnn_debug.capture_torch into a new store in --dir (a local-disk temporary
            directory by default), file committed, one run per call
The ratio capture / baseline is the number to watch (target <= 2.0). A benchmark, not a test:
it prints a table and exits 0. With --profile (or when the ratio is above 2) it also prints
where capture_torch's time goes (cProfile, by own time).
"""
import argparse
import cProfile
import io
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time

import torch
import torch.fx
from torch import nn

from qnn_debug.torch_capture import capture_torch


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.dw = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)
        self.pw = nn.Conv2d(channels, channels, 1)
        self.act = nn.ReLU()

    def forward(self, x):
        return x + self.act(self.pw(self.dw(x)))


class Stack(nn.Module):
    def __init__(self, blocks, channels=32):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(channels) for _ in range(blocks)])

    def forward(self, x):
        return self.blocks(x)


class CopyOut(torch.fx.Interpreter):
    """The baseline: every node's tensor output copied to numpy, nothing else."""

    def __init__(self, gm):
        super().__init__(gm)
        self.arrays = []

    def run_node(self, n):
        value = super().run_node(n)
        if isinstance(value, torch.Tensor) and n.op not in ("get_attr", "output"):
            self.arrays.append(value.detach().numpy().copy())
        return value


def median_time(fn, repeats, setup=None):
    """Median wall time of fn() over `repeats` runs after one warm-up; setup() runs untimed
    before each."""
    times = []
    for i in range(repeats + 1):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        if i > 0:
            times.append(time.perf_counter() - start)
    return statistics.median(times), times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = Stack(args.blocks).eval()
    x = torch.randn(1, 32, 128, 128)
    gm = torch.fx.symbolic_trace(model)
    workdir = tempfile.mkdtemp(prefix="qd_capture_bench_", dir=args.dir)
    store = os.path.join(workdir, "capture.h5")

    try:
        def forward():
            with torch.no_grad():
                model(x)

        holder = {}

        def baseline():
            interpreter = CopyOut(gm)
            with torch.no_grad():
                interpreter.run(x)
            holder["arrays"] = interpreter.arrays
            del interpreter

        def remove_store():  # deleting 100 MB is not part of capturing
            if os.path.exists(store):
                os.remove(store)

        def capture():
            holder["summary"] = capture_torch(model, [x], store)

        baseline()
        count = len(holder["arrays"])
        nbytes = sum(a.nbytes for a in holder["arrays"])
        holder.clear()

        t_forward, _ = median_time(forward, args.repeats)
        t_base, base_all = median_time(baseline, args.repeats)
        holder.clear()
        t_capture, capture_all = median_time(capture, args.repeats, setup=remove_store)
        summary = holder["summary"]
        file_bytes = os.path.getsize(store)
        assert summary.tensors == count and summary.bytes == nbytes, (summary, count, nbytes)

        mb = nbytes / 1e6
        ratio = t_capture / t_base
        print(f"model: {args.blocks} blocks of (depthwise 3x3, 1x1 conv, ReLU, add) on "
              f"1x32x128x128 float32; torch {torch.__version__}, {torch.get_num_threads()} "
              f"threads; store in {workdir}")
        print(f"intermediates per forward: {count} tensors, {mb:.1f} MB; store file "
              f"{file_bytes / 1e6:.1f} MB")
        print(f"median of {args.repeats} (after one warm-up):")
        print(f"{'':<10}{'seconds':>10}{'MB/s':>10}{'x baseline':>12}")
        for name, t in (("forward", t_forward), ("baseline", t_base), ("capture", t_capture)):
            print(f"{name:<10}{t:>10.4f}{mb / t:>10.0f}{t / t_base:>12.2f}")
        print(f"baseline runs: {' '.join(f'{t:.4f}' for t in base_all)}")
        print(f"capture runs:  {' '.join(f'{t:.4f}' for t in capture_all)}")
        print(f"ratio capture / baseline: {ratio:.2f} (target <= 2.0: "
              f"{'met' if ratio <= 2.0 else 'NOT met'})")

        if args.profile or ratio > 2.0:
            remove_store()
            profiler = cProfile.Profile()
            profiler.enable()
            capture()
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
            print("\nwhere capture_torch's time goes (cProfile, by own time):")
            print(text.getvalue())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
