"""One scaffold for the tracks: what every track's scripted agents (`scripted.py`) and grounding host
(`grounding.py`) share, so that a track keeps only what is its own (its analysis, its defects' wording, its data and
its statistics). `duplicates` lists no pair within worlds/*/scripted.py or worlds/*/grounding.py: what two tracks would
write alike belongs here.

Scripted agents (gold side; benchmark.suite.registry `oracle` / `naive`):
  scripted(family, oracle=..., naive=...)   registers a family's two solutions at once; each is a list of cells (text,
                                            or a function () -> text, built when the solution is asked for) or a
                                            function (world ref) -> cells.
  switched(families, first)                 the oracle and the naive agent run the same second cell, told apart by
                                            `NAIVE = False / True` at its top; `first` is the helpers cell.
  module_cell(module)                       a track's analysis module as source text, the helpers cell.
  accepting_cell(path, noun)                the naive agent's L1 cell: reads one table and accepts it.
  L1_KIT                                    cell text every L1 oracle starts with: `write_lines`, `issue` (one entry of
                                            the report's issues, in the family's field order) and `l1_report` (the
                                            final JSON line).
  l1_oracle_cell(__file__, helpers)         the L1 oracle's cell, written from the track's scripted.yaml (its issue
                                            per defect: wording as data, values and products as expressions).
  WRITE_LINES                               cell text: `write_lines(name, items)`, a listed work product.
  L2_KIT                                    `found(cond, text)`: an issue an L2 cell's check finds.

Grounding hosts (benchmark.grounding.host.GroundingHost):
  SubstrateHost    a host with no datasets: every item reads the whole substrate (`substrate()`).
  TableHost        a SubstrateHost whose data is one table, written as one tab-separated file and meta.json.
  Table            one version of a TableHost's data.
  table_source     the head of a TableHost's stat_source: `load`, `highest` and `mean_of`.
  BINS_SOURCE      stat-source text: `in_bins(spec, options, n)`, options that are ranges of one count.
  dropping, swapping                          a TableHost's withdrawal and flip operations on selected rows.
  require, dropped_still_named, ids_survive   the refusals and substrate checks the hosts share.

Nothing here knows a track by name, and a track that does without it is as valid (tests/test_new_track.py). The
grounding build fingerprints the modules of a host's classes, this one included (benchmark/grounding/build.py)."""
from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict

from benchmark.errors import BenchmarkError
from benchmark.grounding.host import GroundingHost
from benchmark.suite import registry
from benchmark.suite.canonical import CanonicalWriter
from benchmark.suite.loader import read_yaml, validate
from graders.grounding import files_mentioning

# ---------------------------------------------------------------- scripted agents

Cells = Sequence[str | Callable[[], str]] | Callable[[Any], list[str]]


def _solution(cells: Cells) -> Callable[[Any], list[str]]:
    if callable(cells):
        return cells
    fixed = tuple(cells)

    def solution(ref) -> list[str]:
        return [c if isinstance(c, str) else c() for c in fixed]

    return solution


def scripted(family: str, oracle: Cells, naive: Cells, versions: tuple[str, str] = ("1", "1")) -> None:
    """Register the oracle's and the naive agent's solution of one family (versions: oracle's, naive's)."""
    registry.oracle(family, version=versions[0])(_solution(oracle))
    registry.naive(family, version=versions[1])(_solution(naive))


def switched(families: dict[str, str], first: Callable[[], str], versions: tuple[str, str] = ("1", "1")) -> None:
    """Per family, one second cell for both agents: the oracle's starts with `NAIVE = False`, the naive agent's with
    `NAIVE = True`."""
    for family, body in families.items():
        scripted(family, [first, f"NAIVE = {False!r}\n" + body], [first, f"NAIVE = {True!r}\n" + body], versions)


def module_cell(module: ModuleType, loaded: str = "analysis loaded") -> str:
    """A helpers cell: the module's source text (it imports only the standard library and the sandbox's packages),
    then a line saying it loaded."""
    return inspect.getsource(module) + f"\nprint({loaded!r})\n"


def accepting_cell(path: str, noun: str, var: str = "t", read_args: str = "") -> str:
    """The naive agent's L1 cell: reads one table with pandas, prints its summary and accepts it as it comes."""
    return ("\nimport json\nimport pandas as pd\n"
            f"{var} = pd.read_csv({path!r}{read_args})\nprint({var}.describe())\n"
            "print(json.dumps({'assessment': 'usable', 'issues': [], 'summary': f'{len(" + var + ")} " + noun
            + " loaded; looks fine.'}))\n")


WRITE_LINES = r"""
def write_lines(name, items):
    Path(name).write_text(''.join(f'{x}\n' for x in items))
    return name
"""
"""Cell text: `write_lines(name, items)` writes one item a line and returns the path, a work product's."""

L1_KIT = WRITE_LINES + r"""

issues = []


def issue(category, severity, where, value, description, action, output):
    issues.append({'category': category, 'severity': severity, 'where': where, 'value': value,
                   'description': description, 'action': action, 'output': output})


def l1_report(problems, clean, unusable=False):
    summary = (problems + ', '.join(i['category'] for i in issues)) if issues else clean
    assessment = 'unusable' if unusable else 'usable_with_caveats' if issues else 'usable'
    print(json.dumps({'assessment': assessment, 'issues': issues, 'summary': summary}))
"""


class L1Issue(BaseModel):
    """One defect's issue in the L1 oracle's report. category, where, description and action are f-string text (they
    may read the cell's names: `v`, the detector's values; `f`, its findings); value and output are Python expressions
    (output: the path of the work product the action wrote, or None)."""

    model_config = ConfigDict(extra="forbid")
    category: str
    severity: Literal["info", "warning", "blocking"]
    where: str
    value: str
    description: str
    action: str
    output: str = "None"


class L1Oracle(BaseModel):
    """The L1 oracle around its issues: how it runs the detector (`detect`, Python statements that set `v`, its
    values, and `f`, its findings), what it prints after the findings (`shows`, Python expressions; nothing printed
    when absent), the summary's lead-in when it found issues (`problems`, then their categories), its summary when it
    found none (`clean`, f-string text) and when the data are unusable (`unusable`, a Python expression; else usable
    with caveats when there are issues)."""

    model_config = ConfigDict(extra="forbid")
    detect: str = "v = detect('.')\nf = v['findings']"
    shows: str | None = None
    problems: str
    clean: str
    unusable: str = "False"


class ScriptedSpec(BaseModel):
    """A track's scripted.yaml: its L1 oracle, and its issue per defect in report order."""

    model_config = ConfigDict(extra="forbid")
    l1_oracle: L1Oracle
    l1_issues: dict[str, L1Issue]


def _text(t: str) -> str:
    """f-string text as a Python expression."""
    if "{" not in t:
        return repr(t)
    q = next((q for q in ('"', "'") if q not in t), '"""')
    return f"f{q}{t}{q}"


def _call(head: str, args: list[str], width: int = 120) -> str:
    """`head` + the arguments, wrapped at `width` under the first one."""
    lines, cur = [], head
    for k, a in enumerate(args):
        tok = a + (")" if k == len(args) - 1 else ",")
        if cur.endswith("(") or len(cur) + 1 + len(tok) <= width:
            cur += ("" if cur.endswith("(") else " ") + tok
        else:
            lines.append(cur)
            cur = " " * len(head) + tok
    return "\n".join(lines + [cur])


def l1_spec(track_file: str) -> ScriptedSpec:
    """The scripted.yaml beside a track's scripted.py (`__file__`)."""
    path = Path(track_file).with_name("scripted.yaml")
    data, node = read_yaml(path)
    return validate(ScriptedSpec, data, path, node)


def l1_oracle_cell(track_file: str, helpers: str = "") -> Callable[[], str]:
    """The L1 oracle's cell: L1_KIT, the detector's run (`v`, its values; `f`, its findings), the track's `helpers`
    (what its issues call: corrective actions, derived texts), an issue per found defect and the report, as the
    track's scripted.yaml says."""

    def cell() -> str:
        spec = l1_spec(track_file)
        o = spec.l1_oracle
        shown = f"print('findings', f, {o.shows})\n" if o.shows else ""
        out = [L1_KIT, o.detect.rstrip("\n") + "\n" + shown, helpers + ("\n" if helpers and not helpers.endswith("\n") else "")]
        for code, i in spec.l1_issues.items():
            args = [_text(i.category), repr(i.severity), _text(i.where), i.value, _text(i.description), _text(i.action),
                    i.output]
            out.append(f"if {code!r} in f:\n" + _call("    issue(", args) + "\n")
        unusable = [f"unusable={o.unusable}"] if o.unusable != "False" else []
        out.append(_call("l1_report(", [repr(o.problems), _text(o.clean)] + unusable) + "\n")
        return "".join(out)

    return cell


L2_KIT = r"""
issues = []


def found(cond, text):
    if cond:
        issues.append(text)
"""
"""Cell text an L2 cell may start with: `found(cond, text)` lists the issue `text` in `issues` when a check finds it
(`cond`; a switched cell's naive agent finds none: `not NAIVE and ...`). `text` is built either way."""


# ---------------------------------------------------------------- grounding hosts

def require(mask: pd.Series, what: str) -> pd.Series:
    """The mask, refused when it selects nothing (an item names `what`, which the data must hold)."""
    if not mask.any():
        raise BenchmarkError(f"{what} has no row in the data")
    return mask


def dropped_still_named(cls: str, root: Path, what: str, name: str) -> list[str]:
    """A withdrawal version's problem when the entity it removed is still named in one of its files."""
    hits = files_mentioning(root, name)
    return [f"{cls}: dropped {what} {name} still appears in {', '.join(hits)}"] if hits else []


def ids_survive(cls: str, before: Iterable[str], after: Iterable[str], what: str) -> list[str]:
    """A null version's problem when an original identifier survives its relabelling."""
    return [f"{cls}: original {what} survive"] if cls == "null" and set(before) & set(after) else []


class SubstrateHost(GroundingHost):
    """A host without datasets: every item's original version is the whole substrate."""

    def substrate(self) -> Any:
        """The substrate as this host's data, a fresh copy."""
        raise NotImplementedError

    def base_data(self, dataset: str | None, datasets: dict) -> Any:
        if dataset is not None:
            track = next(n for n in registry.GROUNDING_HOSTS.names() if registry.GROUNDING_HOSTS.get(n).fn is type(self))
            raise BenchmarkError(f"the {track} grounding host has no datasets (item names {dataset!r})")
        return self.substrate()


def dropping(rows: Callable[..., pd.Series]) -> Callable[..., Any]:
    """A withdrawal operation: removes the rows `rows(d, **params)` selects (the item's parameters name them)."""

    def op(d: Table, rng, **params) -> Table:
        return type(d)(d.table[~rows(d, **params)].reset_index(drop=True))

    return op


def swapping(rows: Callable[[Any, str], pd.Series], columns: Sequence[str],
             then: Callable[[pd.DataFrame], Any] | None = None) -> Callable[..., Any]:
    """A flip operation on items naming `a` and `b`: the rows `rows(d, a)` selects take the values of `columns` that
    the rows of `b` hold, and the reverse (then `then(table)` rebuilds what depends on them)."""

    def op(d: Table, rng, a: str, b: str) -> Table:
        t = d.table.copy()
        ma, mb = rows(d, a), rows(d, b)
        for c in columns:
            va, vb = d.table.loc[ma, c].iloc[0], d.table.loc[mb, c].iloc[0]
            t.loc[ma, c], t.loc[mb, c] = vb, va
        return then(t) if then else type(d)(t)

    return op


@dataclass
class Table:
    """One version of a TableHost's data: the table, one row per measured entity."""

    table: pd.DataFrame


class TableHost(SubstrateHost):
    """A host whose data is one table, written sorted as `table_file` (tab-separated) beside meta.json.

    Its null version permutes the rows and renames `null_ids` = (column, format of the i-th opaque identifier)."""

    table_file: ClassVar[str]
    columns: ClassVar[Sequence[str]]
    """The columns written, in order (`written_columns` may choose them from the table instead)."""
    sort_by: ClassVar[str | list[str]]
    float_format: ClassVar[str]
    null_ids: ClassVar[tuple[str, str]]

    def meta(self, t: pd.DataFrame) -> dict:
        """meta.json of the version whose sorted table is `t`."""
        raise NotImplementedError

    def written_columns(self, t: pd.DataFrame) -> list[str]:
        return list(self.columns)

    def permuted(self, d: Table, rng) -> pd.DataFrame:
        return d.table.iloc[rng.permutation(len(d.table))].reset_index(drop=True)

    def null(self, d: Table, rng) -> Table:
        t = self.permuted(d, rng)
        col, fmt = self.null_ids
        t[col] = [fmt.format(i + 1) for i in range(len(t))]
        return type(d)(t)

    def write_version(self, d: Table, root: Path) -> list[str]:
        w = CanonicalWriter(root)
        t = d.table.sort_values(self.sort_by, kind="stable").reset_index(drop=True)
        w.table(self.table_file, t[self.written_columns(t)], sep="\t", float_format=self.float_format)
        w.json("meta.json", self.meta(t))
        return sorted(w.written)


BINS_SOURCE = r'''

def in_bins(spec, options, n):
    """{letter: minus the distance of the count n from the option's range spec["bins"][letter] = [lo, hi] (0 inside
    it)}, every value None when n is None: the option whose range holds n wins."""
    return {letter: None if n is None else float(-max(spec["bins"][letter][0] - n, n - spec["bins"][letter][1], 0))
            for letter in options}
'''
"""Stat-source text for a statistic whose options are ranges of one count (appended to a host's stat_source)."""


def table_source(table: str, text_columns: Sequence[str], required: Sequence[str], imports: str = "") -> str:
    """The head of a TableHost's stat_source: its imports, TABLE, `load(root)` (the table read back, refused without
    the columns the statistic reads), `highest(spec, options, value_of)` (the answer `decide` gives over the options'
    values, where value_of returns a number or the text saying what is missing) and `mean_of(rows, what)`."""
    dtypes = "{" + ", ".join(f'"{c}": str' for c in text_columns) + "}"
    return f'''
{imports}import os
import pandas as pd

TABLE = "{table}"


def load(root="."):
    """{table} as a DataFrame."""
    tab = pd.read_csv(os.path.join(root, TABLE), sep="\\t", dtype={dtypes})
    for c in {tuple(required)!r}:
        if c not in tab.columns:
            raise ValueError(f"{{TABLE}}: expected a column {{c}}")
    return tab


def highest(spec, options, value_of):
    """decide() over value_of(option) for every option, highest wins: a number, or the text saying what is missing."""
    values, missing = {{}}, []
    for letter, opt in options.items():
        x = value_of(opt)
        values[letter] = None if isinstance(x, str) else x
        missing += [x] if isinstance(x, str) else []
    return decide(values, missing, float(spec["margin"]), "max")


def mean_of(rows, what):
    """The mean of `rows`, or the text saying `what` has no row."""
    return f"{{what}}: no row in {{TABLE}}" if len(rows) == 0 else float(rows.mean())

'''
