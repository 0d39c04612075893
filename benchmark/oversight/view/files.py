"""Serving the agent's work products: only regular files inside the run's artifacts/<key>/ folder (no symlink, no
'..'), images with their own content type after a check of their first bytes, everything else (HTML, SVG, CSV,
text) as a download, so nothing the agent wrote is ever rendered as a document in the adjudicator's browser."""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# Raster formats a browser shows as an image and never executes; SVG is absent on purpose (it can carry script).
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}
_MAGIC = {"image/png": (b"\x89PNG\r\n\x1a\n",), "image/jpeg": (b"\xff\xd8\xff",), "image/gif": (b"GIF87a", b"GIF89a"),
          "image/webp": (b"RIFF",)}
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,250}")
MAX_SERVED_BYTES = 64 << 20


@dataclass
class Artifact:
    path: Path
    content_type: str
    inline: bool  # an image shown in the page; otherwise an attachment download
    size: int



def resolve_artifact(run_root: Path, key: str, rel: str) -> Artifact | None:
    """The file `rel` of result `key`'s work products, or None when it is not a regular file inside that folder.
    Every component is checked with lstat: a symlink anywhere (the agent could have written one) is refused."""
    if not _KEY.fullmatch(key) or ".." in key:
        return None
    parts = PurePosixPath(rel).parts
    if (not parts or PurePosixPath(rel).is_absolute() or "\\" in rel or "\x00" in rel
            or any(p in ("..", ".", "") for p in parts)):
        return None
    base = Path(run_root) / "artifacts"
    cur = base
    for comp in (key, *parts):
        cur = cur / comp
        try:
            st = os.lstat(cur)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SERVED_BYTES:
        return None
    if not cur.resolve().is_relative_to(base.resolve()):
        return None
    ctype = IMAGE_TYPES.get(cur.suffix.lower())
    if ctype is not None:
        with open(cur, "rb") as fh:
            head = fh.read(16)
        if not any(head.startswith(m) for m in _MAGIC[ctype]) or (ctype == "image/webp" and head[8:12] != b"WEBP"):
            ctype = None  # named like an image but is not one: a download, never rendered
    if ctype is None:
        return Artifact(cur, "application/octet-stream", False, st.st_size)
    return Artifact(cur, ctype, True, st.st_size)
