"""`gpuscope import logs/` brings a TensorBoard log directory in (issue 39): event files written here
by the format's own rules, in the layout torch.utils.tensorboard writes them (TFRecord records with
masked CRC32C, the first record a file_version "brain.Event:2" event, then one Summary event per
add_scalar with its simple_value; add_hparams' session_start_info; an image), with TF2's scalars
too (a 0-d DT_FLOAT tensor of the scalars plugin, float_val or tensor_content, and a DT_DOUBLE
one), two runs in folders below the root, one of them of two files; each is imported with its name,
hparams as params, metrics by step and time, start and end, and where it came from; a second import
adds nothing; a file cut in the middle of a record, or a record whose data has a byte changed, is
one line naming the file and the record's byte offset, and nothing is written (not even a store
file). The protobuf is encoded by hand (stdlib only), as the crc32c."""
import shutil
import struct

from gstest import *

CLIENT = os.path.join(SRC, "clients", "python")
START = 1796000000.25  # Unix seconds, the first event's wall time


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _crc32c_table()


def masked_crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    """One TFRecord: length, its masked CRC, the data, its masked CRC."""
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked_crc32c(n)) + data + struct.pack("<I", masked_crc32c(data))


# ---- protobuf's wire format, the fields of TensorBoard's event.proto and summary.proto used here ----
varint = pb_varint  # gstest's


def key(field, wire):
    return varint(field << 3 | wire)


def f_varint(field, n):
    return key(field, 0) + varint(n)


def f_double(field, x):
    return key(field, 1) + struct.pack("<d", x)


def f_float(field, x):
    return key(field, 5) + struct.pack("<f", x)


def f_bytes(field, b):
    b = b.encode() if isinstance(b, str) else b
    return key(field, 2) + varint(len(b)) + b


def event(wall, step=0, file_version=None, summary=None):
    """tensorboard.Event: wall_time 1, step 2, file_version 3, summary 5."""
    out = f_double(1, wall) + (f_varint(2, step) if step else b"")
    if file_version is not None:
        out += f_bytes(3, file_version)
    if summary is not None:
        out += f_bytes(5, b"".join(f_bytes(1, v) for v in summary))  # Summary.value 1
    return out


def metadata(plugin, content=b""):
    """SummaryMetadata.plugin_data 1: PluginData plugin_name 1, content 2."""
    return f_bytes(9, f_bytes(1, f_bytes(1, plugin) + (f_bytes(2, content) if content else b"")))


def simple_value(tag, x):
    """Summary.Value: tag 1, simple_value 2 (torch's add_scalar)."""
    return f_bytes(1, tag) + f_float(2, x)


def tensor_value(tag, x, how, first=True):
    """TF2's tf.summary.scalar: tag 1, metadata 9 (the scalars plugin, on a tag's first value),
    tensor 8: TensorProto dtype 1, tensor_shape 2 (no dims: 0-d), float_val 5 / double_val 6 packed,
    or tensor_content 4."""
    if how == "float_val":
        t = f_varint(1, 1) + f_bytes(2, b"") + f_bytes(5, struct.pack("<f", x))
    elif how == "float_content":
        t = f_varint(1, 1) + f_bytes(2, b"") + f_bytes(4, struct.pack("<f", x))
    else:
        t = f_varint(1, 2) + f_bytes(2, b"") + f_bytes(6, struct.pack("<d", x))
    return f_bytes(1, tag) + (metadata("scalars") if first else b"") + f_bytes(8, t)


def hparams_values(hp):
    """torch's add_hparams: _hparams_/experiment (passed over) and _hparams_/session_start_info,
    whose plugin content is HParamsPluginData version 1, session_start_info 3: SessionStartInfo
    hparams 1 (map<string, google.protobuf.Value>: number_value 2, string_value 3, bool_value 4)."""
    entries = b""
    for k, v in hp.items():
        if isinstance(v, bool):
            val = f_varint(4, int(v))
        elif isinstance(v, str):
            val = f_bytes(3, v)
        else:
            val = f_double(2, v)
        entries += f_bytes(1, f_bytes(1, k) + f_bytes(2, val))
    ssi = f_bytes(3, entries + f_double(5, START))
    exp = f_bytes(2, f_bytes(6, f_bytes(1, f_bytes(1, "lr"))))  # an Experiment: not read
    return [f_bytes(1, "_hparams_/experiment") + metadata("hparams", exp),
            f_bytes(1, "_hparams_/session_start_info") + metadata("hparams", ssi)]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


# run -> event files -> (wall, step, [values]); and what each metric must read back as
RUNS = {
    "resnet-a": [[(START + 1.0, 0, [simple_value("loss", 0.5), simple_value("train/acc", 0.6)]),
                  (START + 2.0, 1, [simple_value("loss", 0.25), simple_value("train/acc", 0.7)]),
                  (START + 3.5, 2, [simple_value("loss", 0.125)]),
                  (START + 4.0, 2, hparams_values({"lr": 0.01, "optimizer": "adam", "bn": True}))]],
    "sweep/b": [[(START + 10.0, 0, [simple_value("loss", 0.9), tensor_value("eval/acc", 0.3, "float_val")]),
                 (START + 10.0, 1, [simple_value("loss", 0.8),
                                    f_bytes(1, "sample") + f_bytes(4, f_varint(1, 2) + f_bytes(4, b"PNG"))])],
                [(START + 20.0, 2, [tensor_value("eval/acc", 0.45, "float_content", first=False)]),
                 (START + 21.5, 3, [tensor_value("eval/ppl", 12.5, "double_val"), simple_value("loss", float("nan"))])]],
}
WANT = {  # (seconds since the run's start, value, step)
    "resnet-a": {"loss": [(1.0, 0.5, 0), (2.0, 0.25, 1), (3.5, 0.125, 2)],
                 "train/acc": [(1.0, f32(0.6), 0), (2.0, f32(0.7), 1)]},
    "sweep/b": {"loss": [(0.0, f32(0.9), 0), (0.0, f32(0.8), 1)],  # a NaN is left out: missing is not zero
                "eval/acc": [(0.0, f32(0.3), 0), (10.0, f32(0.45), 2)], "eval/ppl": [(11.5, 12.5, 3)]},
}
FIRST = {"resnet-a": START, "sweep/b": START + 10.0}  # each run's first wall time: the file_version event


def logdir(root):
    """A log directory as torch.utils.tensorboard.SummaryWriter writes one per run folder."""
    paths = {}
    for name, files in RUNS.items():
        d = os.path.join(root, *name.split("/"))
        os.makedirs(d, exist_ok=True)
        for i, evs in enumerate(files):
            first = FIRST[name] if i == 0 else evs[0][0]
            path = os.path.join(d, f"events.out.tfevents.{int(first)}.gpu7.{4242 + i}.0")
            with open(path, "wb") as f:
                f.write(record(event(first, file_version="brain.Event:2")))
                for wall, step, values in evs:
                    f.write(record(event(wall, step, summary=values)))
            paths.setdefault(name, []).append(path)
    with open(os.path.join(root, "README"), "w") as f:  # other files are passed over
        f.write("not an event file\n")
    return paths


def test_a_tensorboard_logdir_comes_in_whole_once():
    sb = Sandbox()
    try:
        root = os.path.join(sb.dir, "runs")
        logdir(root)
        rc, out, err = sb.gs("import", root)
        check(rc == 0, f"import exited {rc}: {out}{err}")
        check("2 TensorBoard runs added, 0 in the store already" in err, err)
        check("not imported (only scalars and hparams are): 1 image" in err, err)
        runs = {r["name"]: r for r in sb.json("runs", "--json")}
        check(sorted(runs) == ["resnet-a", "sweep/b"], str(runs))
        check(runs["resnet-a"]["id"].startswith("tb") and len(runs["resnet-a"]["id"]) == 31, str(runs["resnet-a"]))
        for name, first in FIRST.items():
            check(runs[name]["start_wall_ns"] == int(first) * 10**9 + round(first % 1 * 1e9), f"{name}: {runs[name]}")
        check(runs["resnet-a"]["duration_s"] == 4 and runs["sweep/b"]["duration_s"] == 11.5, str(runs))
        import sys
        sys.path.insert(0, CLIENT)
        import gpuscope
        os.environ["GPUSCOPE_BIN"] = BIN
        st = gpuscope.Store(sb.store)
        prm = st.params("resnet-a")
        want = {"lr": "0.01", "optimizer": "adam", "bn": "true", "import.format": "tensorboard",
                "tensorboard.files": "1", "import.path": os.path.join(root, "resnet-a")}
        for k, v in want.items():
            check(prm.get(k) == v, f"resnet-a: {k} = {prm.get(k)!r}, want {v!r} ({prm})")
        check(st.params("sweep/b").get("tensorboard.files") == "2", str(st.params("sweep/b")))
        for name, metrics in WANT.items():
            for metric, pts in metrics.items():
                got = [(round(x["t_s"], 6), x["value"], x["step"]) for x in st.series(name, metric)]
                check(got == [(t, v, s) for t, v, s in pts], f"{name} {metric}: {got}, want {pts}")
        # the same through show --csv: one row a point
        rows = sb.csv("show", "resnet-a", "--metric", "loss", "--csv")
        check([float(r["value"]) for r in rows] == [0.5, 0.25, 0.125], str(rows))
        notes = st.notes("sweep/b")
        check(any("TensorBoard log directory" in n and "1 image" in n for n in notes), str(notes))
        hist = st.history("resnet-a")
        check([(h["_step"], h["loss"], h["train/acc"]) for h in hist] == [(0, 0.5, f32(0.6)), (1, 0.25, f32(0.7)),
                                                                           (2, 0.125, None)], str(hist))
        found = sb.json("runs", "--where", "param.import.format = tensorboard and param.lr = 0.01", "--json")
        check([r["name"] for r in found] == ["resnet-a"], f"--where finds them: {found}")

        before = sb.json("runs", "--json")
        rc, out, err = sb.gs("import", root)
        check(rc == 0 and "0 TensorBoard runs added, 2 in the store already" in err, f"{rc}: {out}{err}")
        check(sb.json("runs", "--json") == before, "a second import added something")
        # the run folder alone is the same run (its id is its first file's): nothing new either
        rc, out, err = sb.gs("import", os.path.join(root, "sweep"))
        check(rc == 0 and "0 TensorBoard runs added, 1 in the store already" in err, f"{rc}: {out}{err}")
    finally:
        sb.close()


def test_a_damaged_event_file_is_one_line_with_its_offset_and_nothing_is_written():
    sb = Sandbox()
    try:
        for what in ("cut", "crc"):
            root = os.path.join(sb.dir, f"runs-{what}")
            path = logdir(root)["sweep/b"][1]
            with open(path, "rb") as f:
                data = bytearray(f.read())
            first = 12 + struct.unpack("<Q", data[:8])[0] + 4  # the second record's offset
            second = first + 12 + struct.unpack("<Q", data[first:first + 8])[0] + 4
            if what == "cut":  # in the middle of the third record's data
                data = data[:second + 15]
                want = f"{path}: offset {second}: a record cut short"
            else:  # a byte of the second record's data changed
                data[first + 14] ^= 0x20
                want = f"{path}: offset {first}: the record's data fails its CRC"
            with open(path, "wb") as f:
                f.write(data)
            rc, out, err = sb.gs("import", root)
            lines = err.strip().splitlines()
            check(rc == 2 and len(lines) == 1, f"{what}: exit {rc}, {err!r}")
            check(want in lines[0], f"{what}: {lines[0]!r}, want {want!r}")
            check(not os.path.exists(sb.db), f"{what}: the store was written")
    finally:
        sb.close()


run_tests(globals())
