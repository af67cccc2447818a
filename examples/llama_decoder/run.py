"""Decode steps as runs: a Llama-style decoder on an emulated QNN device, against its reference.

1. The device (emulated_htp.py: 16-bit activations, 8-bit weights, layer 1's attention scores
   in fp16) generates greedily from a 16-token prompt, captured by a capture session: run 0 is
   the prefill, run k decode step k, each with the token the device picked itself.
2. The float reference is captured with teacher forcing: it runs on the device store's graph
   inputs, run by run, so its runs stay aligned with the device's even after the device's
   tokens go wrong.
3. qnn_debug.diff compares them; report.json and report.html are written, and the first
   failing decode step and op are printed, then the token view: the first step whose next token
   differs (with the reference's own margin between the two tokens: a near tie or not, and the
   op that departed before it), and the steps where the logits' KL divergence jumps.

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


def describe_tokens(report) -> str:
    """The token view (docs/metrics.md, "Token view"): the first diverging token, and the KL
    divergence of the device's next-token distribution from the reference's before and after
    the first failing step."""
    token = report.summary.get("first_diverging_token")
    lines = []
    if token is None:
        lines.append("first diverging token: none (the device picks the reference's token at every step)")
    else:
        margin = token["reference_margin"]
        departure = token["first_departure"]
        lines.append(
            f"first diverging token: step {token['device_run']}: {token['device_token']} where the "
            f"reference has {token['reference_token']} (the reference's margin "
            f"{float(margin):.3g} nats{', a near tie' if margin is not None and float(margin) < 0.05 else ''}; "
            + (f"op departing before it: {departure['name']} in run {departure['device_run']})"
               if departure else "no op departs before it)"))
    kl = [(s["device_run"], float(s["tokens"]["kl_divergence"])) for s in report.steps
          if s["tokens"] and s["tokens"]["kl_divergence"] is not None]
    failing = next((s["device_run"] for s in report.steps if s["verdict"] == "fail"), None)
    if kl and failing is not None:
        before = max(v for run, v in kl if run < failing) if failing > 0 else float("nan")
        after = max(v for run, v in kl if run >= failing)
        lines.append(f"logits' KL divergence: at most {before:.3g} nats before step {failing}, "
                     f"up to {after:.3g} from it")
    return "\n".join(lines)


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
    print(describe_tokens(report))
    print(f"verdict {report.verdict}: {path['report.html']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
