"""qnn_debug.capture_session (one store open across forwards) and qnn_debug.teacher_inputs (a
store's graph inputs as capture_torch's inputs).

The expected values come from plain runs of the same models, outside qnn_debug: forward hooks
that copy every leaf module's output when it is computed, on a fresh model state.

Run: PYTHONPATH=build/python python3 -m pytest tests/python/test_capture_session.py
"""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="capture sessions need PyTorch (python3-torch)")
from torch import nn  # noqa: E402

qnn_debug = pytest.importorskip("qnn_debug", reason="build the package: cmake --build build")


# ---- models: a KV cache as module state, and one passed in and out ------------------------

class Cache(nn.Module):
    """Keeps every key and value it was given; returns all of them."""

    def __init__(self):
        super().__init__()
        self.reset()

    def reset(self):
        self.keys = self.values = None

    def forward(self, k, v):
        self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=1)
        self.values = v if self.values is None else torch.cat([self.values, v], dim=1)
        return self.keys, self.values


class StatefulLM(nn.Module):
    """Embedding, one attention over a cache kept in the module, an LM head. Attention scores
    and the softmax are functional (not stored), as in many real models."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)
        self.v = nn.Linear(8, 8)
        self.cache = Cache()
        self.head = nn.Linear(8, 16)

    def forward(self, tokens):
        x = self.embed(tokens)
        keys, values = self.cache(self.k(x), self.v(x))
        probs = torch.softmax(self.q(x) @ keys.transpose(1, 2), dim=-1)
        return self.head(probs @ values)

    def reset(self):
        self.cache.reset()


class PassedCacheLM(StatefulLM):
    """The same, with the cache passed in and returned: forward(tokens, keys, values) ->
    (logits, keys, values); no keys on the first call."""

    def forward(self, tokens, keys=None, values=None):
        x = self.embed(tokens)
        k, v = self.k(x), self.v(x)
        keys = k if keys is None else torch.cat([keys, k], dim=1)
        values = v if values is None else torch.cat([values, v], dim=1)
        probs = torch.softmax(self.q(x) @ keys.transpose(1, 2), dim=-1)
        return self.head(probs @ values), keys, values


def stateful_lm():
    torch.manual_seed(0)
    return StatefulLM().eval()


def passed_cache_lm():
    torch.manual_seed(0)
    return PassedCacheLM().eval()


PROMPT = torch.tensor([[3, 1, 4, 1, 5]])


def greedy(call, steps):
    """call(tokens, cache) -> (logits, cache): the prompt, then `steps` greedy tokens. Returns
    the tokens given at each call."""
    given = [PROMPT]
    logits, cache = call(PROMPT, ())
    for _ in range(steps):
        given.append(logits[:, -1:].argmax(-1))
        logits, cache = call(given[-1], cache)
    return given


def plain_outputs(model, calls):
    """Runs `model(*args)` for each args of `calls` in order with forward hooks on its leaf
    modules: [({module name: copy of its output}, copy of the model's output)] per call."""
    seen = {}
    handles = [m.register_forward_hook(
        lambda mod, inp, out, name=name: seen.__setitem__(name, copied(out)))
        for name, m in model.named_modules() if name and next(m.children(), None) is None]
    runs = []
    try:
        with torch.no_grad():
            for args in calls:
                seen = {}
                output = copied(model(*args))
                runs.append((seen, output))
    finally:
        for h in handles:
            h.remove()
    return runs


def copied(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone().numpy()
    return tuple(copied(v) for v in value)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def stored_leaves(run, name, value):
    """The stored tensors of a module output `value`: `name`, or `name@k` for a tuple."""
    if isinstance(value, tuple):
        return [(run.tensor(f"{name}@{k}"), v) for k, v in enumerate(value)]
    return [(run.tensor(name), value)]


# ---- 1. a session: one run per call ---------------------------------------------------------

def test_stateful_cache_every_call_is_a_run_bit_for_bit(tmp_path):
    model = stateful_lm()
    path = tmp_path / "s.h5"
    returned = []

    def call(tokens, cache):
        logits = session(tokens, run_name=f"step {len(returned)}")
        returned.append(logits.clone())
        return logits, cache

    model.reset()
    with qnn_debug.capture_session(model, path, naming="module") as session:
        given = greedy(call, steps=3)
        assert all(not m._forward_hooks for m in model.modules())  # none between runs
    summary = session.summary
    assert summary.run_names == ("step 0", "step 1", "step 2", "step 3") and summary.runs == 4
    assert summary.path == str(path) and summary.naming == "module"

    model.reset()
    expected = plain_outputs(model, [(t,) for t in given])
    store = qnn_debug.Store(path)
    assert [r.name for r in store.runs] == list(summary.run_names)
    assert summary.tensors == len(store.tensors)
    for run, tokens, logits, (modules, output) in zip(store.runs, given, returned, expected):
        assert same_bits(run.tensor("input_0").numpy(), tokens.numpy())
        assert same_bits(logits.numpy(), output)  # the session returns the model's output
        assert same_bits(run.tensor("output_0").numpy(), output)
        assert set(modules) == {"embed", "q", "k", "v", "cache", "head"}
        for name, value in modules.items():
            for tensor, want in stored_leaves(run, name, value):
                assert same_bits(tensor.numpy(), want), (run.name, tensor.name)
    # The cache grew by one token a call, and each run stored what it held then.
    assert [store.runs[k].tensor("cache@0").dims[1] for k in range(4)] == [5, 6, 7, 8]
    # Handles count the module calls of each run from 1: the same in every run.
    assert {tuple(t.handles) for r in store.runs for t in r.tensors if t.name == "head"} == {(6,)}
    assert [n["name"] for n in store.graph] == ["embed", "k", "v", "cache", "q", "head"]


def test_cache_passed_in_and_out(tmp_path):
    model = passed_cache_lm()
    path = tmp_path / "s.h5"

    def call(tokens, cache):
        logits, *cache = session(tokens, *cache)
        return logits, cache

    with pytest.warns(qnn_debug.CaptureWarning, match="never ran .*: cache$"):  # inherited
        with qnn_debug.capture_session(model, path, naming="module") as session:
            given = greedy(call, steps=2)
    assert session.summary.run_names == ("run0", "run1", "run2")  # the default names

    calls, cache = [], ()
    for tokens in given:
        calls.append((tokens, *cache))
        with torch.no_grad():
            cache = model(*calls[-1])[1:]
    expected = plain_outputs(model, calls)
    store = qnn_debug.Store(path)
    for k, (run, args, (modules, output)) in enumerate(zip(store.runs, calls, expected)):
        # The first call has only the tokens; later ones the cache too, as input_1, input_2.
        assert [t.name for t in run.tensors if t.role == "graph_input"] == \
            ["input_0"] if k == 0 else ["input_0", "input_1", "input_2"]
        for i, arg in enumerate(args):
            assert same_bits(run.tensor(f"input_{i}").numpy(), arg.numpy())
        for i, value in enumerate(output):
            assert same_bits(run.tensor(f"output_{i}").numpy(), value)
        for name, value in modules.items():
            assert same_bits(run.tensor(name).numpy(), value)
    assert store.runs[2].tensor("output_1").dims == [1, 7, 8]


def test_fx_session_equals_capture_torch(tmp_path):
    """The same inputs, through a session and through capture_torch: the same store."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()
    xs = [torch.randn(2, 4), torch.randn(5, 4)]  # the shape may change between calls
    with qnn_debug.capture_session(model, tmp_path / "s.h5") as session:
        outputs = [session(x, run_name=name) for x, name in zip(xs, ["a", "b"])]
    reference = qnn_debug.capture_torch(model, xs, tmp_path / "c.h5", run_names=["a", "b"])
    assert (session.summary.tensors, session.summary.nodes) == \
        (reference.tensors, reference.nodes) == (8, 3)
    with torch.no_grad():
        assert all(same_bits(o.numpy(), model(x).numpy()) for o, x in zip(outputs, xs))
    s, c = qnn_debug.Store(tmp_path / "s.h5"), qnn_debug.Store(tmp_path / "c.h5")
    assert s.graph == c.graph
    for a, b in zip(s.tensors, c.tensors):
        assert (a.run, a.name, a.handles, a.role, a.output_index) == \
            (b.run, b.name, b.handles, b.role, b.output_index)
        assert same_bits(a.numpy(), b.numpy())


def test_fx_session_with_encodings_quantizes_as_capture_torch(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU()).eval()
    path = tmp_path / "enc.json"
    path.write_text('{"_0": {"scale": 0.01, "offset": -128, "dtype": "UFIXED_POINT_8"}}')
    xs = [torch.randn(2, 4), torch.randn(3, 4)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with qnn_debug.capture_session(model, tmp_path / "s.h5", encodings=path) as session:
            for x in xs:
                session(x)
    assert [str(w.message) for w in caught] == [
        "capture_session: 2 stored tensor(s) have no encoding and stay float: input_1, _1"]
    assert caught[0].filename == __file__  # at the first call of the session
    assert session.summary.not_quantized == ("input_1", "_1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qnn_debug.CaptureWarning)
        qnn_debug.capture_torch(model, xs, tmp_path / "c.h5", encodings=path)
    s, c = qnn_debug.Store(tmp_path / "s.h5"), qnn_debug.Store(tmp_path / "c.h5")
    assert [(t.name, t.dtype) for t in s.tensors] == [(t.name, t.dtype) for t in c.tensors]
    assert s.tensor("_0", run=1).dtype == "UFIXED_POINT_8"
    assert all(same_bits(a.numpy(), b.numpy()) for a, b in zip(s.tensors, c.tensors))


# ---- 2. nothing half-written ----------------------------------------------------------------

class Boom(Exception):
    pass


def test_an_exception_in_the_block_leaves_nothing(tmp_path):
    model = stateful_lm()
    with pytest.raises(Boom):
        with qnn_debug.capture_session(model, tmp_path / "s.h5", naming="module") as session:
            session(PROMPT)
            raise Boom("the caller's own error, between runs")
    assert list(tmp_path.iterdir()) == []
    assert "abandoned" in repr(session) and session.summary is None


def test_a_failing_call_abandons_the_store(tmp_path):
    model = stateful_lm()
    model.reset()
    with pytest.raises(RuntimeError) as exited:
        with qnn_debug.capture_session(model, tmp_path / "s.h5", naming="module") as session:
            session(PROMPT)
            with pytest.raises(IndexError):  # token 99 is outside the 16-token vocabulary
                session(torch.tensor([[99]]), run_name="bad step")
            assert all(not m._forward_hooks for m in model.modules())
            with pytest.raises(RuntimeError, match="abandoned when run 'bad step' failed"):
                session(PROMPT)
    # Leaving the block normally after a swallowed failure says the store was not written.
    assert str(exited.value) == (
        f"capture_session: nothing is written at {tmp_path / 's.h5'}: the session was abandoned "
        "when run 'bad step' failed (IndexError)")
    assert list(tmp_path.iterdir()) == []


class Branches(nn.Module):
    def forward(self, x):  # a branch on a tensor value: fx cannot trace it
        return x if x.sum() > 0 else -x


def test_session_misuse(tmp_path):
    model = stateful_lm()
    path = tmp_path / "s.h5"
    with pytest.raises(ValueError, match="no run was captured"):
        with qnn_debug.capture_session(model, path, naming="module"):
            pass
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="naming"):
        qnn_debug.capture_session(model, path, naming="debug-id")
    with pytest.raises(ValueError, match="encodings needs naming=\"fx\""):
        qnn_debug.capture_session(model, path, naming="module", encodings="enc.json")
    with pytest.raises(TypeError, match="path"):
        qnn_debug.capture_session(model, 3, naming="module")
    with pytest.raises(qnn_debug.TorchTraceError,
                       match=r"capture it with capture_session\(\.\.\., naming=\"module\"\)"):
        qnn_debug.capture_session(Branches(), path)
    assert list(tmp_path.iterdir()) == []

    model.reset()
    session = qnn_debug.capture_session(model, path, naming="module")
    with pytest.raises(TypeError, match="run_name must be a string"):
        session(PROMPT, run_name=3)
    session(PROMPT)
    summary = session.close()
    assert session.close() is summary and path.exists()
    with pytest.raises(RuntimeError, match="already written"):
        session(PROMPT)


def test_a_module_never_run_in_any_call_is_named_at_the_exit(tmp_path):
    model = passed_cache_lm()  # its `cache` submodule is never called
    with pytest.warns(qnn_debug.CaptureWarning) as caught:
        with qnn_debug.capture_session(model, tmp_path / "s.h5", naming="module") as session:
            session(PROMPT)
    assert [str(w.message) for w in caught] == [
        "capture_session: 1 module(s) of PassedCacheLM never ran as a module in any run, so no "
        "tensor of theirs is stored: cache"]
    assert caught[0].filename == __file__
    assert session.summary.modules_not_run == ("cache",)


# ---- 3. teacher forcing ---------------------------------------------------------------------

def noisy_device(model):
    """A "device" copy of `model` whose value projection is off by 10 %."""
    device = stateful_lm()
    device.load_state_dict(model.state_dict())
    with torch.no_grad():
        device.v.weight.mul_(1.1)
    return device


def test_teacher_forcing_feeds_the_device_inputs_run_by_run(tmp_path):
    model = stateful_lm()
    device = noisy_device(model)
    device.reset()

    def call(tokens, cache):  # the prompt's run named, the others by default
        return session(tokens, run_name="prompt" if cache == () else None), "cached"

    with qnn_debug.capture_session(device, tmp_path / "device.h5", naming="module") as session:
        given = greedy(call, steps=4)
    inputs = qnn_debug.teacher_inputs(tmp_path / "device.h5")
    assert isinstance(inputs, list) and len(inputs) == 5
    assert inputs.run_names == ("prompt", "run1", "run2", "run3", "run4")
    assert inputs.path == str(tmp_path / "device.h5")
    for args, tokens in zip(inputs, given):
        assert len(args) == 1 and args[0].dtype == torch.int64 and torch.equal(args[0], tokens)

    model.reset()
    summary = qnn_debug.capture_torch(model, inputs, tmp_path / "reference.h5", naming="module")
    assert summary.run_names == inputs.run_names  # the device's run names by default
    model.reset()
    expected = plain_outputs(model, [(t,) for t in given])
    ref = qnn_debug.Store(tmp_path / "reference.h5")
    for run, tokens, (modules, output) in zip(ref.runs, given, expected):
        assert same_bits(run.tensor("input_0").numpy(), tokens.numpy())
        assert same_bits(run.tensor("output_0").numpy(), output)
        assert same_bits(run.tensor("head").numpy(), modules["head"])
    report = qnn_debug.diff(tmp_path / "reference.h5", tmp_path / "device.h5")
    assert [r["device_run"] for r in report.runs] == [0, 1, 2, 3, 4]
    inputs_group = [g for g in report.groups if g["pairs"][0]["reference"]["name"] == "input_0"]
    assert inputs_group[0]["sqnr_db"] == "inf"


def write_store(path, runs):
    """runs: [(run name, [(tensor name, array, write keywords)])]."""
    with qnn_debug.StoreWriter(path) as w:
        for name, tensors in runs:
            w.begin_run(name)
            for tensor, array, keywords in tensors:
                w.write(tensor, array, **keywords)
            w.end_run()


def test_teacher_inputs_values_order_and_names(tmp_path):
    path = tmp_path / "dev.h5"
    codes = np.array([[0, 10, 20]], np.uint8)
    nhwc = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    write_store(path, [("r0", [
        ("image", nhwc, {"role": "graph_input", "axis_order": [0, 3, 1, 2]}),
        ("conv", np.zeros(3, np.float32), {"role": "intermediate"}),
        ("scale", codes, {"role": "graph_input", "dtype": "UFIXED_POINT_8", "scale": 0.5,
                          "offset": -10}),
    ])])
    (image, scale), = qnn_debug.teacher_inputs(path)  # capture order; reference layout
    assert torch.equal(image, torch.from_numpy(nhwc.transpose(0, 3, 1, 2)))
    assert scale.dtype == torch.float32 and scale.tolist() == [[-5.0, 0.0, 5.0]]  # dequantized
    (first, second), = qnn_debug.teacher_inputs(qnn_debug.Store(path), names=["scale", "conv"])
    assert first.tolist() == [[-5.0, 0.0, 5.0]] and second.tolist() == [0.0, 0.0, 0.0]


def test_a_run_without_graph_inputs_is_named(tmp_path):
    path = tmp_path / "dev.h5"
    write_store(path, [("prefill", [("tokens", np.array([[1, 2]]), {"role": "graph_input"})]),
                       ("step 1", [("logits", np.zeros(4, np.float32), {"role": "graph_output"})])])
    with pytest.raises(ValueError) as error:
        qnn_debug.teacher_inputs(path)
    assert str(error.value) == (
        f"teacher_inputs: run 1 ('step 1') of {path} has no graph_input tensor, so there is "
        "nothing to feed the model; name the tensors to use with names=[...]")
    with pytest.raises(ValueError) as error:
        qnn_debug.teacher_inputs(path, names=["tokens"])
    assert str(error.value) == f"teacher_inputs: run 1 ('step 1') of {path} has no tensor tokens"
    with pytest.raises(TypeError, match="names must be a list"):
        qnn_debug.teacher_inputs(path, names="tokens")
    write_store(tmp_path / "empty.h5", [])
    with pytest.raises(ValueError, match="empty.h5 has no run"):
        qnn_debug.teacher_inputs(tmp_path / "empty.h5")
