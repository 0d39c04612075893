"""The scRNA track's grounding hook: the cells the evidence-grounding items (worlds/scrna/grounding.yaml) ask about.

The real PBMC68k UMI counts recovered by this track's loader (`worlds.scrna.build.pbmc68k`), 700 cells x 765 genes,
with the data set's `bulk_labels` as cell types. The grounding protocol (benchmark/grounding) builds every item's
versions from what this function returns and knows nothing else about the track.
"""
from __future__ import annotations

from benchmark.registry import grounding_substrate
from worlds.scrna.build import pbmc68k


@grounding_substrate("scrna")
def pbmc_cells():
    """(counts cells x genes, genes, barcodes, obs with a cell_type column)."""
    d = pbmc68k()
    return d.counts, list(d.genes), list(d.barcodes), d.obs[["cell_type"]].copy()
