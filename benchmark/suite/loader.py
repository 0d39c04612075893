"""Discover and load tracks, families and worlds from YAML under `worlds/`.

Layout (one folder per track):
    worlds/<track>/track.yaml
    worlds/<track>/<level>/<family>/family.yaml      (L1 and L3 use the family folder too)
    worlds/<track>/<level>/<family>/<world>.yaml     + <world>.golden.json + <world>.lock.json
Every error names the file, the YAML line, the field and the reason.
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from benchmark.errors import BenchmarkError, ManifestError
from graders.manifest import FamilyManifest, L1World, L2World, L3World, TrackManifest, World

REPO_ROOT = Path(__file__).resolve().parents[2]
WORLDS_ROOT = Path(os.environ.get("BENCHMARK_WORLDS") or REPO_ROOT / "worlds")  # another root: a toy or private suite
_WORLD = TypeAdapter(World)


def _line_of(node: yaml.Node | None, loc: tuple) -> int | None:
    """Walk a composed YAML node along a pydantic error location to find the offending line."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if k.value == key or (key == "world_class" and k.value == "class"):
                    nxt = v
                    line = k.start_mark.line + 1
                    break
            if nxt is None:
                break
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~15x faster than the pure-Python parser


class StrictLoader(_BASE_LOADER):
    """SafeLoader (libyaml-backed where PyYAML has it) that refuses duplicate keys (YAML keeps the last one silently,
    so an edit could vanish) and reports an impossible date (2026-02-30) as a YAML error with its line, not as a
    stray ValueError."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                try:
                    key = self.construct_object(key_node, deep=True)
                    hash(key)
                except (TypeError, yaml.YAMLError):
                    continue  # unhashable keys: the base class reports them
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        f"while constructing a mapping (first at line {seen[key]})", node.start_mark,
                        f"duplicate key '{key}' (also at line {seen[key]}); keep one", key_node.start_mark)
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_timestamp(self, node):
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError as exc:
            raise yaml.constructor.ConstructorError(None, None, f"'{node.value}' is not a real date or time ({exc})",
                                                    node.start_mark) from None


StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", StrictLoader.construct_yaml_timestamp)
StrictLoader.add_constructor("tag:yaml.org,2002:map", StrictLoader.construct_yaml_map)


def read_text_utf8(path: Path) -> str:
    """A text file as UTF-8; bad bytes are one sentence naming the file, the line and the byte offset."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ManifestError(path, "<encoding>", f"byte {exc.start} (0x{data[exc.start]:02x}) is not valid UTF-8; "
                            "save the file as UTF-8", line) from None


MAX_YAML_DEPTH = 64  # no manifest, ledger or rate card nests deeper; a deeper file is refused before it is composed


def yaml_depth_problem(text: str) -> tuple[int, int] | None:
    """(line, depth) where the YAML event stream first nests deeper than MAX_YAML_DEPTH, else None. The parser's
    event stream is flat, so this costs no recursion however deep the file is (composing it would)."""
    depth = 0
    for ev in yaml.parse(text, Loader=StrictLoader):
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                return ev.start_mark.line + 1, depth
        elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    return None


def read_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    text = read_text_utf8(path)
    try:
        deep = yaml_depth_problem(text)
        if deep is not None:
            raise ManifestError(path, "<yaml>", f"nests deeper than {MAX_YAML_DEPTH} levels (line {deep[0]}); no "
                                "benchmark file does: fix or restore the file", deep[0])
        loader = StrictLoader(text)
        try:  # compose once; the node keeps line numbers for errors, the data is constructed from it
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ManifestError(path, "<yaml>", f"not valid YAML: {getattr(exc, 'problem', exc)}", mark.line + 1 if mark else None) from exc
    if not isinstance(data, dict):
        raise ManifestError(path, "<root>", "expected a mapping of fields at the top level", 1)
    return data, node


def validate(model: type[BaseModel] | TypeAdapter, data: Any, path: Path, node: yaml.Node | None = None) -> Any:
    """Validate `data`; on failure raise ManifestError naming the first bad field, its line and the fix."""
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_python(data)
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        if isinstance(model, TypeAdapter) and loc and loc[0] in ("L1", "L2", "L3"):
            loc = loc[1:]  # the discriminator tag, not a field
        msg = err["msg"].removeprefix("Value error, ")
        tagged = re.match(r"@([\w.]+)@(.*)", msg, flags=re.DOTALL)
        if tagged:  # a model-level error attributed to one field (manifest.bad)
            loc, msg = loc + tuple(tagged.group(1).split(".")), tagged.group(2)
        fieldname = ".".join(str(p) for p in loc) or "<root>"
        if err["type"] == "missing":
            msg = "is required but missing; add it"
        elif err["type"] == "extra_forbidden":
            msg = "is not a known field; remove it or check its spelling"
        raise ManifestError(path, fieldname, msg, _line_of(node, loc)) from None


@dataclass
class TrackBundle:
    manifest: TrackManifest
    path: Path
    families: dict[str, FamilyManifest] = field(default_factory=dict)
    family_paths: dict[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class WorldRef:
    """A world manifest plus where it lives; golden and lock sit beside it."""

    world: L1World | L2World | L3World
    path: Path
    family: FamilyManifest
    track: TrackManifest
    campaign: "Campaign | None" = None  # a private freeze (`worlds freeze --seed S --out DIR`): goldens and locks there

    @property
    def id(self) -> str:
        return self.world.id

    @property
    def golden_path(self) -> Path:
        if self.campaign is not None:
            return self.campaign.root / "goldens" / f"{self.id}.golden.json"
        return self.path.with_name(self.path.stem + ".golden.json")

    @property
    def lock_path(self) -> Path:
        if self.campaign is not None:
            return self.campaign.root / "locks" / f"{self.id}.lock.json"
        return self.path.with_name(self.path.stem + ".lock.json")

    @property
    def world_seed(self) -> int:
        """The seed a world's recipe draws from: its manifest seed, mixed with a private campaign's seed."""
        return self.world.seed if self.campaign is None else self.campaign.mix(self.world.seed, "world")

    @property
    def substrate_seed(self) -> int:
        s = self.track.substrate.seed
        return s if self.campaign is None else self.campaign.mix(s, "substrate")

    def call_context(self) -> dict[str, Any]:
        """Where this world lives, as plain data a protocol attaches to every model call's metadata alike (never to
        the prompt): a real model ignores it; the scripted provider finds the world again from it
        (`world_from_context`) and decides what its agent does."""
        return {"world_id": self.id, "world_manifest": str(self.path),
                "campaign_root": str(self.campaign.root) if self.campaign is not None else None}


def world_from_context(meta: dict[str, Any]) -> WorldRef:
    """The world a call's context names (`WorldRef.call_context`): its manifest's suite, bound to the private
    campaign folder when one is named."""
    import dataclasses

    path = Path(meta["world_manifest"])
    root = path.parents[3]  # <root>/<track>/<level>/<family>/<world>.yaml
    suite = load_suite() if root.resolve() == WORLDS_ROOT.resolve() else load_suite(str(root))
    ref = suite.worlds[meta["world_id"]]
    if meta.get("campaign_root"):  # the campaign this process bound the world to; else its folder's campaign.json
        camp = _CAMPAIGNS.get(meta["campaign_root"])
        if camp is None:
            from benchmark.suite.campaign import load_campaign

            camp = load_campaign(meta["campaign_root"])
        ref = dataclasses.replace(ref, campaign=camp)
    return ref


_CAMPAIGNS: dict[str, "Campaign"] = {}  # root -> the campaign bound there in this process (a Ray worker's has no folder)


@dataclass(frozen=True)
class Campaign:
    """A private copy of the suite frozen with a secret seed: same manifests, fresh draws, its own goldens and locks.

    Published goldens and lock hashes are then no answer key: every drawn magnitude, affected set and depth differs.
    """

    seed: int
    root: Path

    def __post_init__(self) -> None:
        _CAMPAIGNS[str(self.root)] = self  # found again by root in this process (world_from_context)

    def mix(self, seed: int, what: str) -> int:
        import hashlib

        digest = hashlib.sha256(f"campaign:{self.seed}:{what}:{seed}".encode()).digest()
        return int.from_bytes(digest[:8], "big") >> 1

    @property
    def data_root(self) -> Path:
        return self.root / "data"


class Suite:
    """Every track, family and world under a worlds root, validated and cross-checked."""

    def __init__(self, root: Path = WORLDS_ROOT):
        self.root = Path(root)
        self.tracks: dict[str, TrackBundle] = {}
        self.worlds: dict[str, WorldRef] = {}
        self._load()

    def _load(self) -> None:
        for tpath in sorted(self.root.glob("*/track.yaml")):
            data, node = read_yaml(tpath)
            tm: TrackManifest = validate(TrackManifest, data, tpath, node)
            if tm.name != tpath.parent.name:
                raise ManifestError(tpath, "name", f"track '{tm.name}' must live in worlds/{tm.name}/, not worlds/{tpath.parent.name}/", _line_of(node, ("name",)))
            bundle = TrackBundle(tm, tpath)
            self.tracks[tm.name] = bundle
            for fpath in sorted(tpath.parent.glob("L[123]/*/family.yaml")):
                fdata, fnode = read_yaml(fpath)
                fam: FamilyManifest = validate(FamilyManifest, fdata, fpath, fnode)
                self._expect(fam.track == tm.name, fpath, fnode, "track", f"family in worlds/{tm.name}/ must have track '{tm.name}'")
                self._expect(fam.level == fpath.parent.parent.name, fpath, fnode, "level", f"family in {fpath.parent.parent.name}/ must have level {fpath.parent.parent.name}")
                self._expect(fam.id == f"{tm.name}.{fam.level}.{fpath.parent.name}", fpath, fnode, "id", f"family id must be '{tm.name}.{fam.level}.{fpath.parent.name}'")
                bundle.families[fam.id] = fam
                bundle.family_paths[fam.id] = fpath
                for wpath in sorted(fpath.parent.glob("*.yaml")):
                    if wpath.name == "family.yaml":
                        continue
                    self._load_world(wpath, fam, tm)

    @staticmethod
    def _expect(ok: bool, path: Path, node, fieldname: str, reason: str) -> None:
        if not ok:
            raise ManifestError(path, fieldname, reason, _line_of(node, (fieldname,)))

    def _load_world(self, wpath: Path, fam: FamilyManifest, tm: TrackManifest) -> None:
        data, node = read_yaml(wpath)
        w = validate(_WORLD, data, wpath, node)
        want_id = f"{fam.id}.{wpath.stem}"
        self._expect(w.id == want_id, wpath, node, "id", f"world id must be '{want_id}' (family id + file name)")
        self._expect(w.family == fam.id, wpath, node, "family", f"world lives in family '{fam.id}'")
        self._expect(w.track == tm.name, wpath, node, "track", f"world lives in track '{tm.name}'")
        self._expect(w.level == fam.level, wpath, node, "level", f"world lives in a {fam.level} family")
        if isinstance(w, L1World) and w.defect and w.defect not in fam.defect_catalog and not w.rubric.diagnosis:
            raise ManifestError(wpath, "defect", f"defect '{w.defect}' is not in the family's defect_catalog and rubric.diagnosis is empty; add patterns to one of them", _line_of(node, ("defect",)))
        if w.id in self.worlds:
            raise ManifestError(wpath, "id", f"world id '{w.id}' is also used by {self.worlds[w.id].path}", _line_of(node, ("id",)))
        self.worlds[w.id] = WorldRef(w, wpath, fam, tm)

    # -- queries
    def select(self, patterns: list[str] | None = None, tracks: list[str] | None = None, levels: list[str] | None = None) -> list[WorldRef]:
        import fnmatch

        out = []
        for wid, ref in sorted(self.worlds.items()):
            if tracks and ref.world.track not in tracks:
                continue
            if levels and ref.world.level not in levels:
                continue
            if patterns and not any(fnmatch.fnmatchcase(wid, p) or p == wid for p in patterns):
                continue
            out.append(ref)
        return out

    def select_checked(self, patterns: list[str] | None = None, tracks: list[str] | None = None,
                       levels: list[str] | None = None) -> list[WorldRef]:
        """`select`, where a selection that names nothing is an error: a pattern no world id matches (a typo) or an
        unknown track is named with the nearest ids, and an empty result says which filter emptied it."""
        refs = self.select(patterns, tracks, levels)
        problems = [self._no_track(t) for t in tracks or [] if t not in self.tracks_in_use()]
        problems += [self._no_world(p) for p in patterns or [] if not self.select([p])]
        if problems:
            raise BenchmarkError("; ".join(problems) + "; see `python -m benchmark worlds list`")
        if not refs:
            given = " ".join(f"{flag} {' '.join(v)}" for flag, v in
                             (("--worlds", patterns), ("--tracks", tracks), ("--levels", levels)) if v)
            raise BenchmarkError(f"no world matches {given or 'the selection'} together (each matches some world on "
                                 "its own); see `python -m benchmark worlds list`")
        return refs

    def tracks_in_use(self) -> set[str]:
        return {r.world.track for r in self.worlds.values()}

    def _no_world(self, pattern: str) -> str:
        import difflib

        candidates = sorted(set(self.worlds) | {f"{r.world.family}.*" for r in self.worlds.values()})
        near = difflib.get_close_matches(pattern, candidates, n=3, cutoff=0.6)
        campaign = any(r.campaign is not None for r in self.worlds.values())
        where = " in this private campaign" if campaign else ""
        return f"no world{where} matches '{pattern}'" + (f" (did you mean {', '.join(repr(n) for n in near)}?)" if near else "")

    def _no_track(self, track: str) -> str:
        import difflib

        known = sorted(self.tracks_in_use())
        near = difflib.get_close_matches(track, known, n=1, cutoff=0.6)
        return f"no track '{track}'" + (f" (did you mean '{near[0]}'?)" if near else f" (tracks: {', '.join(known)})")

    def families(self) -> dict[str, FamilyManifest]:
        return {fid: f for b in self.tracks.values() for fid, f in b.families.items()}

    def with_campaign(self, campaign: Campaign | None) -> "Suite":
        """This suite with every world bound to a private campaign (goldens, locks and data under its folder)."""
        import copy
        import dataclasses

        if campaign is None:
            return self
        other = copy.copy(self)
        other.worlds = {k: dataclasses.replace(r, campaign=campaign) for k, r in self.worlds.items()}
        return other


SUITE_CACHE_DIR = REPO_ROOT / ".cache" / "suites"
SUITE_CACHE_VERSION = 1
SUITE_CACHE_KEEP = 16  # loaded suites kept (a test's toy suites come and go; the newest are kept)


def suite_digest(root: Path) -> str:
    """sha256 of everything a loaded `Suite` is a function of: the bytes and relative paths of every YAML file the
    loader can read, the root's absolute path (the refs hold absolute paths), the loader's and the manifest models'
    code, and the versions of Python, pydantic, PyYAML and jsonschema. About 5 ms: reading, no parsing."""
    import hashlib
    import sys
    from importlib.metadata import version

    root = Path(root).resolve()
    h = hashlib.sha256(f"{SUITE_CACHE_VERSION}\0{sys.version}\0{root}\0".encode())
    for dist in ("pydantic", "pydantic-core", "pyyaml", "jsonschema"):
        h.update(f"{dist} {version(dist)}\0".encode())
    import graders.manifest

    here = Path(__file__).resolve().parent
    for code in (here / "loader.py", Path(graders.manifest.__file__).resolve(), here.parent / "errors.py"):
        h.update(code.read_bytes())
    for p in sorted({*root.glob("*/track.yaml"), *root.glob("*/L[123]/*/*.yaml")}):
        h.update(f"\0{p.relative_to(root)}\0".encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def cached_suite(root: Path) -> Suite:
    """A suite loaded before from the same bytes (pickled under .cache/suites/), else loaded and kept.

    Why: parsing and validating the 310 manifests cost 0.40 of the ~0.6 CPU-s every CLI process spent starting
    (`worlds list`, each `run`, every test that shells out); unpickling the same Suite costs 0.013. Only a suite
    that loaded without error is kept, written atomically; any change to a manifest, the loader, the models or
    their libraries changes the digest, and an unreadable cache file is loaded afresh."""
    import hashlib
    import pickle

    try:
        digest = suite_digest(root)
    except OSError:  # a file vanished mid-read: load the plain way, which reports it
        return Suite(root)
    tag = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:12]
    path = SUITE_CACHE_DIR / f"{tag}-{digest[:32]}.pickle"
    try:
        got = pickle.loads(path.read_bytes())
        if isinstance(got, Suite):
            return got
    except Exception:  # noqa: BLE001 - missing, torn or from another code version: load afresh
        pass
    suite = Suite(root)
    try:
        SUITE_CACHE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(suite, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)
        for old in sorted(SUITE_CACHE_DIR.glob("*.pickle"), key=lambda p: p.stat().st_mtime)[:-SUITE_CACHE_KEEP]:
            old.unlink(missing_ok=True)
    except OSError:  # a read-only checkout: every process loads the plain way
        pass
    return suite


@functools.lru_cache(maxsize=4)
def load_suite(root: str | None = None) -> Suite:
    return cached_suite(Path(root) if root else WORLDS_ROOT)
