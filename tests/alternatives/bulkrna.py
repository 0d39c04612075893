"""bulkrna: sound analyses other than the reference solver's (pydeseq2 Wald with the estimable design, apeGLM)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tests.alternatives import alternative


def _load(world_dir: Path):
    counts = pd.read_csv(world_dir / "counts.tsv", sep="\t", index_col=0)
    sheet = pd.read_csv(world_dir / "samples.csv")
    meta = json.loads((world_dir / "meta.json").read_text())
    return counts, sheet, meta["task"]["test_condition"], meta["task"]["reference_condition"]


@alternative("bulkrna.L2.lfc_ranking", "DESeq2 MLE fold changes ranked after a baseMean >= 10 filter",
             ["bulkrna.L2.lfc_ranking.lowcount"])
def filtered_mle_ranking(world_dir: Path, out: Path) -> dict:
    """An expert may drop genes with baseMean < 10 and rank the unshrunk (MLE) fold changes instead of shrinking."""
    from pydeseq2.dds import DeseqDataSet
    from pydeseq2.default_inference import DefaultInference
    from pydeseq2.ds import DeseqStats

    counts, sheet, test, base = _load(world_dir)
    inf = DefaultInference(n_cpus=1)
    dds = DeseqDataSet(counts=counts.T.astype(int), metadata=sheet.set_index("sample").loc[counts.columns],
                       design="~condition", inference=inf, quiet=True)
    dds.deseq2()
    st = DeseqStats(dds, contrast=["condition", test, base], inference=inf, quiet=True)
    st.summary()
    res = st.results_df
    kept = res[res["baseMean"] >= 10].dropna(subset=["log2FoldChange"])
    top = kept.assign(a=kept["log2FoldChange"].abs()).sort_values("a", ascending=False).index[:20].tolist()
    pd.DataFrame({"gene": kept.index, "log2fc": kept["log2FoldChange"].round(4), "padj": kept["padj"]}).to_csv(
        out / "rank.csv", index=False)
    return {"test_condition": test, "reference_condition": base, "top_genes": top, "ranking_table": "rank.csv",
            "n_de_genes": int((kept["padj"] < 0.05).sum()),
            "method": {"fold_change": "DESeq2 MLE after removing genes with baseMean < 10", "ranking": "|log2FC|"},
            "issues_found": ["low-count genes have noisy fold changes; filtered them out before ranking"],
            "analysis_usable": True, "summary": "ranked the well-measured genes"}
