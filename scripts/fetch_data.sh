#!/usr/bin/env bash
# Real data the crispr and clinvar tracks build on, taken from package registries only (never committed):
#   - mageck2 0.3.0 sdist (PyPI): tests/data/count_table.txt, the MAGeCK demo screen (999 sgRNAs, HL60/KBM7)
#   - r-bioc-variantannotation 1.44.1-1 (Debian): extdata/*.vcf.gz, real 1000 Genomes / HapMap VCFs
#   - r-bioc-noiseq 2.42.0-1 (Debian): data/Marioni.RData, real RNA-seq counts of kidney vs liver (Marioni et al. 2008)
# Files land in .cache/data/<package>/ and are checked against the sha256 the frozen worlds were built from.
# Idempotent: a file already present with the right hash is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=.cache/data
VPY="${VPY:-.venv/bin/python}"
mkdir -p "$DATA/mageck2" "$DATA/variantannotation"

check() {  # file sha256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

if ! check "$DATA/mageck2/count_table.txt" 9a4b6322272d3f1eb3cc3c0ca0e89c68b7f9f61260992ace131494eef9efddcb; then
  echo "[data] fetching mageck2==0.3.0 sdist (PyPI) for its demo count table"
  tmp=$(mktemp -d)
  "$VPY" -m pip download -q --no-deps --no-binary :all: -d "$tmp" "mageck2==0.3.0"
  tar -xzf "$tmp"/mageck2-0.3.0.tar.gz -C "$tmp" mageck2-0.3.0/tests/data/count_table.txt
  mv "$tmp"/mageck2-0.3.0/tests/data/count_table.txt "$DATA/mageck2/count_table.txt"
  rm -rf "$tmp"
  check "$DATA/mageck2/count_table.txt" 9a4b6322272d3f1eb3cc3c0ca0e89c68b7f9f61260992ace131494eef9efddcb \
    || { echo "[data] mageck2 count_table.txt has an unexpected sha256; the worlds were frozen from another file" >&2; exit 1; }
fi

VA_FILES=(
  "chr22.vcf.gz 5f64f819420f4bc1d99896b9a16f4c7ce57312030d6f1ae4e53bc9366ab3e749"
  "chr22.vcf.gz.tbi 442f0577b64d70fe917d10bd45bb4be87a5ff0f2cf920ed81f58f1ffcb7f6503"
  "chr7-sub.vcf.gz 77fbcebe26c8d2b44f5b447bb68863c65b344474e28af0e5f1c519236fe97a8b"
  "hapmap_exome_chr22.vcf.gz 369f4bc0ffcd8519a9f72616d3e7ab6c04858669f68b458b5268aa1841d6bd73"
  "h1187-10k.vcf.gz 8151b369980ef1509b6b038a904a102b8c268fff26181257469721488f7e49e7"
  "ex2.vcf accba78d44b1c7bcb3864fed78b90d5b25cdb27a5835a5d6be54c31e16617c07"
  "structural.vcf 3b0c3f06840da8909b1da79dc689b0da590c32c6a2b798d0444b37215ef88b2c"
)
need=0
for entry in "${VA_FILES[@]}"; do set -- $entry; check "$DATA/variantannotation/$1" "$2" || need=1; done
if [ "$need" = 1 ]; then
  echo "[data] fetching r-bioc-variantannotation 1.44.1-1 (Debian) for its extdata VCFs (no R needed: unpacked only)"
  tmp=$(mktemp -d)
  chmod 777 "$tmp"
  (cd "$tmp" && apt-get download -q "r-bioc-variantannotation=1.44.1-1" >/dev/null 2>&1 || { apt-get update -qq && apt-get download -q "r-bioc-variantannotation=1.44.1-1"; })
  dpkg -x "$tmp"/r-bioc-variantannotation_*.deb "$tmp/x"
  for entry in "${VA_FILES[@]}"; do
    set -- $entry
    cp "$tmp/x/usr/lib/R/site-library/VariantAnnotation/extdata/$1" "$DATA/variantannotation/$1"
    check "$DATA/variantannotation/$1" "$2" || { echo "[data] $1 has an unexpected sha256" >&2; exit 1; }
  done
  rm -rf "$tmp"
fi
mkdir -p "$DATA/noiseq"
if ! check "$DATA/noiseq/Marioni.RData" 4f478a408681de09302ce00309dd80de920732b7bcf3bc5219f03f1789d16cf1; then
  echo "[data] fetching r-bioc-noiseq 2.42.0-1 (Debian) for its Marioni kidney/liver counts (unpacked only)"
  tmp=$(mktemp -d)
  chmod 777 "$tmp"
  (cd "$tmp" && apt-get download -q "r-bioc-noiseq=2.42.0-1" >/dev/null 2>&1 || { apt-get update -qq && apt-get download -q "r-bioc-noiseq=2.42.0-1"; })
  dpkg -x "$tmp"/r-bioc-noiseq_*.deb "$tmp/x"
  cp "$tmp/x/usr/lib/R/site-library/NOISeq/data/Marioni.RData" "$DATA/noiseq/Marioni.RData"
  rm -rf "$tmp"
  check "$DATA/noiseq/Marioni.RData" 4f478a408681de09302ce00309dd80de920732b7bcf3bc5219f03f1789d16cf1 \
    || { echo "[data] Marioni.RData has an unexpected sha256" >&2; exit 1; }
fi
echo "[data] ready: $DATA"
