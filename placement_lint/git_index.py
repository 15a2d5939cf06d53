"""The paths a git repository tracks, read from its index file as data (git is never run for it).

A launch script can be committed inside a folder the repository's .gitignore leaves out (MiniCPM
ignores `scripts/` and tracks `.../scripts/deepspeed/sft_finetune.sh`): the discovery walk, which
honours .gitignore as ruff does, never meets it, but it is part of the repository all the same.

Only the paths are read (index versions 2, 3 and 4: `Documentation/gitformat-index.txt` in git).
dulwich reads the index too, but importing it takes 40-60 ms, about what a whole warm run takes;
walking the entries' fixed-size headers here takes a few milliseconds for ten thousand files.
"""

from __future__ import annotations

import os
from pathlib import Path

_SIGNATURE = b"DIRC"
_HASH_SIZES = {"sha1": 20, "sha256": 32}
_FIXED = 40  # ctime, mtime (8 bytes each), dev, ino, mode, uid, gid, size (4 bytes each), before the hash
_EXTENDED = 0x4000  # flags: two more bytes of flags follow (version 3 and up)
_NAME_LENGTH = 0x0FFF
_DIRECTORY_MODE = 0o040000  # a sparse index's entry for a whole folder
MAX_INDEX_BYTES = 64 * 1024 * 1024


def tracked_paths(repository: Path) -> list[str] | None:
    """The paths tracked in `repository` (relative, `/`-separated, as git writes them); None when its
    index cannot be read as one of the versions above (none yet, a `.git` file of a worktree, a split
    index, a truncated file): then nothing is added to what the walk finds."""
    folder = repository / ".git"
    try:
        if not folder.is_dir() or os.path.getsize(folder / "index") > MAX_INDEX_BYTES:
            return None
        data = (folder / "index").read_bytes()
    except OSError:
        return None
    try:
        return _paths(data, _hash_size(folder))
    except (ValueError, IndexError):
        return None


def _hash_size(folder: Path) -> int:
    """20 bytes for SHA-1, 32 for a repository created with `--object-format=sha256`."""
    try:
        config = (folder / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return _HASH_SIZES["sha1"]
    for line in config.splitlines():
        key, _, value = line.partition("=")
        if key.strip().lower() == "objectformat":
            return _HASH_SIZES.get(value.strip().lower(), _HASH_SIZES["sha1"])
    return _HASH_SIZES["sha1"]


def _paths(data: bytes, hash_size: int) -> list[str]:
    if data[:4] != _SIGNATURE:
        raise ValueError("not an index")
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        raise ValueError(f"index version {version}")
    paths: list[str] = []
    offset = 12
    previous = b""
    for _ in range(count):
        start = offset
        mode = int.from_bytes(data[start + 24 : start + 28], "big")
        flags_at = start + _FIXED + hash_size
        flags = int.from_bytes(data[flags_at : flags_at + 2], "big")
        offset = flags_at + 2
        if flags & _EXTENDED:
            if version < 3:
                raise ValueError("extended flags in a version 2 index")
            offset += 2
        if version == 4:  # the path is the previous one less N bytes, plus what follows up to a NUL
            strip, offset = _varint(data, offset)
            end = data.index(b"\0", offset)
            if strip > len(previous):
                raise ValueError("bad path compression")
            path = previous[: len(previous) - strip] + data[offset:end]
            offset = end + 1
        else:  # the path, then 1-8 NULs up to a multiple of eight bytes from the entry's start
            length = flags & _NAME_LENGTH
            end = data.index(b"\0", offset) if length == _NAME_LENGTH else offset + length
            if data[end : end + 1] != b"\0":
                raise ValueError("a path without its NUL")
            path = data[offset:end]
            offset = start + ((end - start) // 8 + 1) * 8
        if offset > len(data) or not path:
            raise ValueError("truncated")
        previous = path
        if mode & 0o170000 != _DIRECTORY_MODE:
            paths.append(path.decode("utf-8", "surrogateescape"))
    return paths


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    """Git's offset encoding (varint.c): seven bits a byte, each continuation adding one."""
    byte = data[offset]
    offset += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[offset]
        offset += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, offset
