"""Reading a result artifact zip defensively (pure: bytes in, members out).

``safe_json_members`` returns the expected JSON members of an artifact under a size cap, refusing
path traversal, absolute paths, symlinks and zip bombs; ``pick_result_member`` picks the point's
result file among them.
"""

from __future__ import annotations

import io
import lzma
import posixpath
import stat
import zipfile
import zlib
from collections.abc import Iterable, Mapping

MAX_ARTIFACT_BYTES = 16 * 1024 * 1024  # a result artifact is a few KB; 16 MB is generous
MAX_MEMBER_BYTES = 4 * 1024 * 1024  # one result JSON
MAX_TOTAL_BYTES = 16 * 1024 * 1024  # everything we agree to decompress from one artifact
MAX_RATIO = 100.0  # JSON compresses ~5-10x; 100x and more is a bomb, not a result
MAX_MEMBERS = 2000


class ArtifactError(ValueError):
    """The artifact is unsafe or does not hold the expected result file."""


def _unsafe_name(name: str) -> str | None:
    """Why a member name is unsafe to even consider, or None."""
    if "\\" in name:
        return "has a backslash"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    if any(part == ".." for part in name.split("/")):
        return "escapes the artifact with '..'"
    if "\x00" in name:
        return "has a NUL byte"
    return None


def safe_json_members(
    data: bytes,
    *,
    wanted: Iterable[str] | None = None,
    max_member_bytes: int = MAX_MEMBER_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_ratio: float = MAX_RATIO,
) -> dict[str, bytes]:
    """The ``.json`` members of an artifact zip (only ``wanted`` basenames when given).

    The whole artifact is refused when any member is unsafe (path traversal, absolute path,
    symlink), since an artifact that tries one trick cannot be trusted for the rest. Sizes are
    checked on the declared values first and then enforced while streaming, because headers lie.
    """
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise ArtifactError(f"the artifact is not a readable zip archive ({exc})") from exc
    wanted_set = set(wanted) if wanted is not None else None
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ArtifactError(f"the artifact has {len(infos)} members, over the limit of {MAX_MEMBERS}")
    chosen: list[zipfile.ZipInfo] = []
    for info in infos:
        why = _unsafe_name(info.filename)
        if why is not None:
            raise ArtifactError(f"artifact member {info.filename!r} {why}; refusing the artifact")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise ArtifactError(f"artifact member {info.filename!r} is a symlink; refusing the artifact")
        if info.is_dir() or not info.filename.lower().endswith(".json"):
            continue
        if wanted_set is not None and posixpath.basename(info.filename) not in wanted_set:
            continue
        chosen.append(info)
    out: dict[str, bytes] = {}
    total = 0
    for info in chosen:
        name = info.filename
        if info.file_size > max_member_bytes:
            raise ArtifactError(
                f"artifact member {name!r} declares {info.file_size} bytes, "
                f"over the {max_member_bytes}-byte cap"
            )
        if info.file_size > 1024 and info.file_size / max(info.compress_size, 1) > max_ratio:
            raise ArtifactError(
                f"artifact member {name!r} expands {info.file_size / max(info.compress_size, 1):.0f}x "
                f"(over {max_ratio:.0f}x): refusing a likely zip bomb"
            )
        buf = bytearray()
        try:
            with zf.open(info) as fh:
                while True:
                    chunk = fh.read(64 * 1024)
                    if not chunk:
                        break
                    buf += chunk
                    if len(buf) > max_member_bytes or total + len(buf) > max_total_bytes:
                        raise ArtifactError(
                            f"artifact member {name!r} decompresses past the size cap: "
                            "refusing a likely zip bomb"
                        )
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            OSError,
            EOFError,
            RuntimeError,
            NotImplementedError,  # a compression method zipfile cannot read (AES, PPMd ...)
            zlib.error,  # a corrupt deflate stream
            lzma.LZMAError,  # a corrupt LZMA stream
        ) as exc:
            raise ArtifactError(f"artifact member {name!r} cannot be read: {exc}") from exc
        total += len(buf)
        out[name] = bytes(buf)
    return out


def pick_result_member(members: Mapping[str, bytes], result_name: str | None) -> tuple[str, bytes]:
    """The member holding the point's result: ``<result_name>.json``, else the only JSON file."""
    if result_name:
        for name, body in members.items():
            if posixpath.basename(name) == f"{result_name}.json":
                return name, body
    if len(members) == 1:
        return next(iter(members.items()))
    expected = f"{result_name}.json" if result_name else "one result .json file"
    found = ", ".join(sorted(members)) or "no JSON files"
    raise ArtifactError(f"missing result file {expected} in the artifact (it holds: {found})")
