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
