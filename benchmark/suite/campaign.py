"""Private campaigns: the whole suite frozen again with a secret seed, so published goldens and hashes are no key.

`worlds freeze --all --seed S --out DIR` rebuilds every selected world from the same manifests with seeds mixed
with S (every drawn magnitude, affected set and depth changes), solves it and writes goldens and locks under DIR;
`run --suite DIR` evaluates against that copy. DIR/campaign.json records the seed and the worlds; keep DIR private.
"""
from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from benchmark.suite.canonical import _atomic_write
from benchmark.errors import BenchmarkError
from benchmark.suite.loader import Campaign, Suite, WorldRef

CAMPAIGN_FILE = "campaign.json"


class CampaignFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    seed: int
    worlds: list[str]


def load_campaign(root: Path | str) -> Campaign:
    """The campaign frozen under `root`; one sentence naming the file when it is not one."""
    path = Path(root) / CAMPAIGN_FILE
    if not path.is_file():
        raise BenchmarkError(f"{root} is not a frozen campaign (no {CAMPAIGN_FILE}); create one with "
                             "`python -m benchmark worlds freeze --all --seed S --out DIR`")
    try:
        cf = CampaignFile.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "<root>"
        raise BenchmarkError(f"{path}: field '{where}': {err['msg']}; re-create the campaign with `worlds freeze --seed`") from None
    return Campaign(seed=cf.seed, root=Path(root).resolve())


def campaign_suite(suite: Suite, root: Path | str | None) -> Suite:
    """`suite` bound to the campaign under `root` (or unchanged when `root` is None)."""
    if root is None:
        return suite
    camp = load_campaign(root)
    cf = CampaignFile.model_validate_json((camp.root / CAMPAIGN_FILE).read_bytes())
    bound = suite.with_campaign(camp)
    bound.worlds = {k: r for k, r in bound.worlds.items() if k in set(cf.worlds)}
    return bound


def start_campaign(root: Path | str, seed: int, refs: list[WorldRef]) -> list[WorldRef]:
    """Record the campaign (seed and worlds, merged with any already frozen there) and bind `refs` to it."""
    import dataclasses

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise BenchmarkError(f"--seed must be an integer, not {seed!r}")
    root = Path(root)
    path = root / CAMPAIGN_FILE
    worlds = {r.id for r in refs}
    if path.exists():
        old = load_campaign(root)
        if old.seed != seed:
            raise BenchmarkError(f"{path} was frozen with another seed; use a new --out folder for seed {seed}")
        worlds |= set(CampaignFile.model_validate_json(path.read_bytes()).worlds)
    root.mkdir(parents=True, exist_ok=True)
    body = CampaignFile(seed=seed, worlds=sorted(worlds)).model_dump()
    _atomic_write(path, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())
    camp = Campaign(seed=seed, root=root.resolve())
    return [dataclasses.replace(r, campaign=camp) for r in refs]
