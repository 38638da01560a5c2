"""Uploaded zip archives: every member checked before anything is unpacked, members never
overwrite each other, and every refusal is one InvalidInput line (issue 23, item 8)."""

from __future__ import annotations

import io
import os
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from app.io.zips import ZipLimits, unpack_zip
from engine.exceptions import InvalidInput

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 24


def zipped(entries: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def encrypted(entries: dict[str, bytes]) -> bytes:
    """An archive whose members say they are encrypted (bit 0 of the general-purpose flags), as
    a password-protected zip does; Python's zipfile cannot write real ones."""
    data = bytearray(zipped(entries, compression=zipfile.ZIP_STORED))
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            (flags,) = struct.unpack_from("<H", data, start + offset)
            struct.pack_into("<H", data, start + offset, flags | 1)
            start += 4
    return bytes(data)


DEFAULT_LIMITS = ZipLimits()


def unpack(content: bytes, target: Path, limits: ZipLimits = DEFAULT_LIMITS) -> list[Path]:
    return unpack_zip(io.BytesIO(content), target, "'up.zip'", limits)


def test_members_keep_their_names_and_never_overwrite_each_other(tmp_path):
    written = unpack(zipped({"set/x y.png": PNG + b"1", "set/x_y.png": PNG + b"2", "set/labels.csv": b"a\n"}), tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == [
        "set/labels.csv",
        "set/x y.png",
        "set/x_y.png",
    ]
    assert (tmp_path / "set" / "x y.png").read_bytes() == PNG + b"1"
    assert (tmp_path / "set" / "x_y.png").read_bytes() == PNG + b"2"


def test_unpacked_files_are_0600_whatever_the_umask(tmp_path):
    previous = os.umask(0)
    try:
        (path,) = unpack(zipped({"a.png": PNG}), tmp_path)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a zip at all", r"^'up.zip' is not a valid zip archive \("),
        (
            encrypted({"a.png": PNG}),
            r"^'up.zip' holds 'a.png', which is encrypted; upload an archive without a password$",
        ),
        (
            zipped({"a": b"x", "a/b.png": PNG}),
            r"^'up.zip' holds a file 'a' and a folder of the same name \('a/b.png'\); rename one$",
        ),
        (zipped({"d/A.png": PNG, "d/a.png": PNG}), r"^'up.zip' holds 'd/A.png' and 'd/a.png', which would be one file"),
        (zipped({"../evil.png": PNG}), "a path leading outside the archive"),
        (zipped({"/abs.png": PNG}), "a path leading outside the archive"),
        (zipped({"C:/x.png": PNG}), "a path leading outside the archive"),
        (zipped({"bad\x07.png": PNG}), "a name with control characters"),
        (zipped({"ok.png": PNG, "fake.png": b"GIF89a not a png"}), r"'fake.png', which is not a PNG image"),
        (zipped({"fake.jpg": PNG}), r"'fake.jpg', which is not a JPG image"),
        (zipped({"fake.webp": b"RIFF\x00\x00\x00\x00WAVEfmt "}), r"'fake.webp', which is not a WEBP image"),
    ],
    ids=[
        "not a zip",
        "encrypted",
        "file and folder",
        "case",
        "dotdot",
        "absolute",
        "drive",
        "control",
        "png",
        "jpg",
        "webp",
    ],
)
def test_bad_archives_are_one_line_and_unpack_nothing(tmp_path, content, message):
    with pytest.raises(InvalidInput, match=message) as caught:
        unpack(content, tmp_path)
    assert "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_symbolic_link_is_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        link = zipfile.ZipInfo("link.png")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(InvalidInput, match="'link.png', a symbolic link"):
        unpack(buffer.getvalue(), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_counts_and_sizes_are_checked_before_unpacking(tmp_path):
    entries = {f"{i}.png": PNG for i in range(5)}
    with pytest.raises(InvalidInput, match="holds 5 files; at most 4 are accepted"):
        unpack(zipped(entries), tmp_path, ZipLimits(max_members=4))
    big = {"a.png": PNG + bytes(10_000), "b.png": PNG + bytes(10_000)}
    with pytest.raises(InvalidInput, match=r"unpacks to 20,064 bytes; at most 15,000 are accepted"):
        unpack(zipped(big), tmp_path, ZipLimits(max_bytes=15_000))
    assert list(tmp_path.iterdir()) == []


def test_a_member_that_lies_about_its_size_stops_at_the_limit(tmp_path):
    """The declared sizes are rewritten small; the bytes really inflated are counted."""
    data = bytearray(zipped({"a.png": PNG + bytes(100_000)}))
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = data.find(signature)
        struct.pack_into("<I", data, start + offset, 40)  # uncompressed size: 40 bytes
    with pytest.raises(InvalidInput) as caught:
        unpack(bytes(data), tmp_path, ZipLimits(max_bytes=1_000))
    assert "'up.zip'" in str(caught.value) and "\n" not in str(caught.value)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # what was unpacked is removed


def test_hidden_files_and_resource_forks_are_skipped(tmp_path):
    written = unpack(zipped({"__MACOSX/._a.png": b"junk", ".DS_Store": b"junk", "a.png": PNG}), tmp_path)
    assert [p.name for p in written] == ["a.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png"]
