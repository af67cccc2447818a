"""qnn_debug.fix: fixes predicted on the host, searched, and written for the toolchains.

Each case is a model with a known fault of its encodings, on an emulated device
(tests/python/emulated_cnn.py) or a decode loop (tests/python/fix_decoder.py):

- resnet18 whose middle conv+bn+relu clips (`clip`), mobilenet_v2 whose middle op's encoding is
  25x too wide (`wide`): the search must refit that op alone, and bring the output back within
  1 dB of the model with the calibrated encoding;
- the ViT whose rescale op carries a 100x channel under an 8-bit per-tensor encoding: no 8-bit
  grid is enough, the search must give that op 16 bits;
- an int16 decoder (KV caches as inputs) whose layer-1 value projection clips: the search must
  refit it and reach the token target.

The promise is checked against an independent re-simulation: the written overrides are read back
by the field rules of AIMET's encoding format (not by qnn_debug), applied to the device's
encodings, and the emulator's own integer pipeline (numpy, float64) runs with them; every op's
SQNR and the output's must be within 1 dB of the prediction. For the decoder the overrides are
merged into a plain encodings file and simulated by capture_torch with that file.

Run: PYTHONPATH=build/python python3 -m pytest tests/python/test_fix.py
"""
import importlib.util
import json
import math
import os
import sys
import types
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the fix needs PyTorch (python3-torch)")
qnn_debug = pytest.importorskip("qnn_debug", reason="build the package: cmake --build build")
from qnn_debug import fix, simulate  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emulated_cnn  # noqa: E402
import fix_decoder  # noqa: E402
from emulated_encoding import Encoding as GridEncoding  # noqa: E402

SIZE, RUNS = 32, 2
TOLERANCE_DB = 1.0
needs_torchvision = pytest.mark.skipif(importlib.util.find_spec("torchvision") is None,
                                       reason="needs torchvision (python3-torchvision)")


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qnn_debug.CaptureWarning)
        yield


# ---- AIMET's encoding format, read by its own field rules ------------------------------------

INT_FIELDS = {"bitwidth", "dtype", "is_symmetric", "max", "min", "offset", "scale"}


def read_overrides(path):
    """{tensor: GridEncoding, or None for float} from a --quantization_overrides file, checked
    against AIMET's encoding format 0.6.1 (quic.github.io/aimet-pages, "Encoding Format
    Specification"): version, the two maps of lists, an int encoding's fields with
    bitwidth 4..32, is_symmetric the string "True" or "False", an integer offset, and min/max the
    ends of the unsigned grid real = (q + offset) * scale, q in [0, 2^bitwidth - 1]; a float
    encoding is {bitwidth 16 or 32, dtype "float"}."""
    with open(path) as f:
        doc = json.load(f)
    assert doc["version"] == "0.6.1"
    assert set(doc) <= {"version", "activation_encodings", "param_encodings", "quantizer_args"}
    assert isinstance(doc["param_encodings"], dict)
    found = {}
    for name, entries in doc["activation_encodings"].items():
        assert isinstance(entries, list) and len(entries) == 1, name  # per tensor
        entry = entries[0]
        if entry["dtype"] == "float":
            assert set(entry) == {"bitwidth", "dtype"} and entry["bitwidth"] in (16, 32), entry
            found[name] = None
            continue
        assert entry["dtype"] == "int" and set(entry) == INT_FIELDS, entry
        bits, scale, offset = entry["bitwidth"], entry["scale"], entry["offset"]
        assert isinstance(bits, int) and 4 <= bits <= 32
        assert entry["is_symmetric"] in ("True", "False")
        assert isinstance(offset, int) and offset <= 0 and scale > 0
        assert entry["min"] == pytest.approx(offset * scale, rel=1e-12, abs=1e-300)
        assert entry["max"] == pytest.approx(((1 << bits) - 1 + offset) * scale, rel=1e-12)
        found[name] = GridEncoding(scale, offset, bits)
    return found


def sqnr_db(reference, test):
    r = np.asarray(reference, np.float64)
    e = r - np.asarray(test, np.float64)
    noise = float(np.sum(e * e))
    return math.inf if noise == 0 else 10 * math.log10(float(np.sum(r * r)) / noise)


def assert_close_db(predicted, measured, what):
    if math.isinf(measured) or predicted is None:
        assert predicted is not None and math.isinf(predicted) and predicted == measured, what
        return
    assert abs(predicted - measured) <= TOLERANCE_DB, f"{what}: predicted {predicted:.3f} dB, " \
                                                       f"re-simulated {measured:.3f} dB"


# ---- the CNN cases ---------------------------------------------------------------------------

class CnnCase:
    """An emulated device with a fault of its encodings, its files, and the search's result."""

    def __init__(self, out, model_name, fault):
        self.out = out
        settings = {"model": model_name, "bits": 8, "flip": 0.02, "fault": fault, "runs": RUNS,
                    "size": SIZE, "seed": 0, "nhwc": True}
        self.emulation = emulated_cnn.run_emulation(model_name, flip=0.02, fault=fault,
                                                    runs=RUNS, size=SIZE)
        self.truth = emulated_cnn.write_emulation(str(out), self.emulation, settings)
        self.model = emulated_cnn.build_model(model_name, SIZE, 0)
        self.inputs = emulated_cnn.make_inputs(RUNS, SIZE, 0)
        self.encodings = str(out / "encodings.json")
        self.reference = str(out / "ref.h5")

    def clean_encodings(self):
        """The encodings with the faulty op's calibrated encoding back."""
        doc = json.loads((self.out / "encodings.json").read_text())
        doc[self.truth["fault"]["op"]] = self.truth["fault"]["calibrated_encoding"]
        path = self.out / "clean.json"
        path.write_text(json.dumps(doc))
        return str(path)

    def resimulate(self, overrides):
        """The emulator's ideal pipeline with `overrides` applied: codes per run."""
        encodings = dict(self.emulation.encodings)
        encodings.update(overrides)
        plan = self.emulation.plan
        return [run_codes_as_values(plan, encodings, emulated_cnn.run_chained(plan, encodings, x))
                for x in self.inputs]


def run_codes_as_values(plan, encodings, codes):
    return {name: (q if encodings[name] is None else encodings[name].dequantize(q))
            for name, q in codes.items()}


def search_cnn(case, device_report=None, **kwargs):
    clean = fix.predict(case.model, case.inputs, case.clean_encodings(), reference=case.reference)
    target = fix.Target(output_sqnr_db=clean.output_sqnr_db - 1.0)
    return clean, fix.search(case.model, case.inputs, case.encodings, target,
                             reference=case.reference, device_report=device_report, **kwargs)


@pytest.fixture(scope="module", params=[
    pytest.param(("resnet18", "clip"), marks=needs_torchvision, id="resnet18-clip"),
    pytest.param(("mobilenet_v2", "wide"), marks=needs_torchvision, id="mobilenet_v2-wide")])
def cnn(request, tmp_path_factory):
    model_name, fault = request.param
    case = CnnCase(tmp_path_factory.mktemp(f"{model_name}_{fault}"), model_name, fault)
    device = qnn_debug.diff(case.reference, str(case.out / "dev.h5"))
    case.clean, case.search = search_cnn(case, device)
    case.search.write_qnn_overrides(case.out / "overrides.json")
    return case


def test_the_search_refits_the_faulty_op_alone(cnn):
    search, fault = cnn.search, cnn.truth["fault"]
    assert not search.target.met(search.baseline), "the fault must cost more than the target"
    assert search.reached, search.summary()
    assert [(c.kind, c.tensor) for c in search.changes] == [("encode", fault["op"])], \
        search.summary()
    change = search.changes[0]
    assert change.bits == 8  # a refit: no bits added
    # the range is the reference's, which the calibrated encoding also covers
    low, high = emulated_cnn.Encoding(**{k: fault["calibrated_encoding"][k]
                                         for k in ("scale", "offset")}, bits=8).real_range
    assert change.min == pytest.approx(low, abs=2 * fault["calibrated_encoding"]["scale"])
    assert change.max == pytest.approx(high, abs=2 * fault["calibrated_encoding"]["scale"])
    assert search.final.output_sqnr_db >= cnn.clean.output_sqnr_db - 1.0
    steps = [s for s in search.steps if s.action == "add"]
    assert steps and steps[-1].prediction is search.final


def test_the_prediction_holds_in_an_independent_resimulation(cnn):
    overrides = read_overrides(cnn.out / "overrides.json")
    assert set(overrides) == {cnn.truth["fault"]["op"]}
    values = cnn.resimulate(overrides)
    prediction = cnn.search.final
    for name in cnn.truth["device_tensors"]:
        predicted = prediction.tensor_sqnr_db(name)
        for k, run in enumerate(values):
            measured = sqnr_db(cnn.emulation.references[k][name], run[name])
            assert_close_db(predicted[k], measured, f"{name}, run {k}")
    output = cnn.truth["graph_output"]
    worst = min(sqnr_db(cnn.emulation.references[k][output], values[k][output])
                for k in range(RUNS))
    assert_close_db(prediction.output_sqnr_db, worst, "the output, worst run")


def test_a_target_out_of_reach_is_said(cnn):
    search = fix.search(cnn.model, cnn.inputs, cnn.encodings, fix.Target(output_sqnr_db=90.0),
                        reference=cnn.reference, max_tensors=2, max_steps=2)
    assert not search.reached
    assert search.shortfalls and search.shortfalls[0].startswith("output ")
    assert "cannot reach the target" in search.summary()
    assert len([s for s in search.steps if s.action == "add"]) <= 2


def test_the_search_file_holds_every_step(cnn, tmp_path):
    path = tmp_path / "search.json"
    cnn.search.write_json(path)
    doc = json.loads(path.read_text())
    assert doc["reached"] is True and doc["version"] == 1
    assert [s["change"] for s in doc["steps"]] == [s.change.to_json() for s in cnn.search.steps]
    assert [fix.Change.from_json(c) for c in doc["prediction"]["changes"]] == \
        list(cnn.search.changes)
    assert doc["prediction"]["output"]["worst_sqnr_db"] == \
        pytest.approx(cnn.search.final.output_sqnr_db)
    ids = {op["id"] for op in doc["prediction"]["ops"]}
    assert ids == {op["id"] for op in cnn.search.final.ops}
    assert doc["ranked"][0]["gain_db"] >= doc["ranked"][-1]["gain_db"] or \
        doc["ranked"][0]["cost"] < doc["ranked"][-1]["cost"]


# ---- the op that needs 16 bits ---------------------------------------------------------------

@pytest.fixture(scope="module")
def vit(tmp_path_factory):
    case = CnnCase(tmp_path_factory.mktemp("vit"), "vit", "none")
    case.search = fix.search(case.model, case.inputs, case.encodings,
                             fix.Target(output_sqnr_db=30.0), reference=case.reference)
    case.search.write_qnn_overrides(case.out / "overrides.json")
    return case


def test_the_massive_activation_needs_16_bits(vit):
    search, op = vit.search, vit.truth["massive_activation"]["op"]
    assert not search.target.met(search.baseline)
    assert search.reached, search.summary()
    assert [(c.tensor, c.bits) for c in search.changes] == [(op, 16)], search.summary()
    # no 8-bit grid over the same range gets there: the channel, not the range, is the problem
    low, high = vit.search.changes[0].min, vit.search.changes[0].max
    eight = fix.predict(vit.model, vit.inputs, vit.encodings,
                        [fix.Change.encode(op, low, high, 8)], reference=vit.reference)
    assert not search.target.met(eight)


def test_the_16_bit_prediction_holds_in_an_independent_resimulation(vit):
    overrides = read_overrides(vit.out / "overrides.json")
    op = vit.truth["massive_activation"]["op"]
    assert overrides[op].bits == 16
    values = vit.resimulate(overrides)
    for name in (op, vit.truth["graph_output"]):
        predicted = vit.search.final.tensor_sqnr_db(name)
        for k in range(RUNS):
            measured = sqnr_db(vit.emulation.references[k][name], values[k][name])
            assert_close_db(predicted[k], measured, f"{name}, run {k}")


# ---- the decoder -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    out = tmp_path_factory.mktemp("decoder")
    model = fix_decoder.Decoder().eval()
    runs = fix_decoder.decode_inputs(model, steps=6)
    reference = str(out / "ref.h5")
    qnn_debug.capture_torch(model, runs, reference)
    calibrated = fix_decoder.calibrate(qnn_debug.Store(reference), bits=16)
    encodings = out / "encodings.json"
    fix_decoder.write_json(encodings, fix_decoder.clipped(calibrated, "layers_1_v"))
    target = fix.Target(output_sqnr_db=40.0, top1=1.0, kl_divergence=1e-4)
    search = fix.search(model, runs, str(encodings), target, reference=reference,
                        logits="head")
    search.write_qnn_overrides(out / "overrides.json")
    return types.SimpleNamespace(out=out, model=model, runs=runs, reference=reference,
                                 encodings=encodings, search=search)


def test_the_decoder_search_refits_the_clipping_projection(decoder):
    search = decoder.search
    assert not search.target.met(search.baseline), search.summary()
    assert search.reached, search.summary()
    assert [c.tensor for c in search.changes] == ["layers_1_v"]
    assert all(step["tokens"]["tensor"] == "head" for step in search.final.runs)
    assert search.final.kl_divergence <= 1e-4 and search.final.top1 == 1.0


def test_the_decoder_prediction_holds_with_the_overrides_file(decoder):
    """The overrides, read by AIMET's rules, replace the device's entries in a plain map that
    capture_torch simulates: the same figures per op, per run and at the logits."""
    doc = json.loads(decoder.encodings.read_text())
    for name, grid in read_overrides(decoder.out / "overrides.json").items():
        if grid is None:
            del doc[name]
        else:
            doc[name] = {"scale": grid.scale, "offset": grid.offset,
                         "dtype": f"UFIXED_POINT_{grid.bits}"}
    merged = decoder.out / "merged.json"
    fix_decoder.write_json(merged, doc)
    sim = str(decoder.out / "sim.h5")
    qnn_debug.capture_torch(decoder.model, decoder.runs, sim, encodings=str(merged))
    measured = qnn_debug.diff(decoder.reference, sim, logits="head")
    predicted = decoder.search.final
    for step, expected in zip(measured.steps, predicted.runs):
        assert_close_db(expected["output_sqnr_db"], step["output_sqnr_db"], "logits")
        assert step["tokens"]["top1_agreement"] == expected["tokens"]["top1_agreement"]
    for name in ("layers_1_v", "softmax_1", "head"):
        for p, m in zip(predicted.tensor_sqnr_db(name),
                        fix.Prediction((), measured).tensor_sqnr_db(name)):
            assert_close_db(p, m, name)


# ---- changes and writers, unit by unit -------------------------------------------------------

@pytest.fixture
def table(tmp_path):
    path = tmp_path / "enc.json"
    path.write_text(json.dumps({
        "a": {"scale": 0.1, "offset": -128, "dtype": "UFIXED_POINT_8"},
        "s": {"scale": 0.01, "offset": 0, "dtype": "SFIXED_POINT_8"},
        "w": {"axis": 0, "scales": [0.1, 0.2], "offsets": [0, 0], "dtype": "SFIXED_POINT_8"}}))
    return {**simulate.load_encodings(str(path)), "f": None}  # f: a float tensor


def test_widen_keeps_the_range_in_more_bits(table):
    changed = fix.apply_changes(table, [fix.Change.widen("a"), fix.Change.widen("s"),
                                        fix.Change.widen("w")])
    for name in ("a", "s", "w"):
        old, new = table[name], changed[name]
        assert (new.qmax - new.qmin) == 65535 and new.axis == old.axis
        for (lo, hi), s, o in zip([((old.qmin + o) * s, (old.qmax + o) * s)
                                   for s, o in zip(old.scales, old.offsets)],
                                  new.scales, new.offsets):
            assert (new.qmin + o) * s == pytest.approx(lo, abs=s)
            assert (new.qmax + o) * s == pytest.approx(hi, abs=s)
    assert changed["s"].dtype == "SFIXED_POINT_16" and changed["a"].dtype == "UFIXED_POINT_16"
    assert table["a"].qmax == 255  # the original table is left alone


def test_encode_and_float(table):
    changed = fix.apply_changes(table, [fix.Change.encode("a", -1.0, 3.0),
                                        fix.Change.keep_float("s")])
    a = changed["a"]
    assert (a.qmin, a.qmax) == (0, 255) and a.scales[0] == pytest.approx(4.0 / 255)
    assert (a.qmin + a.offsets[0]) * a.scales[0] == pytest.approx(-1.0, abs=a.scales[0])
    assert changed["s"] is None
    positive = fix.apply_changes(table, [fix.Change.encode("a", 1.0, 3.0)])["a"]
    assert positive.offsets[0] == 0  # the grid holds 0.0


@pytest.mark.parametrize("changes, message", [
    ([fix.Change.widen("nope")], "is not in the encodings"),
    ([fix.Change.widen("f")], "has no encoding"),
    ([fix.Change.widen("a"), fix.Change.keep_float("a")], "changed twice")])
def test_bad_changes_are_named(table, changes, message):
    with pytest.raises(ValueError, match=message):
        fix.apply_changes(table, changes)


@pytest.mark.parametrize("make, message", [
    (lambda: fix.Change("round", "a"), "not one of encode, widen, float"),
    (lambda: fix.Change.encode("a", 2.0, 1.0), "finite min <= max"),
    (lambda: fix.Change.encode("a", float("nan"), 1.0), "finite min <= max"),
    (lambda: fix.Change.widen("a", 40), "outside 0..32"),
    (lambda: fix.Target(), "give output_sqnr_db")])
def test_bad_arguments_are_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_the_overrides_follow_aimet_for_signed_and_float(table, tmp_path):
    path = tmp_path / "o.json"
    fix.write_qnn_overrides(path, [fix.Change.widen("s"), fix.Change.keep_float("a")], table)
    read = read_overrides(path)
    assert read["a"] is None
    s = fix.apply_changes(table, [fix.Change.widen("s")])["s"]
    # the signed grid's ends, as the unsigned grid AIMET writes
    assert read["s"].bits == 16 and read["s"].scale == s.scales[0]
    assert read["s"].real_range[0] == pytest.approx((s.qmin + s.offsets[0]) * s.scales[0])


class StandInQuantizer:
    """ExecuTorch's QnnQuantizer as far as the settings touch it, with the semantics its source
    gives (backends/qualcomm/quantizer/quantizer.py): add_discard_nodes replaces the set,
    set_submodule_qconfig_list the list, and a node takes the first matching config. ExecuTorch
    itself cannot be installed here (Debian's and npm's registries only)."""

    def __init__(self, module):
        self.module = module
        self.default_quant_config = module.ModuleQConfig(quant_dtype=module.QuantDtype.use_8a8w)
        self.discard_nodes = {"kept"}
        self.submodule_qconfig_list = [(lambda node: node.name == "other", "earlier")]

    def add_discard_nodes(self, nodes):
        self.discard_nodes = set(nodes)

    def set_submodule_qconfig_list(self, configs):
        self.submodule_qconfig_list = configs

    def config_of(self, node):
        return next((c for f, c in self.submodule_qconfig_list if f(node)),
                    self.default_quant_config)


def stand_in_executorch(monkeypatch):
    module = types.ModuleType("executorch.backends.qualcomm.quantizer.quantizer")

    class QuantDtype:
        use_16a8w, use_8a8w = 1, 4

    class ModuleQConfig:
        def __init__(self, quant_dtype=QuantDtype.use_8a8w, is_qat=False,
                     is_conv_per_channel=False, is_linear_per_channel=False, act_observer=None):
            self.quant_dtype, self.is_qat = quant_dtype, is_qat
            self.is_conv_per_channel = is_conv_per_channel
            self.is_linear_per_channel = is_linear_per_channel
            self.act_observer = act_observer

    module.QuantDtype, module.ModuleQConfig = QuantDtype, ModuleQConfig
    parts = module.__name__.split(".")
    for i in range(1, len(parts)):
        monkeypatch.setitem(sys.modules, ".".join(parts[:i]), types.ModuleType(parts[i - 1]))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_the_executorch_settings_name_the_reference_nodes(vit, tmp_path, monkeypatch):
    search, op = vit.search, vit.truth["massive_activation"]["op"]
    changes = list(search.changes) + [fix.Change.keep_float("fc1" if "fc1" in search.table
                                                            else vit.truth["graph_output"])]
    path = tmp_path / "qnn_debug_settings.py"
    fix.write_executorch_settings(path, changes, search.node_names)
    settings = {}
    exec(compile(path.read_text(), str(path), "exec"), settings)
    assert settings["SIXTEEN_BIT_NODES"] == [op]
    assert settings["FLOAT_NODES"] == [changes[-1].tensor]
    assert list(settings["RANGES"]) == [op]
    stored = {t.name for t in qnn_debug.Store(vit.reference).runs[0].tensors}
    assert set(settings["SIXTEEN_BIT_NODES"] + settings["FLOAT_NODES"]) <= stored
    module = stand_in_executorch(monkeypatch)
    quantizer = StandInQuantizer(module)
    settings["apply"](quantizer)
    assert quantizer.discard_nodes == {"kept", changes[-1].tensor}
    node = types.SimpleNamespace
    assert quantizer.config_of(node(name=op)).quant_dtype == module.QuantDtype.use_16a8w
    assert quantizer.config_of(node(name="other")) == "earlier"
    assert quantizer.config_of(node(name="elsewhere")) is quantizer.default_quant_config
