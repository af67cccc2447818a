"""Decode steps as runs: a Llama-style decoder on an emulated QNN device, against its reference.

1. The device (emulated_htp.py: 16-bit activations, 8-bit weights, layer 1's attention scores
   in fp16) generates greedily from a 16-token prompt, captured by a capture session: run 0 is
   the prefill, run k decode step k, each with the token the device picked itself.
2. The float reference is captured with teacher forcing: it runs on the device store's graph
   inputs, run by run, so its runs stay aligned with the device's even after the device's
   tokens go wrong.
3. qnn_debug.diff compares them; report.json and report.html are written, and the first
   failing decode step and op are printed.

Run from the repository root, with the Python package built:
    PYTHONPATH=build/python /usr/bin/python3 examples/llama_decoder/run.py --out out/llm
"""
from __future__ import annotations

import argparse
import os
import sys

import qnn_debug

from emulated_htp import calibrate, make_device, write_encodings
from llama import build_model, generate, prompt_tokens


def capture_device(device, prompt, steps: int, path: str):
    """The device's own greedy generation, one store run per call; returns its tokens."""
    device.reset()
    with qnn_debug.capture_session(device, path, naming="module",
                                   model_name="llama-decoder") as session:
        return generate(lambda tokens, name: session(tokens, run_name=name), prompt, steps)


def capture_reference(model, device_path: str, path: str):
    """The float model on exactly the device's inputs, run by run (the run names come with
    them)."""
    model.reset()
    return qnn_debug.capture_torch(model, qnn_debug.teacher_inputs(device_path), path,
                                   naming="module", model_name="llama-decoder")


def first_failure(report):
    """(the first failing run, its first failing group, that group's aggregate entry), or None
    when no run fails."""
    run = next((r for r in report.runs if r["verdict"] == "fail"), None)
    if run is None:
        return None
    group = next((g for g in run["groups"] if g["id"] == run["first_divergence"]), None)
    aggregate = None if group is None else \
        next(a for a in report.json["aggregate"] if a["id"] == group["id"])
    return run, group, aggregate


def describe(finding) -> str:
    if finding is None:
        return "every decode step passes"
    run, group, aggregate = finding
    step = run["device_run"]
    where = "the prefill" if step == 0 else f"decode step {step}"
    if group is None:
        return f"first failing run: {step} ({where}); no group fails, the run's rules do"
    name, flags = group["pairs"][0]["reference"]["name"], ", ".join(group["flags"]) or "none"
    return (f"first failing run: {step} ({where})\n"
            f"first failing op:  {name} (group {group['id']}, {group['op_type']}, "
            f"SQNR {float(group['sqnr_db']):.2f} dB, flags {flags})\n"
            f"that op first fails in device run {aggregate['first_failing_device_run']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder for the stores and reports")
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens (the prefill)")
    parser.add_argument("--steps", type=int, default=64, help="greedy decode steps")
    parser.add_argument("--seed", type=int, default=0, help="weight seed")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    path = {name: os.path.join(args.out, name) for name in
            ("encodings.json", "device.h5", "reference.h5", "report.json", "report.html")}

    model = build_model(args.seed)
    prompt = prompt_tokens(args.prompt)
    write_encodings(model, calibrate(model, prompt, args.steps), path["encodings.json"])
    tokens = capture_device(make_device(model, path["encodings.json"]), prompt, args.steps,
                            path["device.h5"])
    print(f"device: {len(tokens)} tokens after a {args.prompt}-token prompt: {tokens}")
    print(capture_reference(model, path["device.h5"], path["reference.h5"]))

    report = qnn_debug.diff(path["reference.h5"], path["device.h5"])
    report.write_json(path["report.json"])
    report.write_html(path["report.html"])
    print(describe(first_failure(report)))
    print(f"verdict {report.verdict}: {path['report.html']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
