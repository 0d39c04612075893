"""The canonical writer: identical content gives identical bytes, and no header leaks a name, time or command."""
import gzip
import struct

import numpy as np
import pandas as pd
import pysam
import scipy.sparse as sp

from benchmark.suite.canonical import CanonicalWriter


def test_gzip_header_is_canonical(tmp_path):
    w = CanonicalWriter(tmp_path)
    p = w.table("tables/cells.csv.gz", pd.DataFrame({"a": [1, 2], "b": [0.5, 1 / 3]}))
    raw = p.read_bytes()
    flags, mtime = raw[3], struct.unpack("<I", raw[4:8])[0]
    assert mtime == 0
    assert flags & 0x08, "FNAME set"
    name = raw[10:raw.index(b"\0", 10)]
    assert name == b"cells.csv", "the file's own name, never a source or temp name"
    assert gzip.decompress(raw).decode() == "a,b\n1,0.5\n2,0.333333\n"


def test_same_content_same_bytes(tmp_path):
    m = sp.random(30, 20, density=0.2, random_state=np.random.default_rng(0), format="csr")
    m.data = np.rint(m.data * 10) + 1
    outs = []
    for sub in ("a", "b"):
        w = CanonicalWriter(tmp_path / sub)
        w.mtx("matrix.mtx.gz", m.T)
        w.json("meta.json", {"z": 1, "a": [1.5, 2]})
        outs.append([(tmp_path / sub / f).read_bytes() for f in ("matrix.mtx.gz", "meta.json")])
    assert outs[0] == outs[1]
    assert w.written == ["matrix.mtx.gz", "meta.json"]


def test_bam_has_no_program_line_and_is_indexed(tmp_path):
    header = {"HD": {"VN": "1.6", "SO": "coordinate"}, "SQ": [{"SN": "chr1", "LN": 10000}],
              "PG": [{"ID": "leak", "CL": "edit --swap"}]}
    reads = [(f"r{i}", 0, 10 * i, i % 2 == 1, 30, 0, 36) for i in range(100)]
    digests = []
    for sub in ("a", "b"):
        w = CanonicalWriter(tmp_path / sub)
        p = w.bam("alignments/chip.bam", header, reads)
        digests.append(p.read_bytes())
        assert (tmp_path / sub / "alignments/chip.bam.bai").exists()
        with pysam.AlignmentFile(str(p)) as bam:
            assert "PG" not in bam.header.to_dict()
            assert bam.count("chr1", 0, 500) == 50
    assert digests[0] == digests[1]


def test_atomic_writes_of_one_file_at_once_each_land_whole(tmp_path):
    """Two freezes of one world at once write its lock at once (test_campaign's three-way freeze failed once under the
    full suite: FileNotFoundError renaming `.x.lock.json.tmp`, which the other writer had already renamed away). Each
    writer's temporary file is its own: every write lands whole and none raises, and no temporary file is left."""
    import threading

    from benchmark.suite.canonical import _atomic_write

    path = tmp_path / "locks" / "w.lock.json"
    errors: list[BaseException] = []
    bodies = [bytes([65 + k]) * 50_000 for k in range(4)]

    def writer(body: bytes) -> None:
        try:
            for _ in range(100):
                _atomic_write(path, body)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert path.read_bytes() in bodies
    assert [p.name for p in path.parent.iterdir()] == ["w.lock.json"]
