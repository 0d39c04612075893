"""One result's page: what the agent was given, every turn and code cell, its report and products, the grader's
checks, the verifier's verdicts, the L3 protocol record, and the rulings in force. Everything here is plain data;
agent text stays text (the templates escape it)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from benchmark.oversight.view.files import resolve_artifact
from benchmark.oversight.view.workbench import Row, Run, Workbench

MAX_TEXT = 200_000  # characters of one field shown; the rest is in the trajectory file


def clip(value: Any, limit: int = MAX_TEXT) -> str:
    """Any recorded value as text (JSON for structures), cut at `limit` with a note saying where the rest is."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, default=str)
    if len(text) > limit:
        return text[:limit] + f"\n[... {len(text) - limit} more characters in the trajectory file]"
    return text


def _content(c: Any) -> str:
    if isinstance(c, list):  # multi-part content: text parts as text, anything else as JSON
        return "\n".join(p.get("text", "") if isinstance(p, dict) and p.get("type") == "text" else clip(p) for p in c)
    return clip(c)


@dataclass
class Turn:
    index: int
    role: str
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_call_id: str = ""
    cell: int | None = None  # a tool reply that is a recorded cell's output: shown with that cell


def turns(messages: list[dict[str, Any]]) -> list[Turn]:
    out = []
    for i, m in enumerate(messages):
        calls = []
        for tc in m.get("tool_calls") or []:
            fn = (tc or {}).get("function") or {}
            args = fn.get("arguments", "")
            try:  # a run_python call: show its code as code, not as an escaped JSON string
                parsed = json.loads(args) if isinstance(args, str) else args
                args = parsed["code"] if isinstance(parsed, dict) and set(parsed) == {"code"} else clip(parsed)
            except (ValueError, TypeError):
                args = clip(args)
            calls.append({"name": clip(fn.get("name", "")), "arguments": clip(args), "id": clip(tc.get("id", ""))})
        out.append(Turn(i, clip(m.get("role", "")), _content(m.get("content")), calls, clip(m.get("tool_call_id", ""))))
    return out


def artifact_url(run_id: str, key: str, rel: str) -> str:
    return f"/run/{quote(run_id, safe='')}/artifact/{quote(key, safe='')}/{quote(rel, safe='/')}"


def products(run: Run, key: str, outputs: list[str]) -> list[dict[str, Any]]:
    """The files the agent wrote, as the artifact route will serve them: an image only when its bytes are one."""
    out = []
    for rel in outputs:
        art = resolve_artifact(run.root, key, rel)
        out.append({"rel": rel, "url": artifact_url(run.run_id, key, rel), "image": bool(art and art.inline),
                    "exists": art is not None, "size": art.size if art else None})
    return out


def inputs_of(ref) -> list[str]:
    """The files the agent's workspace held at the start: the world's lock lists them (with their hashes)."""
    if ref is None:
        return []
    try:
        return sorted(json.loads(ref.lock_path.read_text()).get("files", {}))
    except (OSError, ValueError):
        return list(ref.world.public_files)


PREVIEW_LINES, PREVIEW_CHARS = 40, 8000  # the head of a table, shown on the page
DOSSIER_CHARS = 200_000  # an L3 dossier is shown whole (up to this)


def world_dir(ref):
    """The folder holding the world's built files on this machine, or None where it was never built here (the page
    then says how to build it; a page view never builds a world)."""
    from benchmark.suite.freeze import world_cache

    if ref is None:
        return None
    d = world_cache(ref)
    return d if d.is_dir() else None


def input_file(ref, rel: str):
    """The world file `rel` names, when it is one of the files the lock lists (an allow-list: nothing else of the
    machine is served), else None."""
    d = world_dir(ref)
    if d is None or rel not in set(inputs_of(ref)):
        return None
    p = d / rel
    return p if p.is_file() and not p.is_symlink() and p.resolve().is_relative_to(d.resolve()) else None


def input_previews(ref, run_id: str) -> list[dict[str, Any]]:
    """Each input file with its size, a download link and a bounded preview: the head of a text file (an L3
    dossier whole), nothing for a binary one (BAM, gzip)."""
    out = []
    for rel in inputs_of(ref):
        p = input_file(ref, rel)
        item: dict[str, Any] = {"rel": rel, "size": None, "preview": None, "url": None}
        if p is not None:
            item["size"] = p.stat().st_size
            item["url"] = f"/run/{quote(run_id, safe='')}/input/{quote(ref.id, safe='')}/{quote(rel, safe='/')}"
            with open(p, "rb") as fh:
                head = fh.read(DOSSIER_CHARS if rel.endswith(".md") else PREVIEW_CHARS)
            if b"\0" not in head[:4096]:
                text = head.decode("utf-8", errors="replace")
                if not rel.endswith(".md"):
                    lines = text.splitlines()
                    text = "\n".join(lines[:PREVIEW_LINES])
                    if len(lines) > PREVIEW_LINES or item["size"] > len(head):
                        text += "\n[... the rest in the download]"
                item["preview"] = text
        out.append(item)
    return out


def check_goldens(ref) -> dict[str, str]:
    """check id -> the golden value it was compared against (compact JSON, clipped), from the world's golden."""
    from benchmark.suite.freeze import read_golden
    from graders.manifest import L1World

    if ref is None:
        return {}
    w = ref.world
    rub = getattr(w, "rubric", None)
    checks = (list(rub.measure) + list(rub.actions)) if isinstance(w, L1World) else list(getattr(rub, "checks", []) or [])
    try:
        values = read_golden(ref).values
    except Exception:  # noqa: BLE001 - a world without a golden here shows none
        return {}
    from graders.checks import _MISSING, get_path

    out = {}
    for c in checks:
        if not getattr(c, "golden", None):
            continue
        v = get_path(values, str(c.golden))  # the graders' own lookup of a check's golden
        v = None if v is _MISSING else v
        out[c.id] = clip(v if not isinstance(v, (dict, list)) else json.dumps(v, ensure_ascii=False), 400)
    return out


def verifier_values(verifications: list, component: str) -> list[tuple[str, Any]]:
    """Each verifier model's latest value for a component, by name (two verifiers are two values, not one)."""
    latest: dict[str, Any] = {}
    for v in verifications:
        val = verifier_value([v], component)
        if val is not None:
            latest[v.verifier_model] = val
    return sorted(latest.items())


def verifier_value(verifications: list, component: str):
    """The latest verifier's value for a component: its discrepancy value, else what its verdict says."""
    from benchmark.oversight.verify import L3_SUBAXES

    for v in reversed(verifications):
        for d in v.discrepancies:
            if d.component == component:
                return d.verifier
        verdict = v.verdict or {}
        if component in verdict and component in ("state", "A", "I", "M", "C", "D", "N"):
            return verdict[component]
        if component == "Q" and all(isinstance(verdict.get(q), (int, float)) for q in L3_SUBAXES):
            return round(sum(float(verdict[q]) for q in L3_SUBAXES) / len(L3_SUBAXES), 6)  # as compare_l3 computes it
        if component == "eligible" and isinstance(verdict.get("conflicts"), bool):
            return "eligible" if verdict["conflicts"] else "ineligible"
    return None


def component_rows(row: Row, verifications: list, in_force: list, ref: Any = None) -> list[dict[str, Any]]:
    """One row per component a ruling can set; an L1 `state` row lists the states the world's kind allows (a ruling
    outside them is refused: graders.l1.STATES_BY_EXPECT), an L3 `eligible` row the prior gate's two values."""
    from benchmark.oversight.adjudicate import _deterministic
    from benchmark.oversight.ledger import GATE_VALUES, LEVEL_COMPONENTS
    from graders.l1 import STATES_BY_EXPECT
    from graders.manifest import L1World

    forced = {f.ruling.component: f for f in in_force}
    disc = {d.component for v in verifications for d in v.discrepancies}
    out = []
    for comp in LEVEL_COMPONENTS.get(row.rec.level, ("score",)):
        out.append({"component": comp, "deterministic": _deterministic(row.rec, comp),
                    "verifier": verifier_value(verifications, comp), "discrepancy": comp in disc,
                    "verifiers": verifier_values(verifications, comp),
                    "pending": comp in row.pending, "in_force": forced.get(comp),
                    "allowed": STATES_BY_EXPECT[ref.world.rubric.expect]
                    if comp == "state" and ref is not None and isinstance(ref.world, L1World)
                    else list(GATE_VALUES) if comp == "eligible" else None})
    return out


def world_page(wb: Workbench, run: Run, world_id: str, replicate: int) -> dict[str, Any] | None:
    from benchmark.oversight.adjudicate import rulings_in_force
    from benchmark.oversight.verify import load_verifications

    snap = wb.snapshot()
    row = next((r for r in snap.rows if r.run is run and r.rec.world_id == world_id and r.rec.replicate == replicate), None)
    if row is None:
        return None
    rec, key = row.rec, row.key
    traj = run.store.load_trajectory(rec.trajectory) if rec.trajectory else None
    ref = wb.world_ref(world_id)
    verifs = [v for v in load_verifications(run.root) if v.key == key]
    in_force = rulings_in_force(wb.ledger_dir, run.run_id, world_id, replicate)
    msgs = turns(traj.messages) if traj else []
    n_prompt = next((i + 1 for i, t in enumerate(msgs) if t.role == "user"), 0)
    prods = products(run, key, traj.outputs) if traj else []
    images = [p for p in prods if p["image"] and p["exists"]]
    cells = []
    for i, c in enumerate(traj.cells if traj else []):
        named = [p for p in images if PurePosixPath(p["rel"]).name in c.code]  # figures this cell wrote
        cells.append({"index": i, "step": c.step, "code": clip(c.code), "stdout": clip(c.stdout), "stderr": clip(c.stderr),
                      "error": clip(c.error), "violation": c.violation.model_dump() if c.violation else None,
                      "via": c.via, "truncated": c.truncated, "wall_s": c.wall_s, "images": named})
    _once(msgs[n_prompt:], cells, prods)
    l3 = traj.l3 if traj is not None and isinstance(traj.l3, dict) else None
    files = wb.adjudication_files()
    return {
        "run": run, "row": row, "rec": rec, "key": key, "ref": ref, "traj": traj,
        "prompt": msgs[:n_prompt], "turns": msgs[n_prompt:], "inputs": inputs_of(ref), "products": prods,
        "input_files": input_previews(ref, run.run_id), "built": world_dir(ref) is not None,
        "goldens": check_goldens(ref), "queue": _queue(wb, run, world_id, replicate),
        "images": images, "cells": cells, "report": clip(traj.report_raw) if traj else "",
        "grade": rec.grade, "verifications": verifs, "l3": l3 and _l3_view(l3),
        "components": component_rows(row, verifs, in_force, ref), "in_force": in_force,
        "ledger_files": files, "version": snap.version,
        "default_ledger": in_force[0].path.name if in_force else (files[0] if len(files) == 1 else "adjudication.yaml"),
        "expected": ref.world.expected_response if ref else None,
    }


def _l3_view(l3: dict[str, Any]) -> dict[str, Any]:
    rounds = []
    for r in l3.get("rounds") or []:
        rounds.append({"round": r.get("round"), "rejection_fraction": r.get("rejection_fraction"),
                       "concessions": r.get("concessions"), "revised": r.get("revised") or [],
                       "critiques": [{"reviewer": clip(c.get("reviewer", "")), "model": clip(c.get("model", "")),
                                      "verdict": clip(c.get("verdict", "")), "critique": clip(c.get("critique", ""))}
                                     for c in r.get("critiques") or []],
                       "rebuttal": clip(r.get("rebuttal")) if r.get("rebuttal") is not None else clip(r.get("rebuttal_raw")),
                       "hypothesis_after": clip(r.get("hypothesis_after", ""))})
    draws = []
    for d in l3.get("judge_draws") or []:
        draws.append({"axes": {k: v for k, v in d.items() if k != "reason"}, "reason": clip(d.get("reason", ""))})
    return {"prior": clip(l3.get("prior")) if l3.get("prior") is not None else clip(l3.get("prior_raw")),
            "eligible": l3.get("eligible"), "eligibility_reason": clip(l3.get("eligibility_reason")),
            "reviewers": l3.get("reviewers") or [], "first_answer": clip(l3.get("first_answer")),
            "final_answer": clip(l3.get("final_answer")), "commitment": l3.get("commitment"),
            "axes": l3.get("axes"), "hyp_drift": l3.get("hyp_drift"), "rounds": rounds, "draws": draws,
            "unparsed": clip(l3.get("unparsed")) if l3.get("unparsed") else "",
            "truncations": clip(l3.get("truncations")) if l3.get("truncations") else ""}


def _queue(wb: Workbench, run: Run, world_id: str, replicate: int) -> dict[str, Any]:
    """Where this result sits in the pending queue (every run's open discrepancies, in `ledger pending` order): its
    position and the previous and next items' pages."""
    items = []
    for r, pend, _ in wb.pending():
        for it in pend:
            k = (r.run_id, it.world_id, it.replicate)
            if not items or items[-1] != k:
                items.append(k)
    here = (run.run_id, world_id, replicate)
    if here not in items:
        return {"position": None, "total": len(items), "prev": None, "next": None}
    from benchmark.oversight.view.app import world_url

    i = items.index(here)
    return {"position": i + 1, "total": len(items), "prev": world_url(*items[i - 1]) if i > 0 else None,
            "next": world_url(*items[i + 1]) if i + 1 < len(items) else None}


def _once(model_turns: list[Turn], cells: list[dict[str, Any]], prods: list[dict[str, Any]]) -> None:
    """Code and figures once: a run_python call whose code is a recorded cell links to it (the cell shows the code
    and its output), the tool reply answering it says so, and a figure a cell shows is linked, not drawn again, in
    the products table."""
    free = list(cells)
    by_call: dict[str, int] = {}
    for t in model_turns:
        for c in t.tool_calls:
            if c["name"] != "run_python":
                continue
            hit = next((x for x in free if x["code"] == c["arguments"]), None)
            if hit is not None:
                free.remove(hit)
                c["cell"] = hit["index"]
                by_call[c["id"]] = hit["index"]
    for t in model_turns:
        if t.role == "tool" and t.tool_call_id in by_call:
            t.cell = by_call[t.tool_call_id]
    shown = {p["rel"]: c["index"] for c in cells for p in c["images"]}
    for p in prods:
        if p["rel"] in shown:
            p["in_cell"] = shown[p["rel"]]
