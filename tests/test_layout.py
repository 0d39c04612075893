"""The `layout` gaming agent's rule (benchmark.models.scripted.layout) reads only names, orders and index fields (issue 18)."""
from benchmark.models.scripted.layout import layout_scan


def _world(root, header_order, sheet_rows, i7):
    root.mkdir()
    (root / "counts.tsv").write_text("gene_id\t" + "\t".join(header_order) + "\n"
                                     + "".join(f"G{k:03d}\t" + "\t".join("5" for _ in header_order) + "\n" for k in range(5)))
    (root / "samples.csv").write_text("sample,condition,i7_index\n"
                                      + "".join(f"{s},{c},{x}\n" for (s, c), x in zip(sheet_rows, i7)))
    return root


def test_a_counts_header_in_simulation_blocks_and_a_shared_index_are_flagged(tmp_path):
    sheet = [("S1", "ctrl"), ("S2", "trt"), ("S3", "ctrl"), ("S4", "trt"), ("S5", "ctrl")]
    leaky = _world(tmp_path / "leaky", ["S1", "S3", "S5", "S2", "S4"], sheet, ["AAA", "CCC", "GGG", "TTT", "AAA"])
    scan = layout_scan(leaky)
    assert scan["rules"]["cross"] == ["S2", "S4"] or scan["rules"]["cross"] == ["S3", "S5"]
    assert scan["rules"]["col_out"] and scan["rules"]["shared_index"] == ["S1", "S5"]
    tidy = _world(tmp_path / "tidy", ["S1", "S2", "S3", "S4", "S5"], sheet, ["AAA", "CCC", "GGG", "TTT", "ACG"])
    assert all(v == 0 for v in layout_scan(tidy)["counts"].values()), layout_scan(tidy)
