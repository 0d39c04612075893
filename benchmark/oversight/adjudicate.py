"""The human side of verification: list pending discrepancies with their evidence, record rulings, validate ledgers."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from benchmark.errors import BenchmarkError, ManifestError
from benchmark.oversight.ledger import (LEDGER_ROOT, MAX_REASON_CHARS, Ledger, Ruling, append_ruling, append_rulings, cross_file_contradictions,
                              effective_rulings, ledger_paths, ledgers_version, load_ledger)
from benchmark.suite.loader import _line_of, load_suite, read_yaml
from benchmark.run.store import RunStore, result_key
from benchmark.oversight.verify import Discrepancy, load_verifications
from graders.manifest import L1World


@dataclass
class PendingItem:
    run: str
    key: str
    world_id: str
    replicate: int
    model: str
    discrepancy: Discrepancy
    verifier_model: str
    verifier_reason: str
    rubric: str
    report: str
    evidence: str


def load_ledgers(paths: list[Path] | None = None) -> list[Ledger]:
    """The adjudication ledgers of these files (None: every ledgers/*.yaml; an empty list: none)."""
    return [led for p in (ledger_paths() if paths is None else paths) for led in [load_ledger(p)] if isinstance(led, Ledger)]


def pending(run_dir: Path, ledgers: list[Ledger] | None = None) -> list[PendingItem]:
    store = RunStore(run_dir)
    run_id = store.run_id()
    records = {result_key(r.world_id, r.replicate): r for r in store.results()}
    rulings = effective_rulings(ledgers if ledgers is not None else load_ledgers())
    suite = load_suite()
    items = []
    for v in load_verifications(run_dir):
        rec = records.get(v.key)
        if rec is None:
            continue
        for d in v.discrepancies:
            if (run_id, v.world_id, v.replicate, d.component) in rulings:
                continue
            ref = suite.worlds[v.world_id]
            traj = store.load_trajectory(rec.trajectory)
            if rec.level == "L3":
                rubric, report, evidence = _l3_evidence(ref, traj)
            else:
                cells = traj.cells[-2:]
                evidence = "\n".join(f"[code step {c.step}]\n{c.code[:1200]}\n[output]\n{(c.stdout + (c.error or ''))[:1200]}" for c in cells)
                checks = getattr(ref.world.rubric, "checks", None) or getattr(ref.world.rubric, "actions", [])
                lines = "\n".join(f"- {c.id} ({c.component or 'action'}): {c.why or c.kind}" for c in checks)
                rubric = f"expected: {ref.world.expected_response}" + (f"\n{lines}" if lines else "")
                report = (traj.report_raw or "(no report)")[:3000]
                evidence = evidence or "(no code was run)"
            items.append(PendingItem(run_id, v.key, v.world_id, v.replicate, rec.model, d, v.verifier_model, v.reason,
                                     rubric, report, evidence))
    return items


def _l3_evidence(ref, traj) -> tuple[str, str, str]:
    """What an adjudicator of an L3 axis or gate needs: the rubric, the FINAL answer after the review rounds (not
    the first report), the prior and gate reason, and the judge's reasons with each draw's axes (not code cells)."""
    import json

    l3 = traj.l3 if isinstance(traj.l3, dict) else {}
    rub = ref.world.rubric
    rubric = (f"expected act: {ref.world.expected_act}\nD (evidence fidelity): {rub.evidence_fidelity}\n"
              f"N (novelty): {rub.novelty}\nabstention justified when: {rub.abstention}")
    final = l3.get("final_answer")
    report = json.dumps(final, indent=1, ensure_ascii=False)[:4000] if final else (traj.report_raw or "(no answer)")[:3000]
    lines = [f"prior: {json.dumps(l3.get('prior'), ensure_ascii=False)[:1200]}",
             f"gate: {'eligible' if l3.get('eligible') else 'ineligible'}: {str(l3.get('eligibility_reason') or '')[:1200]}",
             f"commitment: {l3.get('commitment')}; judge median axes: {json.dumps(l3.get('axes'))}"]
    for i, d in enumerate(l3.get("judge_draws") or []):
        axes = {k: d.get(k) for k in ("D", "prior_awareness", "causal_calibration", "response_to_critique",
                                      "scientific_humility", "citation_integrity", "N", "abstention_justified")}
        lines.append(f"[judge draw {i}] {json.dumps(axes)}\nreason: {str(d.get('reason') or '')[:1500]}")
    if not l3.get("judge_draws"):
        lines.append("(no judge draw was parsed)")
    return rubric, report, "\n".join(lines)


def _check_state_fits(world: str, state: str, then: str) -> None:
    """Refuse an L1 state the world's kind cannot have (graders.l1.state_misfit), naming the states it allows."""
    from graders.l1 import STATE_SCORES, state_misfit

    ref = load_suite().worlds.get(world)
    if ref is None or not isinstance(ref.world, L1World) or state not in STATE_SCORES:
        return  # an unknown world or state is named by the ruling's own checks
    why = state_misfit(ref.world, state)
    if why:
        raise BenchmarkError(f"the ruling cannot be recorded: {why} ({then})")


def prepare_ruling(run_dir: Path, ledger_path: Path, world: str, component: str, ruling: str, adjudicator: str,
                   rationale: str, replicate: int = 0, date: dt.date | None = None,
                   supersedes: int | None = None) -> Ruling:
    """Every check a ruling passes before it is written (the CLI's `ledger rule` and the web view share it): the
    run has the result, the value parses and is in range for the component, and no other ledger file in the same
    folder rules differently on the same key. Nothing is written."""
    store = RunStore(run_dir)
    recs = {result_key(r.world_id, r.replicate): r for r in store.results()}
    key = result_key(world, replicate)
    if key not in recs:
        raise BenchmarkError(f"run {run_dir} has no result for world '{world}' replicate {replicate}")
    rec = recs[key]
    ver = [v for v in load_verifications(run_dir) if v.key == key]
    disc = next((d for v in ver for d in v.discrepancies if d.component == component), None)
    det = disc.deterministic if disc else _deterministic(rec, component)
    if det is None and component in ("D", "Q", "N", "eligible"):
        raise BenchmarkError(f"world '{world}' replicate {replicate} has no recorded '{component}' value to rule on "
                             f"(status {rec.status}); rule on 'score' instead, or rerun it with `run --resume`")
    if component in ("state", "eligible"):
        value: float | str = ruling
        if component == "state":
            _check_state_fits(world, ruling, f"nothing was written to {ledger_path}")
    else:
        try:
            value = float(ruling)
        except ValueError:
            rng = {"score": "0-100", "D": "0-3", "Q": "0-3", "N": "0-3"}.get(component, "0-1")
            raise BenchmarkError(f"--ruling '{ruling}' is not a number; a '{component}' ruling is {rng}") from None
    try:
        r = Ruling(id=1, run=store.run_id(), model=rec.model, world=world, replicate=replicate, component=component,
                   deterministic=det, verifier=disc.verifier if disc else None,
                   verifier_reason=(ver[-1].reason or "")[:MAX_REASON_CHARS] if ver else "", ruling=value, adjudicator=adjudicator,
                   date=date or dt.date.today(), rationale=rationale, supersedes=supersedes)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        msg = msg.split("@", 2)[-1] if msg.startswith("@") else msg
        where = ".".join(str(x) for x in err["loc"]) or "ruling"
        raise BenchmarkError(f"the ruling cannot be recorded: field '{where}': {msg}; nothing was written to {ledger_path}") from None
    for other in sorted(Path(ledger_path).parent.glob("*.yaml")):  # the same key ruled differently in another file
        if other.resolve() == Path(ledger_path).resolve():
            continue
        led = load_ledger(other)
        for i, e in enumerate(led.entries if isinstance(led, Ledger) else []):
            if e.key() == r.key() and e.ruling != r.ruling and not any(x.supersedes == e.id for x in led.entries):
                raise BenchmarkError(f"{led.where(i)}: ruling {e.id} already rules {e.ruling!r} on this run, world, "
                                     f"replicate and component; record the new ruling in {other} with --supersedes {e.id} "
                                     f"(nothing was written to {ledger_path})")
    return r


def rule(run_dir: Path, ledger_path: Path, world: str, component: str, ruling: str, adjudicator: str, rationale: str,
         replicate: int = 0, date: dt.date | None = None, supersedes: int | None = None) -> Ruling:
    """Validate one ruling (prepare_ruling) and append it to the ledger file atomically."""
    r = prepare_ruling(run_dir, ledger_path, world, component, ruling, adjudicator, rationale, replicate, date, supersedes)
    return append_ruling(ledger_path, r)


class LedgerConflict(BenchmarkError):
    """The ledgers changed since the adjudicator looked at them, or the result is already ruled: nothing written."""


@dataclass
class Draft:
    """One component of a ruling form: the value to record and, when it replaces a ruling in force, that id."""

    component: str
    ruling: str
    supersedes: int | None = None


@dataclass
class InForce:
    """A ruling in force on a result, with the ledger file that holds it."""

    ruling: Ruling
    path: Path
    where: str


def rulings_in_force(ledger_dir: Path, run_id: str, world: str, replicate: int) -> list[InForce]:
    """The rulings in force on one (run, world, replicate), over every adjudication ledger of a folder."""
    out: dict[str, InForce] = {}
    for p in ledger_paths(ledger_dir) if Path(ledger_dir).is_dir() else []:
        led = load_ledger(p)
        if not isinstance(led, Ledger):
            continue
        for i, e in enumerate(led.entries):
            if (e.run, e.world, e.replicate) == (run_id, world, replicate):
                out[e.component] = InForce(e, p, led.where(i))  # the last in a file supersedes the earlier ones
    return [out[c] for c in sorted(out)]


def record_rulings(run_dir: Path, ledger_path: Path, world: str, replicate: int, drafts: list[Draft],
                   adjudicator: str, rationale: str, expected_version: str, acknowledged: set[int] | None = None,
                   date: dt.date | None = None) -> list[Ruling]:
    """Record the rulings of one form submission, all or none, through the same checks as `ledger rule`.

    Refused (LedgerConflict, nothing written) when any ledger file of the folder changed since the form was rendered
    (`expected_version`: `ledgers_version` of the folder then), or when rulings are in force on this run, world and
    replicate that the adjudicator did not acknowledge (`acknowledged`: their ids as the form showed them). A draft
    on a component that has a ruling in force supersedes it (in the same file: `supersedes` works within one)."""
    if not drafts:
        raise BenchmarkError("the form names no component to rule on; choose a decision for at least one component")
    comps = [d.component for d in drafts]
    if len(set(comps)) != len(comps):
        raise BenchmarkError(f"the form rules twice on one component ({', '.join(comps)}); rule once per component")
    ledger_path, ledger_dir, acknowledged = Path(ledger_path), Path(ledger_path).parent, set(acknowledged or ())
    run_id = RunStore(run_dir).run_id()

    def conflicts() -> dict[str, InForce]:
        if ledgers_version(ledger_dir) != expected_version:
            raise LedgerConflict(f"the ledgers in {ledger_dir} changed since this page was rendered (another ruling was "
                                 "recorded or a file was edited); nothing was written: reload the page, read the "
                                 "rulings now in force and submit again")
        in_force = {f.ruling.component: f for f in rulings_in_force(ledger_dir, run_id, world, replicate)}
        for f in in_force.values():
            if f.ruling.id not in acknowledged:
                raise LedgerConflict(f"{f.where}: ruling {f.ruling.id} already rules {f.ruling.component} = "
                                     f"{f.ruling.ruling!r} on run {run_id}, world {world}, replicate {replicate}, and "
                                     "this submission does not acknowledge it; nothing was written: reload the page, "
                                     "read the rulings in force and confirm that yours add to or replace them")
            if f.ruling.component in comps and f.path.resolve() != ledger_path.resolve():
                raise LedgerConflict(f"{f.where}: ruling {f.ruling.id} on {f.ruling.component} is in {f.path.name}, and "
                                     f"a replacement must be recorded in that file ('supersedes' works within one file); "
                                     "nothing was written")
        return in_force

    in_force = conflicts()  # early, for a clear message and the ids to supersede; checked again under the lock
    prepared = []
    for d in drafts:
        f = in_force.get(d.component)
        if d.supersedes is not None and (f is None or d.supersedes != f.ruling.id):
            raise LedgerConflict(f"the form supersedes ruling {d.supersedes} on {d.component}, which is not the ruling "
                                 "in force; nothing was written: reload the page and submit again")
        prepared.append(prepare_ruling(run_dir, ledger_path, world, d.component, d.ruling, adjudicator, rationale,
                                       replicate, date, f.ruling.id if f else None))
    return append_rulings(ledger_path, prepared, before_write=conflicts)


def verification_progress(run_dir: Path) -> tuple[int, int]:
    """(verified, verifiable) results of a run: `verify` checks every L1/L2 result and every L3 dossier the judge
    scored; a partly verified run has discrepancies nobody has seen yet. An unparseable verifier answer checked
    nothing, so its result is not verified."""
    store = RunStore(run_dir)
    keys = {result_key(r.world_id, r.replicate) for r in store.results()
            if r.level in ("L1", "L2") or (r.level == "L3" and r.l3_axes)}
    done = {v.key for v in load_verifications(run_dir) if v.parsed}
    return len(keys & done), len(keys)


def resolve_ledger_args(paths: list[str]) -> list[Path]:
    """Ledger files named on a command line: folders are read for *.yaml, a shell glob that matched nothing (it stays
    literal, e.g. `ledgers/*.yaml` in a fresh clone) is dropped, and any other missing file is an error naming it."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out += ledger_paths(p)
        elif p.exists():
            out.append(p)
        elif not any(ch in raw for ch in "*?["):
            raise BenchmarkError(f"ledger file {p} does not exist; check the path (ledgers live in ledgers/*.yaml)")
    return out


def _deterministic(rec, component: str):
    """The recorded value a ruling replaces: the score, the L1 state, an L2 component, an L3 axis (the judge's
    median) or the prior gate. None when the record has no such value (e.g. a fault without a score)."""
    if component == "score":
        return rec.score
    if component == "state":
        return rec.grade.status if rec.grade else None
    if component in ("D", "Q", "N"):
        v = (rec.l3_axes or {}).get(component)
        return round(float(v), 6) if v is not None else None
    if component == "eligible":
        return None if rec.eligible is None else ("eligible" if rec.eligible and rec.status != "ineligible" else "ineligible")
    return (rec.grade.components or {}).get(component, 0.0) if rec.grade else 0.0


def known_run_ids(run_roots: list[Path]) -> set[str]:
    ids = set()
    for root in run_roots:
        for cfg in [root / "config.json", *root.glob("*/config.json")]:
            if cfg.exists():
                ids.add(RunStore(cfg.parent).run_id())
    return ids


def validate_ledgers(paths: list[Path] | None = None, run_roots: list[Path] | None = None) -> list[str]:
    """Problems in every ledger: schema, ids, contradictions, unknown worlds, unknown runs (when runs are given)."""
    problems = []
    suite = load_suite()
    runs = known_run_ids(run_roots) if run_roots else None
    loaded: list[Ledger] = []
    for p in paths or ledger_paths():
        try:
            led = load_ledger(p)
        except ManifestError as exc:
            problems.append(str(exc))
            continue
        if isinstance(led, Ledger):
            loaded.append(led)
        _, node = read_yaml(p)
        for i, e in enumerate(led.entries):
            if e.world not in suite.worlds:
                problems.append(str(ManifestError(p, f"entries.{i}.world", f"unknown world '{e.world}'", _line_of(node, ("entries", i, "world")))))
            elif e.component == "state" and isinstance(suite.worlds[e.world].world, L1World):
                from graders.l1 import state_misfit

                why = state_misfit(suite.worlds[e.world].world, str(e.ruling))
                if why:
                    problems.append(str(ManifestError(p, f"entries.{i}.ruling", why, _line_of(node, ("entries", i, "ruling")))))
            if runs is not None and e.run not in runs:
                problems.append(str(ManifestError(p, f"entries.{i}.run", f"unknown run '{e.run}' (known: {', '.join(sorted(runs)) or 'none'})", _line_of(node, ("entries", i, "run")))))
    return problems + cross_file_contradictions(loaded)


DEFAULT_LEDGER = LEDGER_ROOT / "adjudication.yaml"
