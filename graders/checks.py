"""Deterministic rubric checks: one report field (or the work product it names) against the golden, credit in [0, 1].

Shared by the L1 measures and actions and the L2 components; the contract is graders/README.md. A check never
raises on a bad report or product: a missing or wrongly typed field, or an unreadable file, earns 0 and says why,
so grading a malformed report is an outcome, not a crash.
"""
from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from graders.manifest import Check

MAX_PRODUCT_BYTES = 64 << 20  # the harness collects at most this much; a larger file is not read
MAX_PRODUCT_ROWS = 1_000_000
PRODUCT_KINDS = ("product_items", "product_table", "product")  # checks that read a work product (capped)

_MISSING = object()


@dataclass(frozen=True)
class CheckResult:
    id: str
    credit: float
    detail: str
    component: str | None = None


def get_path(obj: Any, path: str) -> Any:
    """Dotted-path lookup (`domains.total_mb`, `issues.0.description`); `_MISSING` when absent."""
    cur = obj
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def flatten_text(value: Any) -> str:
    """All strings, numbers and keys inside a value, joined: the text a `mentions` check searches."""
    if value is _MISSING or value is None:
        return ""
    if isinstance(value, dict):
        return " ".join(f"{k} {flatten_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return " ".join(flatten_text(v) for v in value)
    return str(value)


def as_number(v: Any) -> float | None:
    """A report or golden value as a finite float, or None (booleans, text, NaN and infinities are not numbers)."""
    if isinstance(v, bool) or v is None or v is _MISSING:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _within(got: float, want: float, rel: float | None, abs_: float | None) -> bool:
    ok = False
    if rel is not None:
        ok = ok or abs(got - want) <= rel * abs(want)
    if abs_ is not None:
        ok = ok or abs(got - want) <= abs_
    return ok


def _norm(v: Any) -> Any:
    return v.strip().lower() if isinstance(v, str) else v


_NUMERIC_KEY = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?$")


def table_key(k: Any) -> str:
    """A table row's key as compared with the golden's: trimmed and lower-cased, and a number in the one spelling a
    corrected copy's fields are compared in (`_canon_field`: a temperature written 190.0 names the golden's row 190),
    so a table's float formatting is no missing row. Names (genes, SNPs, ids with letters) are compared as text."""
    s = _norm(str(k))
    return _canon_field(s) if _NUMERIC_KEY.match(s) else s


def _sign(v: Any) -> int | None:
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("positive", "up", "increase", "increased", "higher", "activating", "+"):
            return 1
        if s in ("negative", "down", "decrease", "decreased", "lower", "repressive", "-"):
            return -1
        if s in ("none", "no relationship", "zero", "null", "0"):
            return 0
        return None
    x = as_number(v)
    if x is None:
        return None
    return (x > 0) - (x < 0)


def run_check(check: Check, report: Any, golden: dict[str, Any], products: Path | None = None,
              inputs: Path | None = None) -> CheckResult:
    """`inputs`: the world's public files, against which a corrected copy named as a product is read (L1)."""
    c = check
    try:
        credit, detail = _evaluate(c, report, golden, products, inputs)
    except RecursionError:
        credit, detail = 0.0, "the value is nested too deeply to read"
    return CheckResult(c.id, credit, detail, c.component)


def run_checks(checks: list[Check], report: Any, golden: dict[str, Any], products: Path | None = None,
               inputs: Path | None = None) -> list[CheckResult]:
    """Run checks in order, then apply `requires` when a required check did not earn full credit: recognition (I)
    keeps half its credit (a recognised problem without its measured value is partial); any other check keeps none,
    because a conclusion (usable, a direction) that is right for every world earns nothing without the world's own
    checked values."""
    results = [run_check(c, report, golden, products, inputs) for c in checks]
    by_id = {r.id: r for r in results}
    out = []
    for c, r in zip(checks, results):
        missing = [q for q in c.requires if by_id.get(q) is None or by_id[q].credit < 1.0]
        if missing and r.credit > 0:
            keep = 0.5 if c.component == "I" else 0.0
            r = replace(r, credit=round(r.credit * keep, 6),
                        detail=f"{r.detail}; {'halved' if keep else 'no credit'}: {', '.join(missing)} not established")
        out.append(r)
    return out


def f1_score(reported: list[str], target: list[str]) -> tuple[float, float, float]:
    """Precision, recall and F1 of two item sets (case-insensitive, stripped)."""
    rep = {_norm(str(x)) for x in reported} - {""}
    tgt = {_norm(str(x)) for x in target} - {""}
    if not tgt and not rep:
        return 1.0, 1.0, 1.0
    tp = len(rep & tgt)
    prec = tp / len(rep) if rep else 0.0
    rec = tp / len(tgt) if tgt else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return prec, rec, f1


def reference_bar(c: Check, floor: float, reference_score: float | None) -> float:
    """The full-credit bar of a check scored against generative truth: the rubric's own floor, lowered to the
    reference solver's score against the same truth less `bar_slack` when the reference does worse than the floor
    (a world where even the reference misses part of the truth must not fail an analysis as good as it)."""
    if reference_score is None:
        return floor
    return min(floor, reference_score - c.bar_slack)


def _with_truth_end(c: Check, want: Any, golden: dict[str, Any] | None) -> Any:
    """A value check's golden widened to the generative truth's own answer (`truth_end`): the interval from the
    reference solver's value (or interval) to the truth's, a list read as its length. Blind study 15 (scrna
    lane_batch): 8 true genes and 1 more, against a reference that calls 5 of the 8, failed "9 outside tolerance of
    5"; study 16 (histone broad_mark_narrow_default): H3K27me3 domains merged to 1.13 Mb, the simulated domains'
    1.1 Mb, failed against MACS3 --broad's fragmented 0.28 Mb."""
    if c.truth_end is None or golden is None:
        return want
    truth = get_path(golden, c.truth_end)
    end = float(len(truth)) if isinstance(truth, list) else as_number(truth)
    ends = [as_number(x) for x in want] if isinstance(want, list) else [as_number(want)]
    if end is None or None in ends:
        return want
    return [min(*ends, end), max(*ends, end)]


def _reference_answer(c: Check, golden: dict[str, Any] | None) -> Any:
    if c.reference is None or golden is None:
        return _MISSING
    return get_path(golden, c.reference)


STRICT_PRECISION = 0.9  # `strict_subset`: the share of a stricter call that must be true items


def _strict_size(c: Check, golden: dict[str, Any] | None) -> int:
    """How many true items a stricter call must hold: strict_subset, or fewer where the stricter standard rule itself
    calls fewer (blind study 25: one marker, the best, of a population whose best separates at AUROC 0.72, where the
    AUROC 0.75 rule calls none), never fewer than one."""
    strict = get_path(golden, c.strict_golden) if c.strict_golden and golden is not None else None
    if isinstance(strict, list):
        return max(1, min(int(c.strict_subset or 1), len(strict)))
    return int(c.strict_subset or 1)


def _f1_credit(c: Check, reported: list[str], target: list[str], golden: dict[str, Any] | None = None) -> tuple[float, str]:
    prec, rec, f1 = f1_score(reported, target)
    ref = _reference_answer(c, golden)
    ref_f1 = f1_score([str(x) for x in ref], target)[2] if isinstance(ref, list) else None
    need = reference_bar(c, c.min_f1, ref_f1)
    part = c.partial_f1
    if part is not None and ref_f1 is not None:
        part = min(part, need - c.bar_slack)
    detail = f"precision {prec:.2f}, recall {rec:.2f}, F1 {f1:.2f} (need {need:.2f}) over {len(set(map(str, target)))} golden items"
    if ref_f1 is not None:
        detail += f" of the truth (the reference solver's F1 {ref_f1:.2f})"
    if f1 >= need - 1e-12:
        return 1.0, detail
    n = len(set(map(str, reported)))
    if c.strict_subset is not None and n >= _strict_size(c, golden) and prec >= STRICT_PRECISION - 1e-12:
        return 1.0, detail + f"; a stricter call: {n} items, precision >= {STRICT_PRECISION:g}"
    if part is not None and f1 >= part - 1e-12:
        return 0.5, detail + " (partial)"
    return 0.0, detail


def product_path(products: Path | None, value: Any) -> tuple[Path | None, str]:
    """The collected product a report names, confined to the products folder; (None, why) when it cannot be read."""
    if products is None:
        return None, "no work products were collected for this report"
    if not isinstance(value, str) or not value.strip():
        return None, "the report names no product file"
    rel = value.strip()
    for prefix in ("/workspace/", "workspace/", "./"):
        if rel.startswith(prefix):
            rel = rel[len(prefix):]
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts:
        return None, f"product path {value!r} is not a file under the working directory"
    root = Path(products).resolve()
    p = root / rel
    if p.is_symlink() or not p.is_file():
        return None, f"product {rel} was not written (or not collected)"
    if not p.resolve().is_relative_to(root):
        return None, f"product path {value!r} leaves the working directory"
    if p.stat().st_size > MAX_PRODUCT_BYTES:
        return None, f"product {rel} is larger than {MAX_PRODUCT_BYTES >> 20} MiB"
    return p, rel


def _read_text(p: Path) -> str:
    """A file's text; a gzip or BGZF stream (a bgzipped VCF and its corrected copy) inflated within the product caps
    (graders.product_io: a bomb reads as empty)."""
    from graders.product_io import ProductRefused, compression_of, read_text_bounded

    if compression_of(p) in ("gzip", "bgzf"):
        try:
            return read_text_bounded(p)
        except ProductRefused:
            return ""
    return p.read_bytes().decode("utf-8", errors="replace")


def _line_item(line: str, known: set[str], canon=None) -> str:
    """The item of one `lines` line: the whole line when it is an item (a multiallelic key `22:1:G:A,C` holds a
    comma), else the first TSV field, else the first CSV field (quotes respected: `"22:1:G:A,C",note`)."""
    whole = line.strip().strip('"').strip()
    if _norm(canon(whole) if canon else whole) in known:
        return whole
    if "\t" in line:
        first = line.split("\t", 1)[0]
    else:
        try:
            first = next(csv.reader([line], skipinitialspace=True), [""])[0]
        except csv.Error:
            first = line.split(",", 1)[0]
    return first.strip().strip('"').strip()


def read_items(p: Path, golden_items: list[str], canon=None) -> list[str]:
    """`lines` format: one item per line (the whole line when it is a known item, else its first TSV or CSV field),
    blank and '#' lines ignored, a header line ignored. `canon` maps a raw item to the golden's spelling before
    matching (a validator that accepts `chr22:` for `22:`)."""
    known = {_norm(str(x)) for x in golden_items}
    items = []
    for line in _read_text(p).splitlines()[:MAX_PRODUCT_ROWS]:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        items.append(_line_item(line, known, canon))
    if items and _norm(canon(items[0]) if canon else items[0]) not in known:
        items = items[1:]  # a header (or one stray item, which then costs recall instead of precision)
    return items


def _suffixes(name: str) -> str:
    """A file's format by name: its last extension, with the one before it when compressed (`csv.gz`)."""
    parts = name.lower().split(".")[1:]
    return ".".join(parts[-2:]) if parts and parts[-1] in ("gz", "bgz", "bz2", "xz") else (parts[-1] if parts else "")


def _copied_files(product: Path, original: Path, files: list[Path], inputs: Path, max_siblings: int = 100) -> set[str]:
    """The world files a corrected copy (of `original`) and the corrected copies of the same format in its folder copy
    (their paths relative to the world): the files an action that rewrote several of them names."""
    out = {str(original.relative_to(inputs))}
    try:
        siblings = sorted(product.parent.iterdir())[:max_siblings]
    except OSError:
        return out
    for q in siblings:
        if q.is_file() and not q.is_symlink() and _suffixes(q.name) == _suffixes(product.name):
            o = original_of(q, files)
            if o is not None:
                out.add(str(o.relative_to(inputs)))
    return out


def _world_files(inputs: Path) -> list[Path]:
    """The world's public files (regular files, no links), walked once per product check."""
    return [p for p in Path(inputs).rglob("*") if p.is_file() and not p.is_symlink()] if Path(inputs).is_dir() else []


def original_of(product: Path, files: list[Path]) -> Path | None:
    """The world file a product is a corrected copy of: the one of the same format whose name stem the product's
    name contains (`counts_corrected.csv` copies `counts.csv`; the longest such stem wins); None when there is none."""
    name = product.name.lower()
    best = None
    for p in files:
        if _suffixes(p.name) != _suffixes(product.name):
            continue
        stem = p.name.split(".")[0].lower()
        if stem and stem in name and (best is None or len(stem) > len(best.name.split(".")[0])):
            best = p
    return best


def _fields(line: str) -> list[str]:
    """A data line's fields: tab-separated when it has tabs, else CSV (quotes respected)."""
    if "\t" in line:
        return [x.strip().strip('"').strip() for x in line.split("\t")]
    try:
        return [x.strip() for x in next(csv.reader([line], skipinitialspace=True), [])]
    except csv.Error:
        return [x.strip() for x in line.split(",")]


# How a file's row is named by the items a prompt asks for: the whole line, its first field, or its first fields
# joined by ':' ("Identify a SNP as CHR:POS" over a CHR POS ... table; CHROM:POS:REF:ALT over a VCF row).
KEY_FORMS = {
    "line": lambda line, f: line.strip().strip('"').strip(),
    "first": lambda line, f: f[0] if f else "",
    "first2": lambda line, f: ":".join(f[:2]),
    "first3": lambda line, f: ":".join(f[:3]),
    "vcf": lambda line, f: ":".join([f[0], f[1], f[3], f[4]]) if len(f) > 4 else "",
}


def _key_form(lines: list[str], known: set[str]) -> str:
    """The key form under which the most golden items name rows of the original file (first field on a tie, so a
    file whose rows the items do not name keeps the first-field reading)."""
    best, hits = "first", 0
    for name, form in KEY_FORMS.items():
        n = len({k for line in lines if (k := _norm(form(line, _fields(line)))) in known})
        if n > hits:
            best, hits = name, n
    return best


def _record_rows(original: str, copy: str, golden_items: list[str]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each file's rows (from its text) by record key, the key read in the form the golden items name the original's
    rows."""
    known = {_norm(str(x)) for x in golden_items}

    def data_lines(text: str) -> list[str]:
        out = []
        for line in text.splitlines()[:MAX_PRODUCT_ROWS]:
            line = line.rstrip("\r\n")
            if line.strip() and not line.startswith("#"):
                out.append(line)
        return out

    a_lines, b_lines = data_lines(original), data_lines(copy)
    form = KEY_FORMS[_key_form(a_lines, known)]

    def rows(lines: list[str]) -> dict[str, list[list[str]]]:
        out: dict[str, list[list[str]]] = {}
        for line in lines:
            f = _fields(line)
            out.setdefault(form(line, f), []).append(f)
        return out

    return rows(a_lines), rows(b_lines)


MISSING_TOKENS = {"", "na", "nan", "none", "null", "."}
_INTEGER = re.compile(r"^[+-]?\d+$")


def _canon_field(field: str) -> str:
    """A field as a corrected copy is compared with its original: an integer (a count) exactly, any other number to
    nine significant digits, a missing value as one spelling. A table read and written back by pandas prints 0.470 as
    0.47, and recomputing a value can print 0.4700000000000002; neither is a correction."""
    text = field.strip()
    if text.lower() in MISSING_TOKENS:
        return ""
    if _INTEGER.match(text):
        return str(int(text))
    try:
        value = float(text)
    except ValueError:
        return text
    if not math.isfinite(value):
        return text.lower()
    if value == int(value) and abs(value) < 2 ** 53:
        return str(int(value))  # 12.0 written for 12
    return format(value, ".9g")


def _same_rows(orig: list[list[str]], copy: list[list[str]]) -> bool:
    """One record's rows in the original and in the copy hold the same values (as multisets of rows)."""
    if len(orig) != len(copy):
        return False
    canon = lambda rows: sorted(tuple(_canon_field(x) for x in r) for r in rows)  # noqa: E731
    return orig == copy or canon(orig) == canon(copy)


def changed_records(original: Path, copy: Path, golden_items: list[str]) -> list[str]:
    """The records a corrected copy changes: the keys whose rows differ between the original and the copy, removed
    or added rows included. A row's key is read in the form the golden items name the original's rows (`_key_form`:
    the whole line, its first field, or its first fields joined by ':' as a SNP is named CHR:POS), so a corrected
    copy of a CHR POS table is read as the SNPs it changes, not the chromosomes."""
    return changed_record_readings(original, copy, golden_items)[0]


def changed_record_readings(original: Path, copy: Path, golden_items: list[str]) -> list[list[str]]:
    """The ways a corrected copy names the records it fixed: every changed record and, where the correction both
    removed rows and edited others, the removed ones and the edited ones apart. Merging sequencing-error barcodes into
    their parents removes the errors and edits the parents' counts: the fixed records are the removed ones, as the
    edited ones are where a swapped label is put right in place."""
    text_a, text_b = _read_text(original), _read_text(copy)  # each file read (and inflated) once for both readings
    columns = _changed_columns(text_a, text_b, golden_items)
    if columns is not None:
        return [columns]
    a, b = _record_rows(text_a, text_b, golden_items)
    changed = sorted(k for k in set(a) | set(b) if not _same_rows(a.get(k, []), b.get(k, [])))
    removed = [k for k in changed if k not in b]
    edited = [k for k in changed if k in a and k in b]
    return [changed] + [r for r in (removed, edited) if r and len(r) < len(changed)]


def _changed_columns(original: str, copy: str, golden_items: list[str]) -> list[str] | None:
    """Where the golden items are columns of the original (samples of a genes x samples matrix), the columns a
    corrected copy (both given as text) changes: those it removed or whose values differ, read by header name (blind
    study 16: two technical replicates summed into one column, S06 into S02, is a copy that names both). None where
    the items are not the original's columns: the copy is then read by rows."""
    def lines_of(text: str) -> list[str]:
        # a VCF's meta lines (##) are skipped and its #CHROM line is the header
        lines = [ln for ln in text.splitlines()[: MAX_PRODUCT_ROWS + 200] if ln.strip() and not ln.startswith("##")]
        if lines and lines[0].startswith("#"):
            lines[0] = lines[0][1:]
        return [lines[0]] + [ln for ln in lines[1:] if not ln.startswith("#")] if lines else []

    lines_a = lines_of(original)
    head_a = _fields(lines_a[0]) if lines_a else []
    known = {_norm(str(x)) for x in golden_items}
    if not known or not known <= {_norm(h) for h in head_a}:
        return None  # read the header alone before splitting every row
    lines_b = lines_of(copy)
    head_b = _fields(lines_b[0]) if lines_b else []
    rows_a, rows_b = [_fields(ln) for ln in lines_a[1:]], [_fields(ln) for ln in lines_b[1:]]
    if len(rows_a) != len(rows_b):
        return None  # rows added or removed as well: not a column correction
    where_b = {_norm(h): i for i, h in enumerate(head_b)}
    out = []
    # the data columns: after the row key (gene_id), or after a VCF's FORMAT (its INFO is recomputed when a sample goes)
    first = head_a.index("FORMAT") + 1 if head_a[:1] == ["CHROM"] and "FORMAT" in head_a else 1
    for i, h in enumerate(head_a):
        if i < first:
            continue
        j = where_b.get(_norm(h))
        if j is None or any(_canon_cell(ra[i] if i < len(ra) else "") != _canon_cell(rb[j] if j < len(rb) else "")
                            for ra, rb in zip(rows_a, rows_b)):
            out.append(h)
    return sorted(out)


def _canon_cell(field: str) -> str:
    """A data cell as `_canon_field` reads it, each ':' sub-field and ',' number of a VCF genotype on its own and the
    trailing missing sub-fields dropped: a writer prints an allele balance 0.610 as 0.61 and pads `./.:1,0:1` to
    `./.:1,0:1:.:.:.` (pysam, bcftools), neither of which changes a call."""
    parts = [",".join(_canon_field(x) for x in sub.split(",")) for sub in field.strip().split(":")]
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return ":".join(parts)


def read_table(p: Path, key: str, column: str) -> tuple[dict[str, float] | None, str]:
    text = _read_text(p)
    sample = text[:4096]
    delim = "\t" if sample.count("\t") > sample.count(",") else ","
    reader = csv.DictReader(io.StringIO(text), delimiter=delim)
    cols = reader.fieldnames or []
    if key not in cols or column not in cols:
        return None, f"needs columns '{key}' and '{column}', found {cols[:8]}"
    out: dict[str, float] = {}
    for i, row in enumerate(reader):
        if i >= MAX_PRODUCT_ROWS:
            break
        v = as_number(row.get(column))
        k = (row.get(key) or "").strip()
        if k and v is not None:
            out[table_key(k)] = v
    return out, f"{len(out)} rows"


def _evaluate(c: Check, report: Any, golden: dict[str, Any], products: Path | None = None,
              inputs: Path | None = None) -> tuple[float, str]:
    if c.kind == "mentions":
        paths = c.fields or [c.field]
        text = " ".join(flatten_text(get_path(report, p)) for p in paths)
        hits = [p for p in c.patterns if re.search(p, text, flags=re.IGNORECASE)]
        ok = bool(hits) != c.negate
        return float(ok), (f"matched {hits[0]!r}" if hits else "no pattern matched") + (" (negated)" if c.negate else "")

    got = get_path(report, c.field) if c.field else _MISSING
    if c.kind == "present":
        ok = got is not _MISSING and got not in (None, "", [], {})
        return float(ok != c.negate), f"{c.field} {'present' if ok else 'absent'}"
    if got is _MISSING:
        return 0.0, f"report has no field {c.field}"

    want: Any = c.target
    if c.golden is not None:
        want = get_path(golden, c.golden)
        if want is _MISSING:
            return 0.0, f"golden has no key {c.golden} (rubric/golden mismatch)"

    if c.kind == "value":
        g = as_number(got)
        want = _with_truth_end(c, want, golden)
        if g is not None and isinstance(want, list) and len(want) == 2 and None not in map(as_number, want):
            low, high = sorted(as_number(x) for x in want)  # an interval: every value inside it is right
            if low <= g <= high:
                return 1.0, f"{g:g} within [{low:g}, {high:g}]"
            want = low if g < low else high
        w = as_number(want)
        if g is None or w is None:
            return 0.0, f"{c.field}={got!r} is not a number"
        if _within(g, w, c.rel_tol, c.abs_tol):
            return 1.0, f"{g:g} within tolerance of {w:g}"
        if c.partial_tol is not None and _within(g, w, c.partial_tol, None):
            return 0.5, f"{g:g} within partial tolerance of {w:g}"
        return 0.0, f"{g:g} outside tolerance of {w:g}"

    if c.kind == "equals":
        values = c.values or ([want] if c.golden is not None else [])  # a golden key: the world's own answer
        ok = _norm(got) in {_norm(v) if not isinstance(v, (list, dict)) else str(v) for v in values}
        return float(ok != c.negate), f"{c.field}={got!r}" + (" in" if ok else " not in") + f" {values}"

    if c.kind == "overlap":
        if not isinstance(got, list) or not isinstance(want, list):
            return 0.0, f"{c.field} is not a list"
        reported = [str(x) for x in got][: c.top_k] if c.top_k else [str(x) for x in got]
        if c.allowed is not None:  # true but not required: neither a false positive nor a miss
            extra = get_path(golden, c.allowed)
            if not isinstance(extra, list):
                return 0.0, f"golden has no list {c.allowed} (rubric/golden mismatch)"
            free = {_norm(str(x)) for x in extra} - {_norm(str(x)) for x in want}
            kept = [x for x in reported if _norm(x) not in free]
            credit, detail = _f1_credit(c, kept, [str(x) for x in want], golden)
            return credit, f"{detail}; {len(reported) - len(kept)} reported items allowed ({c.allowed}) left out"
        return _f1_credit(c, reported, [str(x) for x in want], golden)

    if c.kind in PRODUCT_KINDS:
        from graders.capped import product_check

        return product_check(c, got, want, golden, products, inputs)

    if c.kind == "sign":
        g, w = _sign(got), _sign(want)
        if g is None or w is None:
            return 0.0, f"cannot read a sign from {got!r}"
        return float(g == w), f"sign {g} vs golden {w}"

    return 0.0, f"unknown check kind {c.kind}"


def _numeric_map(m: dict) -> dict[str, float]:
    out = {table_key(k): as_number(v) for k, v in m.items()}
    return {k: v for k, v in out.items() if v is not None}


def _spearman(table: dict[str, float], gold: dict[str, float], keys: list[str]) -> float:
    from scipy.stats import spearmanr

    if len(keys) < 3:
        return 0.0
    rho = spearmanr([table[k] for k in keys], [gold[k] for k in keys]).statistic
    return float(rho) if rho == rho else 0.0


def evaluate_product(c: Check, got: Any, want: Any, golden: dict[str, Any], products: Any,
                     inputs: Any = None) -> tuple[float, str]:
    """A product check's credit, run in the capped worker (graders.capped): the product's compression is read from
    its bytes and refused unless the validator registered it; every reader bounds what it inflates. A `lines` product
    that is a corrected copy of one of the world's files (`inputs`) is read as the records the correction changed:
    the L1 prompt offers "a list of the affected items, or a corrected copy of the affected data file"."""
    from graders.product_io import ProductRefused, check_compression, compression_of

    path, why = product_path(None if products is None else Path(products), got)
    if path is None:
        return 0.0, why
    original = None  # the world file a `lines` product is a corrected copy of
    if c.kind == "product_items" and isinstance(want, list) and inputs is not None:
        files = _world_files(Path(inputs))
        original = original_of(path, files)
        listed = {str(p.relative_to(inputs)) for p in files}
        if original is not None and any(str(x) in listed for x in want):
            # the list names files: a corrected copy names the file it copies (read by name, not content: a
            # salvaged BAM is a copy in the original format), and the corrected copies of the same format beside it
            # name theirs (one `output` path, two relabelled BAMs written side by side for a swap)
            named = sorted(_copied_files(path, original, files, Path(inputs)))
            credit, detail = _f1_credit(c, named, [str(x) for x in want], golden)
            return credit, f"{why}: a corrected copy of {', '.join(named)}: {detail}"
    accepted = ()
    if original is not None:  # a corrected copy in its original's own format: a bgzipped VCF copies a bgzipped VCF
        accepted = tuple(k for k in (compression_of(original),) if k and compression_of(path) == k)
    if c.kind == "product":
        from graders.registry import PRODUCT_VALIDATORS

        if c.validator in PRODUCT_VALIDATORS:
            accepted = tuple(getattr(PRODUCT_VALIDATORS.get(c.validator).fn, "accepts_compression", ()))
    try:
        check_compression(path, accepted)
    except ProductRefused as exc:
        return 0.0, f"{why}: {exc}"
    if c.kind == "product_items":
        if not isinstance(want, list):
            return 0.0, f"golden {c.golden} is not a list (rubric/golden mismatch)"
        credit, detail = _f1_credit(c, read_items(path, want), [str(x) for x in want], golden)
        if credit < 1.0 and original is not None:
            for reading in changed_record_readings(original, path, want):
                c2, d2 = _f1_credit(c, reading, [str(x) for x in want], golden)
                if c2 > credit:
                    credit, detail = c2, f"a corrected copy of {original.name}; the records it changes: {d2}"
        return credit, f"{why}: {detail}"
    if c.kind == "product_table":
        if c.universe is not None:
            return _universe_table_credit(c, path, why, want, get_path(golden, c.universe), _reference_answer(c, golden))
        credit, detail = _table_credit(c, path, why, want, _reference_answer(c, golden))
        for alt in c.also:  # the same quantity under another standard definition: the better fit counts
            other = get_path(golden, alt)
            if credit < 1.0 and isinstance(other, dict) and other:
                c2, d2 = _table_credit(c, path, why, other, _reference_answer(c, golden))
                if c2 > credit:
                    credit, detail = c2, f"{d2} (against {alt}, the other standard definition)"
        return credit, detail
    from graders.registry import PRODUCT_VALIDATORS

    if c.validator not in PRODUCT_VALIDATORS:
        return 0.0, f"no product validator '{c.validator}' is registered (rubric error)"
    try:
        credit, detail = PRODUCT_VALIDATORS.get(c.validator).fn(path, golden, c)
    except ProductRefused as exc:
        return 0.0, f"{why}: {exc}"
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - an unreadable product is an outcome
        return 0.0, f"{why}: could not be read ({type(exc).__name__}: {str(exc)[:200]})"
    return float(max(0.0, min(1.0, credit))), f"{why}: {detail}"


MIN_RANK_KEYS = 5  # fewest keys a Spearman check of a universe table is read over


def _universe_table_credit(c: Check, path: Path, rel: str, want: Any, universe: Any, reference: Any) -> tuple[float, str]:
    """A table whose rows are the analysis's own choice within a true set (the genes in the true domains, found by
    the analyst's domain caller): credit when it holds as much of the universe as the reference does (less
    bar_slack, at most min_coverage) and its values on those keys agree with the reference's value at each key."""
    if not isinstance(want, dict) or not want or not isinstance(universe, list) or not universe:
        return 0.0, f"golden {c.golden} or {c.universe} is missing or empty (rubric/golden mismatch)"
    table, why = read_table(path, c.key or "", c.column or "")
    if table is None:
        return 0.0, f"{rel}: {why}"
    gold = _numeric_map(want)
    u = {table_key(k) for k in universe} & set(gold)
    shared = sorted(u & set(table))
    ref = _numeric_map(reference) if isinstance(reference, dict) else {}
    need_cov = reference_bar(c, c.min_coverage, len(u & set(ref)) / len(u) if u else None)
    coverage = len(shared) / len(u) if u else 0.0
    parts = [f"{rel}: {len(shared)}/{len(u)} genes of the true set present (need {need_cov:.2f}, the reference's "
             f"{len(u & set(ref))})"]
    # a rank correlation over a handful of genes says nothing: where the reference itself holds fewer than
    # MIN_RANK_KEYS of the true set (a draw whose domains are barely callable), the values alone are judged
    few = len(u & set(ref)) < MIN_RANK_KEYS
    ok = _table_values(c, table, gold, shared, parts, share_over=len(shared), whose="their values",
                       need_rho=-1.0 if few else None,
                       rho_note=f" (not required: the reference holds fewer than {MIN_RANK_KEYS} of the true set)" if few else "")
    return float(coverage >= need_cov - 1e-12 and ok), "; ".join(parts)


def _table_credit(c: Check, path: Path, rel: str, want: Any, reference: Any = _MISSING) -> tuple[float, str]:
    if not isinstance(want, dict) or not want:
        return 0.0, f"golden {c.golden} is not a non-empty mapping (rubric/golden mismatch)"
    table, why = read_table(path, c.key or "", c.column or "")
    if table is None:
        return 0.0, f"{rel}: {why}"
    gold = _numeric_map(want)
    shared = sorted(set(gold) & set(table))
    coverage = len(shared) / len(gold) if gold else 0.0
    ref = _numeric_map(reference) if isinstance(reference, dict) else None
    ref_shared = sorted(set(gold) & set(ref)) if ref is not None else []
    need_cov = reference_bar(c, c.min_coverage, len(ref_shared) / len(gold) if ref is not None and gold else None)
    parts = [f"{rel}: {len(shared)}/{len(gold)} golden keys present" + (f" (need {need_cov:.2f})" if ref is not None else "")]
    need_rho = None
    if c.min_spearman is not None:
        need_rho = reference_bar(c, c.min_spearman, _spearman(ref, gold, ref_shared) if ref is not None else None)
    ok = _table_values(c, table, gold, shared, parts, share_over=len(gold), need_rho=need_rho,
                       rho_note=" against the truth" if ref is not None else "")
    return float(coverage >= need_cov - 1e-12 and ok), "; ".join(parts)


def _table_values(c: Check, table: dict[str, float], gold: dict[str, float], shared: list[str], parts: list[str],
                  share_over: int, need_rho: float | None = None, rho_note: str = "", whose: str = "values") -> bool:
    """The value checks of a product table on its `shared` keys: Spearman against `gold` (bar `need_rho`, else
    min_spearman) and the share of values within tolerance, counted over `share_over` keys. Appends their details
    to `parts`; True when both hold."""
    ok = True
    if c.min_spearman is not None:
        need = c.min_spearman if need_rho is None else need_rho
        rho = _spearman(table, gold, shared)
        parts.append(f"Spearman {rho:.3f} (need {need:.2f}){rho_note}")
        ok = rho >= need - 1e-12
    if c.min_share is not None:
        within = sum(_within(table[k], gold[k], c.rel_tol, c.abs_tol) for k in shared)
        share = within / share_over if share_over else 0.0
        parts.append(f"{share:.2f} of {whose} within tolerance (need {c.min_share:.2f})")
        ok = ok and share >= c.min_share - 1e-12
    return ok
