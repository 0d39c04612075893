"""Render a world's `pivotal:` block (graders.manifest.PivotalBlock) against its golden values.

Text fields are `str.format` templates over `g` (the golden's `values` dict) and `w` (the world manifest). A format
spec is a `|`-separated pipeline: each step is one of the operations below (applied to the value) or, if it names
none, an ordinary format spec (`+.2f`, `,`, `.0f`) that turns the value into text.

    fc          signed log2 fold change with two decimals, never '-0.00'        -0.004 -> +0.00
    pct         a fraction as a whole percentage                                 0.253 -> 25%
    kb / kb(N)  base pairs as kb, one (or N) decimals                            1000 -> 1.0
    span        a region's length, end - start                                   {start: 5, end: 9} -> 4
    div(N)      integer division                                                 6 -> 3
    head(N)     the first N items of a list
    minus(KEY)  the items of a list that are not in the golden list g[KEY]
    only(A,B)   the items of a list that are one of A, B, ... (list order kept)
    pairs(OP)   a mapping as 'key value' items, each value through OP            {S1: 0.5} -> [S1 50%]
    argmax      the key of a mapping's largest value (first on ties)
    max         a mapping's largest value (or a list's)
    join        a list as 'a, b, c' (join(SEP): SEP between items)
    or(TEXT)    TEXT when the value is empty                                     join|or(nothing)

e.g. "{g[naive_cell_level_top]:head(5)|join}", "{g[target_fraction_by_lane]:max|pct}", "{g[global_log2fc]:fc}".
A missing golden key (or index, or attribute of w) raises BenchmarkError naming the manifest file, the field
(`pivotal.record`, `pivotal.evidence.0`) and what is missing.
"""
from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any, Callable

from benchmark.errors import BenchmarkError

TEXT_FIELDS = ("record", "original_plan", "corrected_plan")


def fc(x: float) -> str:
    """A signed log2 fold change with two decimals, never '-0.00'."""
    v = round(x, 2)
    return f"{0.0 if v == 0 else v:+.2f}"


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _kb(x, arg: str | None) -> str:
    return f"{x / 1000:.{int(arg) if arg else 1}f}"


def _join(x, arg: str | None) -> str:
    return (", " if arg is None else arg).join(str(i) for i in x)


def _pairs(x, arg: str | None, fmt: "PivotalFormatter") -> list[str]:
    return [f"{k} {fmt.pipeline(v, arg) if arg else v}" for k, v in x.items()]


def _max(x):
    return max(x.values()) if isinstance(x, dict) else max(x)


OPS: dict[str, Callable[..., Any]] = {
    "fc": lambda x, a, f: fc(x),
    "pct": lambda x, a, f: pct(x),
    "kb": lambda x, a, f: _kb(x, a),
    "span": lambda x, a, f: x["end"] - x["start"],
    "div": lambda x, a, f: x // int(a),
    "head": lambda x, a, f: list(x)[: int(a)],
    "minus": lambda x, a, f: [i for i in x if i not in f.lookup(a)],
    "only": lambda x, a, f: [i for i in x if i in [s.strip() for s in a.split(",")]],
    "pairs": _pairs,
    "argmax": lambda x, a, f: max(x, key=lambda k: x[k]),
    "max": lambda x, a, f: _max(x),
    "join": lambda x, a, f: _join(x, a),
    "or": lambda x, a, f: x if x else a,
}
_STEP = re.compile(r"^([a-z]+)(?:\((.*)\))?$", re.S)


class _Missing(Exception):
    def __init__(self, what: str):
        self.what = what


class PivotalFormatter(string.Formatter):
    """`str.format` with the operations above; holds g so that `minus(KEY)` can read another golden list."""

    def __init__(self, g: dict):
        self.g = g

    def lookup(self, key: str):
        if key not in self.g:
            raise _Missing(f"golden key '{key}'")
        return self.g[key]

    def get_field(self, field_name, args, kwargs):
        try:
            return super().get_field(field_name, args, kwargs)
        except KeyError as exc:
            k = exc.args[0] if exc.args else field_name
            raise _Missing(f"golden key '{k}'" if field_name.startswith("g[") else f"name '{k}' (use g[...] or w....)") from None
        except IndexError:
            raise _Missing(f"item of '{field_name}' (the list is shorter)") from None
        except AttributeError as exc:
            raise _Missing(f"attribute in '{field_name}' ({exc})") from None
        except TypeError as exc:
            raise _Missing(f"'{field_name}' ({exc})") from None

    def pipeline(self, value, spec: str):
        for step in spec.split("|") if spec else []:
            m = _STEP.match(step)
            if m and m.group(1) in OPS:
                value = OPS[m.group(1)](value, m.group(2), self)
            else:
                value = format(value, step)
        return value

    def format_field(self, value, format_spec):
        try:
            return format(self.pipeline(value, format_spec), "")
        except _Missing:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
            raise _Missing(f"a value that format spec '{format_spec}' can handle ({type(exc).__name__}: {exc})") from None


def render_text(template: str, g: dict, w: Any, path: Path | str, field: str) -> str:
    """One field of a block, rendered; errors name file and field."""
    try:
        return PivotalFormatter(g).format(template, g=g, w=w)
    except _Missing as exc:
        raise BenchmarkError(f"{path}: field '{field}': the template needs {exc.what}, which the golden lacks"
                             if exc.what.startswith("golden key") else f"{path}: field '{field}': the template needs {exc.what}") from None
    except (ValueError, IndexError) as exc:  # malformed template: unbalanced braces, bad field name
        raise BenchmarkError(f"{path}: field '{field}': not a valid template ({exc})") from None


def render_block(block, g: dict, w: Any, path: Path | str) -> dict:
    """The block's text fields (and evidence list) rendered with g and w; categories as written."""
    out: dict[str, Any] = {"categories": list(block.categories)}
    for name in TEXT_FIELDS:
        out[name] = render_text(getattr(block, name), g, w, path, f"pivotal.{name}")
    out["evidence"] = [render_text(e, g, w, path, f"pivotal.evidence.{i}") for i, e in enumerate(block.evidence)]
    return out
