"""Zip archives uploaded with a dataset: every member checked before anything is unpacked.

:func:`unpack_zip` first reads the archive's directory and each image's first bytes, and
refuses, in one line naming the archive and the member:

* more than ``max_members`` files, or more than ``max_bytes`` declared once unpacked;
* an encrypted member, or one compressed with a method Python cannot read;
* a path leading outside the archive (absolute, ``..``, a drive letter), a symbolic link, a
  name with control characters;
* two members that would land on one file (``a.png`` twice, or ``A.png`` and ``a.png`` on a
  file system that ignores case), or a name used both for a file and for a folder;
* an image (by its extension) whose first bytes are not that of an image format winnow reads.

Only then are the members written, each under its own name (never renamed: a data file names
them), ``0600`` like every file winnow writes, and the bytes written are counted against
``max_bytes`` while they are inflated, whatever the directory declared. Resource forks
(``__MACOSX``) and hidden files are skipped.
"""

from __future__ import annotations

import os
import stat
import unicodedata
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from app.io.media import IMAGE_EXTENSIONS
from app.io.writers import EXPORT_MODE
from engine.exceptions import InvalidInput

__all__ = ["ZipLimits", "unpack_zip", "IMAGE_SIGNATURES"]

#: The first bytes of each image format winnow reads, by file extension.
IMAGE_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    ".png": (b"\x89PNG\r\n\x1a\n",),
    ".jpg": (b"\xff\xd8\xff",),
    ".jpeg": (b"\xff\xd8\xff",),
    ".gif": (b"GIF87a", b"GIF89a"),
    ".bmp": (b"BM",),
    ".tif": (b"II*\x00", b"MM\x00*"),
    ".tiff": (b"II*\x00", b"MM\x00*"),
    ".webp": (b"RIFF",),  # then four size bytes and "WEBP", checked below
}

#: Compression methods the zipfile module reads.
_READABLE_METHODS = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA})

_CHUNK = 1 << 20


@dataclass(frozen=True)
class ZipLimits:
    """How much an archive may hold."""

    #: Most files (folders not counted).
    max_members: int = 50_000
    #: Most bytes once unpacked, summed over the members.
    max_bytes: int = 2 << 30


@dataclass(frozen=True)
class _Planned:
    info: zipfile.ZipInfo
    parts: tuple[str, ...]


def unpack_zip(
    archive_file: str | os.PathLike[str] | BinaryIO,
    target: str | os.PathLike[str],
    shown: str,
    limits: ZipLimits = ZipLimits(),
) -> list[Path]:
    """Check an archive's members (see the module docstring), then unpack them into ``target``.

    Parameters
    ----------
    archive_file : path or binary file
        The archive.
    target : path
        An existing folder; the members' folders are made inside it.
    shown : str
        The archive as the user knows it (its upload name), for messages.
    limits : ZipLimits
        Members and unpacked bytes accepted.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    engine.exceptions.InvalidInput
        One line naming ``shown`` and the member at fault; nothing is written when a check
        fails before unpacking.
    """
    try:
        archive = zipfile.ZipFile(archive_file)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise InvalidInput(f"{shown} is not a valid zip archive ({_first_line(exc)})") from None
    with archive:
        plan = _check_members(archive, shown, limits)
        written: list[Path] = []
        try:
            _write(archive, plan, Path(target), shown, limits, written)
        except BaseException:
            for path in written:  # half an archive is no use to anyone
                path.unlink(missing_ok=True)
            raise
        return written


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _check_members(archive: zipfile.ZipFile, shown: str, limits: ZipLimits) -> list[_Planned]:
    members = [m for m in archive.infolist() if not m.is_dir()]
    if len(members) > limits.max_members:
        raise InvalidInput(f"{shown} holds {len(members):,} files; at most {limits.max_members:,} are accepted")
    declared = sum(m.file_size for m in members)
    if declared > limits.max_bytes:
        raise InvalidInput(f"{shown} unpacks to {declared:,} bytes; at most {limits.max_bytes:,} are accepted")
    plan: list[_Planned] = []
    files: dict[tuple[str, ...], str] = {}  # case-folded path -> member name
    for member in archive.infolist():
        name = member.filename
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if not parts or name.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
            raise InvalidInput(f"{shown} holds {name!r}, a path leading outside the archive")
        if any(unicodedata.category(c) == "Cc" for c in name):
            raise InvalidInput(f"{shown} holds {name!r}, a name with control characters")
        if parts[0] == "__MACOSX" or any(p.startswith(".") for p in parts):
            continue  # resource forks and hidden files are not items
        if member.is_dir():
            continue
        if member.flag_bits & 0x1:
            raise InvalidInput(f"{shown} holds {name!r}, which is encrypted; upload an archive without a password")
        if member.compress_type not in _READABLE_METHODS:
            raise InvalidInput(
                f"{shown} holds {name!r}, compressed with a method winnow cannot read "
                f"(zip method {member.compress_type}); re-create the archive with deflate"
            )
        if stat.S_ISLNK(member.external_attr >> 16):
            raise InvalidInput(f"{shown} holds {name!r}, a symbolic link; links are not accepted")
        folded = tuple(unicodedata.normalize("NFC", p).casefold() for p in parts)
        if folded in files:
            raise InvalidInput(f"{shown} holds {files[folded]!r} and {name!r}, which would be one file; rename one")
        files[folded] = name
        plan.append(_Planned(member, parts))
    # A name both a file and a folder ("a" and "a/b.png"): one would replace the other.
    for folded, name in files.items():
        for depth in range(1, len(folded)):
            other = files.get(folded[:depth])
            if other is not None:
                raise InvalidInput(
                    f"{shown} holds a file {other!r} and a folder of the same name ({name!r}); rename one"
                )
    for item in plan:
        _check_image_header(archive, item.info, shown)
    return plan


def _check_image_header(archive: zipfile.ZipFile, member: zipfile.ZipInfo, shown: str) -> None:
    extension = PurePosixPath(member.filename).suffix.lower()
    if extension not in IMAGE_EXTENSIONS:
        return
    signatures = IMAGE_SIGNATURES.get(extension, ())
    try:
        with archive.open(member) as handle:
            head = handle.read(16)  # a few bytes inflated, whatever the member's size
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError, EOFError, ValueError) as exc:
        raise InvalidInput(f"{shown} holds {member.filename!r}, which cannot be read ({_first_line(exc)})") from None
    ok = any(head.startswith(s) for s in signatures)
    if extension == ".webp":
        ok = ok and head[8:12] == b"WEBP"
    if not ok:
        raise InvalidInput(
            f"{shown} holds {member.filename!r}, which is not a {extension[1:].upper()} image "
            "(its first bytes say otherwise)"
        )


def _write(
    archive: zipfile.ZipFile, plan: list[_Planned], target: Path, shown: str, limits: ZipLimits, paths: list[Path]
) -> None:
    """Unpack the checked members, appending each file to ``paths`` as soon as it exists."""
    written = 0
    for item in plan:
        destination = target.joinpath(*item.parts)
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, EXPORT_MODE)
            paths.append(destination)
            os.fchmod(fd, EXPORT_MODE)
            with archive.open(item.info) as source, os.fdopen(fd, "wb") as sink:
                while chunk := source.read(_CHUNK):
                    written += len(chunk)
                    if written > limits.max_bytes:  # the declared sizes lied
                        raise InvalidInput(f"{shown} unpacks to more than {limits.max_bytes:,} bytes")
                    sink.write(chunk)
        except InvalidInput:
            raise
        except (zipfile.BadZipFile, RuntimeError, NotImplementedError, EOFError, ValueError) as exc:
            raise InvalidInput(
                f"{shown} holds {item.info.filename!r}, which cannot be read ({_first_line(exc)})"
            ) from None
        except OSError as exc:
            raise InvalidInput(f"{shown}: {item.info.filename!r} cannot be unpacked ({exc.strerror or exc})") from None
