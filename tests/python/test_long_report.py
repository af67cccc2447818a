"""A long decode's report file (more than 16 runs: its passing groups are rows
of packed blocks, docs/reports.md "A long decode's JSON") on tests/python/emulated_decoder.py's
emulated int16 decode with the rope fault: read back by `qnn_debug.Report(text)`, every run and
group is the diff's, figure by figure (the packed groups without their element lists), and
`qnn-debug check` of the file gives the diff's report and terminal. The blocks read with nothing
but the layout docs/report-schema.json gives (runs[].packed) are the groups qnn_debug reads. A
block damaged anywhere in its data loads as another report or fails with QnnDebugError; it never
crashes.

The emulation: dim 64, 4 layers, a 64-slot KV cache, 24 decode steps (a few seconds).

Run: PYTHONPATH=build/python QD_CLI=build/cli/qnn-debug python3 -m pytest \
     tests/python/test_long_report.py
"""
import base64
import json
import math
import os
import random
import struct
import subprocess
import sys
import zlib

import pytest

qd = pytest.importorskip("qnn_debug", reason="build the package: cmake --build build")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emulated_decoder as emu  # noqa: E402

CLI = os.environ.get("QD_CLI", "qnn-debug")
ELEMENT_LISTS = ("worst", "samples", "error_histogram")


@pytest.fixture(scope="module")
def decode(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("long"))
    settings = emu.Settings(steps=24, fault="rope", fault_layer=2, fault_step=20)
    emu.emulate(out, emu.Config(dim=64, heads=4), settings)
    report = qd.diff(f"{out}/ref.h5", f"{out}/dev.h5", jobs=1)
    with open(f"{out}/report.json", "w") as f:
        f.write(report.text)
    return out, report


def is_kv_cache(name):
    return name.endswith(("k_cache", "v_cache"))


def without_element_lists(group):
    """A group as a packed row keeps it: its pairs' element lists emptied, as the file's rule
    (the channels too, but for a KV cache's)."""
    group = json.loads(json.dumps(group))
    for pair in group["pairs"]:
        m = pair["metrics"]
        if m:
            m["worst"] = []
            m["error_histogram"] = {"edges": [], "counts": []}
            m.pop("samples", None)
            if not is_kv_cache(pair["reference"]["name"]):
                m["channels"] = []
    return group


def test_the_file_packs_and_reads_back_to_the_diffs_figures(decode):
    _, report = decode
    doc = report.json
    assert doc["schema_version"] == 3
    packed = sum(run.get("packed", {}).get("groups", 0) for run in doc["runs"])
    objects = sum(len(run["groups"]) for run in doc["runs"])
    assert packed > 10 * objects / 3, (packed, objects)
    loaded = qd.Report(report.text)
    assert loaded.verdict == report.verdict
    kinds = set()
    for diffed, read, run in zip(report.runs, loaded.runs, doc["runs"]):
        kept = {g["id"] for g in run["groups"]}
        assert [g["id"] for g in read["groups"]] == [g["id"] for g in diffed["groups"]]
        for a, b in zip(diffed["groups"], read["groups"]):
            # JSON numbers as Python floats: equal means the same doubles.
            assert (a if a["id"] in kept else without_element_lists(a)) == b, (run["device_run"], a["id"])
            kinds.add((a["id"] in kept, a["verdict"], bool(a["pairs"][0]["metrics"]["channels"]),
                       a["excess"] is not None))
        assert {k: v for k, v in diffed.items() if k != "groups"} == \
            {k: v for k, v in read.items() if k != "groups"}
    # Packed rows of every kind: per-position KV caches and plain outputs, with an excess.
    assert (False, "pass", True, True) in kinds and (False, "pass", False, True) in kinds, kinds
    assert any(k[0] and k[1] == "fail" for k in kinds), kinds
    for section in ("summary", "steps", "aggregate", "kv_cache"):
        assert getattr(loaded, section) == getattr(report, section), section
    assert any(track["heads"] and track["first_differ"] for track in loaded.kv_cache)
    assert loaded.text == report.text


def test_check_gives_the_diffs_report(decode):
    out, report = decode
    diffed = subprocess.run([CLI, "diff", f"{out}/ref.h5", f"{out}/dev.h5", "--jobs", "1"],
                            capture_output=True, text=True)
    checked = subprocess.run([CLI, "check", f"{out}/report.json", "--json",
                              f"{out}/checked.json"], capture_output=True, text=True)
    assert checked.returncode == diffed.returncode == (1 if report.verdict == "fail" else 0), \
        checked.stderr
    assert checked.stdout == diffed.stdout
    with open(f"{out}/checked.json") as f:
        assert f.read() == report.text


# ---- a reader of the packed blocks written from the schema's description alone

def slots(value, out):
    """Every slot of VALUE in the JSON's order: ("r", real) or ("i", integer)."""
    if isinstance(value, dict):
        for item in value.values():  # the file's order: the writer's, keys sorted
            slots(item, out)
    elif isinstance(value, list):
        for item in value:
            slots(item, out)
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, float) or value in ("inf", "-inf", "nan"):
        out.append(("r", float(value)))
    elif isinstance(value, int) and value < 2 ** 63:
        out.append(("i", value))
    return out


def filled(value, numbers):
    """VALUE with its slots replaced, in order, by NUMBERS (an iterator)."""
    if isinstance(value, dict):
        return {k: filled(v, numbers) for k, v in value.items()}
    if isinstance(value, list):
        return [filled(v, numbers) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) or value in ("inf", "-inf", "nan"):
        x = next(numbers)
        return x if math.isfinite(x) else ("nan" if math.isnan(x) else "inf" if x > 0 else "-inf")
    if isinstance(value, int) and value < 2 ** 63:
        return next(numbers)
    return value


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def real(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def apply(op, a, b):
    """A rule's IEEE 754 double operation (Python raises where IEEE gives inf or NaN)."""
    if op == "copy":
        return a
    if op == "sqrt":
        return math.sqrt(a) if a >= 0 else math.nan
    if op == "subtract":
        return a - b
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1, b)
    return a / b


class Varints:
    def __init__(self, data):
        self.data, self.at = data, 0

    def next(self):
        value = shift = 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value


def block_bytes(block, key):
    """A block's deflated KEY: base85 (RFC 1924) when its "text" says so, base64 in earlier files."""
    text = block[key]
    return base64.b85decode(text) if block.get("text") == "base85" else base64.b64decode(text)


def read_blocks(doc):
    """Every packed group of DOC's runs, as {(run index, position): group JSON}."""
    templates, groups = [], {}  # templates: [JSON, rules, last row as bits / integers]
    for r, run in enumerate(doc["runs"]):
        block = run.get("packed")
        if not block:
            continue
        listed = zlib.decompress(block_bytes(block, "templates"))
        assert len(listed) == block["template_bytes"]
        for entry in json.loads(listed):
            t, rules = entry["group"], entry["rules"]
            row = [bits(v) if kind == "r" else v for kind, v in slots(t, [])]
            templates.append([t, rules, row])
        data = zlib.decompress(block_bytes(block, "data"))
        assert len(data) == block["bytes"]
        cursor, heads, position = Varints(data), [], 0
        for _ in range(block["groups"]):
            position += cursor.next()
            which = cursor.next()
            rules = templates[which][1]
            flags = data[cursor.at:cursor.at + (len(rules) + 7) // 8]
            cursor.at += len(flags)
            given = {rule[0] for k, rule in enumerate(rules) if flags[k // 8] >> (k % 8) & 1}
            heads.append((position, which, given))
            position += 1
        changes = []
        for _, which, _ in heads:
            kinds = [kind for kind, _ in slots(templates[which][0], [])]
            for kind in kinds:
                if kind == "i":
                    z = cursor.next()
                    changes.append((z >> 1) ^ -(z & 1))
        planes = data[cursor.at:]
        n = len(planes) // 8
        xors = [int.from_bytes(bytes(planes[p * n + i] for p in range(8)), "big") for i in range(n)]
        changes, xors = iter(changes), iter(xors)
        for position, which, given in heads:
            t, rules, last = templates[which]
            kinds = [kind for kind, _ in slots(t, [])]
            row = [last[i] + next(changes) if kind == "i" else
                   None if i in given else last[i] ^ next(xors) for i, kind in enumerate(kinds)]
            value = lambda i: float(row[i]) if kinds[i] == "i" else real(row[i])  # noqa: E731
            for slot, op, a, *b in rules:
                if slot in given:
                    row[slot] = bits(apply(op, value(a), value(b[0]) if b else 0.0))
            templates[which][2] = row
            groups[(r, position)] = filled(t, iter(value(i) if kinds[i] == "r" else row[i]
                                                   for i in range(len(row))))
    return groups


def test_the_schemas_layout_reads_the_blocks(decode):
    _, report = decode
    groups = read_blocks(report.json)
    assert len(groups) > 100
    loaded = qd.Report(report.text).runs
    for (r, position), group in groups.items():
        assert group == loaded[r]["groups"][position], (r, position)


def damaged(doc, rng):
    """The text of DOC with one packed block's data changed: a few bits of its inflated columns
    flipped, or the columns cut short, then deflated again (so that the damage reaches the reader
    of the columns, not zlib's check)."""
    runs = list(doc["runs"])
    at = rng.choice([i for i, run in enumerate(runs) if "packed" in run])
    block = dict(runs[at]["packed"])
    data = bytearray(zlib.decompress(block_bytes(block, "data")))
    if rng.random() < 0.2:
        del data[rng.randrange(len(data)):]
    for _ in range(rng.randint(1, 4)):
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    assert block["text"] == "base85"
    block["data"] = base64.b85encode(zlib.compress(bytes(data))).decode()
    block["bytes"] = len(data)
    runs[at] = dict(runs[at], packed=block)
    return json.dumps(dict(doc, runs=runs))


def test_damaged_blocks_load_or_fail_cleanly(decode):
    _, report = decode
    rng = random.Random(7)
    failed = 0
    for _ in range(25):
        try:
            loaded = qd.Report(damaged(report.json, rng))
            loaded.summary  # a report that loads renders
        except qd.QnnDebugError as e:
            failed += 1
            assert "packed" in str(e), str(e)
    assert failed > 0
