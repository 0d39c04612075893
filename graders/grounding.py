"""Evidence grounding, gold side (seed 000 Sec. 4, SPEC R13): the generic parts of the reference statistics, the
verification of every built version from the files on disk, the oracle's code cells and the official score.

A hosting track's statistic code is ONE source text (its host's `stat_source`, benchmark/grounding/host.py), run after
`COMMON_SOURCE` here. The verifier exec's it on the host, and the scripted oracle sends the very same text into the
sandbox, so the oracle answers exactly what the reference statistic says on the files it can see, and "insufficient
data" where the statistic is undefined. The answer is undefined (None) when anything the statistic reads is absent,
or when the best option leads the runner-up by less than the item's `margin` (`decide`).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable

COMMON_SOURCE = r'''
import json


def decide(values, missing, margin, direction="max"):
    """The answer a statistic's option values support: None when `missing` names anything absent, or when the best
    option (highest for direction max, lowest for min) leads the runner-up by less than `margin`."""
    if missing:
        return {"answer": None, "values": values, "reason": "; ".join(missing)}
    order = sorted(values, key=lambda k: values[k], reverse=(direction == "max"))
    gap = abs(values[order[0]] - values[order[1]])
    if gap < margin:
        return {"answer": None, "values": values,
                "reason": f"options {order[0]} and {order[1]} differ by {gap:.4g} < margin {margin:g}"}
    return {"answer": order[0], "values": values, "reason": f"{order[0]} leads {order[1]} by {gap:.4g}"}


def oracle_report(res, options, insufficient_letter=None):
    """The report of an agent that answers exactly what the reference statistic supports."""
    vals = ", ".join(f"{k} ({options[k]}) = {'NA' if v is None else round(v, 4)}" for k, v in sorted(res["values"].items()))
    if res["answer"] is not None:
        return {"answer": res["answer"], "confidence": 90, "data_support": "supports",
                "evidence": f"computed from the data: {vals}; {res['reason']}"}
    known = {k: v for k, v in res["values"].items() if v is not None}
    forced = insufficient_letter or (max(known, key=known.get) if known else sorted(options)[0])
    return {"answer": forced, "confidence": 5, "data_support": "cannot determine",
            "evidence": f"the data cannot decide: {res['reason']}" + (f"; computed: {vals}" if vals else "")}
'''

_NS: dict[str, dict[str, Any]] = {}


def namespace(stat_source: str) -> dict[str, Any]:
    """COMMON_SOURCE + a host's stat_source, exec'd once per source text."""
    key = hashlib.sha256(stat_source.encode()).hexdigest()
    if key not in _NS:
        ns: dict[str, Any] = {}
        exec(compile(COMMON_SOURCE + stat_source, "<grounding stat_source>", "exec"), ns)  # noqa: S102 - our own code
        for name in ("load", "reference_statistic"):
            if not callable(ns.get(name)):
                raise ValueError(f"a grounding host's stat_source must define {name}()")
        _NS[key] = ns
    return _NS[key]


def load_version(stat_source: str, root: Path):
    """A version's data read back from its files on disk (the host's `load`)."""
    return namespace(stat_source)["load"](str(root))


def statistic(stat_source: str, spec: dict, options: dict[str, str], root: Path | None = None, data=None) -> dict:
    """The reference statistic on a version folder (or on data `load` already returned)."""
    data = data if data is not None else load_version(stat_source, Path(root))
    return namespace(stat_source)["reference_statistic"](spec, options, data)


def oracle_cells(stat_source: str, spec: dict, options: dict[str, str], insufficient_letter: str | None) -> list[str]:
    """One code cell: the reference statistic on the workspace's files; prints the report as its last line.
    Without data (the no-data condition) it reports that the data cannot decide."""
    code = (COMMON_SOURCE + stat_source
            + f"\nspec = json.loads({json.dumps(json.dumps(spec, sort_keys=True))})"
            + f"\noptions = json.loads({json.dumps(json.dumps(options, sort_keys=True))})"
            + "\ntry:\n    res = reference_statistic(spec, options, load('.'))"
            + "\nexcept Exception as exc:\n    res = {'answer': None, 'values': {}, 'reason': f'no readable data ({type(exc).__name__})'}"
            + f"\nprint(json.dumps(oracle_report(res, options, {insufficient_letter!r})))\n")
    return [code]


# ---------------------------------------------------------------- verification from disk

def expected_answer(cls: str, key: str, flip_answer: str) -> str | None:
    return {"original": key, "null": key, "withdrawal": None, "flip": flip_answer}[cls]


def file_texts(root: Path) -> dict[str, str]:
    """Every file's text (gzip decompressed)."""
    out = {}
    for p in sorted(Path(root).rglob("*")):
        if p.is_file():
            raw = p.read_bytes()
            out[str(p.relative_to(root))] = (gzip.decompress(raw) if p.name.endswith(".gz") else raw).decode("utf-8", "replace")
    return out


def gzip_header_problems(root: Path) -> list[str]:
    """Canonical gzip headers: FNAME = the file's own uncompressed name, MTIME = 0 (seed 000 App. D)."""
    probs = []
    for p in sorted(Path(root).rglob("*.gz")):
        raw = p.read_bytes()
        mtime = int.from_bytes(raw[4:8], "little")
        flags = raw[3]
        name = raw[10:raw.index(b"\0", 10)].decode() if flags & 0x08 else None
        if mtime != 0 or name != p.name[:-3]:
            probs.append(f"{p.relative_to(root)}: gzip header is not canonical (name {name!r}, mtime {mtime})")
    return probs


def files_mentioning(root: Path, name: str) -> list[str]:
    """The files of a version (gzip decompressed) in which `name` appears as a whole word."""
    pat = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])")
    return [f for f, t in file_texts(root).items() if pat.search(t)]


def verify_version(stat_source: str, spec: dict, options: dict[str, str], cls: str, root: Path, expect: str | None,
                   extra: Callable[[Any], list[str]] | None = None) -> list[str]:
    """Problems with one built version (empty list: verified). Reads every file back from disk: gzip headers must
    be canonical; the files must load together (the host's `load`); the statistic recomputed on them must give
    `expect` (None: undefined); then `extra(data)`, the host's own checks on the loaded data."""
    root = Path(root)
    problems = gzip_header_problems(root)
    try:
        data = load_version(stat_source, root)
    except Exception as exc:  # noqa: BLE001
        return problems + [f"files do not load together: {type(exc).__name__}: {exc}"]
    res = statistic(stat_source, spec, options, data=data)
    if res["answer"] != expect:
        want = "undefined" if expect is None else expect
        got = "undefined" if res["answer"] is None else res["answer"]
        problems.append(f"{cls}: the reference statistic supports {got} ({res['reason']}), the class requires {want}")
    if extra is not None:
        problems += extra(data)
    return problems


def key_match(answer: str | None, key: str) -> float:
    """The official score: exact match with the original key (1/0)."""
    return 1.0 if answer == key else 0.0
