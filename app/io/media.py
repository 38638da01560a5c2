"""Item media: resolve a cell to a file or a link, open images safely, check audio clips.

A dataset cell that names an image or an audio clip is either a **path** or an **http(s) URL**.
:func:`resolve_media` turns it into a :class:`MediaRef`:

- a relative path resolves against the media root (the data file's folder, or ``--media-root``);
- an absolute path is accepted only when it lies inside the media root;
- symbolic links are followed *before* the check, so a link inside the root that points outside
  it is refused like ``../../etc/passwd``;
- ``http://`` and ``https://`` URLs are kept as links (never fetched here); any other scheme
  (``file:``, ``javascript:``, ``data:``, ...) is refused. A cell that starts with two or more
  letters and a colon is read as a URL; ``C:/photos/a.png`` (one letter) is a path.

Images are opened with Pillow, restricted to :data:`IMAGE_FORMATS` (Pillow can also open
formats such as EPS that run external programs). The pixel count is read from the header and
compared to ``max_pixels`` (:data:`MAX_IMAGE_PIXELS` by default) **before** any pixel is
decoded, so a small file that claims 200 megapixels is refused without allocating them.

Errors are :class:`ContentError`: one line, naming the row (1-based data row, the first item is
row 1) and the column when the caller gives them, quoting the value as written in the data file
and never the server path it resolved to.
"""

from __future__ import annotations

import os
import re
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

import numpy as np

from engine.exceptions import InvalidInput

if TYPE_CHECKING:
    from PIL.Image import Image as PillowImage

__all__ = [
    "AUDIO_MIME_TYPES",
    "IMAGE_EXTENSIONS",
    "IMAGE_FORMATS",
    "MAX_AUDIO_BYTES",
    "MAX_IMAGE_PIXELS",
    "MAX_URL_LENGTH",
    "ImageInfo",
    "ContentError",
    "MediaRef",
    "check_audio",
    "check_image",
    "load_image",
    "resolve_media",
    "thumbnail_for_display",
]

MAX_IMAGE_PIXELS = 50_000_000
"""Default largest image accepted, in pixels (width x height): 50 megapixels.

A 50-megapixel RGB image decodes to 150 MB; anything larger is refused before decoding."""

MAX_AUDIO_BYTES = 200 * 1024 * 1024
"""Default largest audio file accepted, in bytes (the browser receives the whole file)."""

MAX_URL_LENGTH = 2048
"""Longest http(s) link kept (what browsers and servers reliably accept)."""

IMAGE_FORMATS: tuple[str, ...] = ("PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP")
"""Pillow format names :func:`load_image` opens. The JPEG opener also reads MPO, the JPEG
variant many cameras write; its files report the format ``"MPO"``."""

IMAGE_EXTENSIONS: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp")
"""File extensions taken for images when a folder is scanned (compared case-insensitively)."""

AUDIO_MIME_TYPES: dict[str, str] = {
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "ogg": "audio/ogg",
    "flac": "audio/flac",
    "m4a": "audio/mp4",
}
"""Audio formats :func:`check_audio` accepts and the MIME type each is served with."""

_AUDIO_EXTENSIONS: dict[str, str] = {
    ".wav": "wav",
    ".wave": "wav",
    ".mp3": "mp3",
    ".ogg": "ogg",
    ".oga": "ogg",
    ".opus": "ogg",
    ".flac": "flac",
    ".m4a": "m4a",
    ".mp4": "m4a",
    ".aac": "m4a",
}
# A URL scheme is at least two characters, so "C:/photos/a.png" (a Windows drive) is a path.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):")
_SHOWN_VALUE = 120  # longest quoted cell in an error message


class ContentError(InvalidInput):
    """An item's content (text, image, audio) cannot be used; one line naming row, column, problem.

    Raised by this module and by :mod:`app.io.featurizers`. A caller that reads a data file turns
    it into :class:`~app.io.errors.DataFileError` with ``problem``, ``row`` and ``column``.

    Parameters
    ----------
    problem : str
        What is wrong, quoting the value as written in the data file (never a server path).
    row : int, optional
        1-based data row of the item (the first item is row 1).
    column : str, optional
        The column that holds the media reference.

    Attributes
    ----------
    problem, row, column : as above.
    """

    def __init__(self, problem: str, *, row: int | None = None, column: str | None = None) -> None:
        self.problem = problem
        self.row = row
        self.column = column
        where = []
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        text = f"{', '.join(where)}: {problem}" if where else problem
        super().__init__(text.replace("\r", "\\r").replace("\n", "\\n"))

    def located(self, *, row: int | None = None, column: str | None = None) -> ContentError:
        """The same problem, located at ``row`` / ``column`` (a caller that knows them adds them).

        Parameters
        ----------
        row : int, optional
            1-based data row; keeps the current one when ``None``.
        column : str, optional
            Column name; keeps the current one when ``None``.

        Returns
        -------
        ContentError
        """
        return ContentError(
            self.problem,
            row=self.row if row is None else row,
            column=self.column if column is None else column,
        )


@dataclass(frozen=True)
class MediaRef:
    """Where an item's image or audio clip is.

    Attributes
    ----------
    kind : {"file", "url"}
        A file under the media root, or an http(s) link kept as is.
    value : str
        The cell as written in the data file (stripped of surrounding blanks).
    path : pathlib.Path or None
        For files: the absolute path with symbolic links resolved, inside the media root.
    relative_path : str or None
        For files: ``path`` relative to the resolved media root, with ``/`` separators (the form
        to store, so that the media root can move).
    url : str or None
        For links: the URL.
    """

    kind: Literal["file", "url"]
    value: str
    path: Path | None = None
    relative_path: str | None = None
    url: str | None = None


@dataclass(frozen=True)
class ImageInfo:
    """What an image file's header says, read without decoding pixels.

    Attributes
    ----------
    width, height : int
        Size in pixels (before any EXIF rotation).
    format : str
        Pillow format name: one of :data:`IMAGE_FORMATS`, or ``"MPO"``.
    mode : str
        Pillow mode (``"RGB"``, ``"RGBA"``, ``"P"``, ``"L"``, ``"I;16"``, ...).
    """

    width: int
    height: int
    format: str
    mode: str


def _shown(value: str) -> str:
    """``value`` quoted for a message, shortened when long."""
    if len(value) > _SHOWN_VALUE:
        value = value[: _SHOWN_VALUE - 3] + "..."
    return repr(value)


def resolve_media(
    value: object,
    root: str | os.PathLike[str],
    *,
    row: int | None = None,
    column: str | None = None,
    must_exist: bool = True,
) -> MediaRef:
    """Resolve one media cell against the media root.

    Parameters
    ----------
    value : str
        The cell: a path (relative to ``root``, or absolute inside it) or an http(s) URL.
    root : str or os.PathLike
        The media root: the data file's folder, or the folder the user named. Must exist.
    row : int, optional
        1-based data row, for the error message.
    column : str, optional
        Column name, for the error message.
    must_exist : bool, default True
        Whether a path must name an existing regular file.

    Returns
    -------
    MediaRef

    Raises
    ------
    ContentError
        Empty or non-text cell; a scheme other than http/https; a malformed or overlong URL; a
        path outside the media root (after following links); a missing file; a folder.
    """
    if not isinstance(value, str):
        # pandas gives NaN for an empty cell; say "empty" rather than quoting nan.
        if value is None or (isinstance(value, float) and value != value):
            raise ContentError("the cell is empty; give a file path or an http(s) URL", row=row, column=column)
        raise ContentError(f"{value!r} is not a file path or URL (got {type(value).__name__})", row=row, column=column)
    text = value.strip()
    if not text:
        raise ContentError("the cell is empty; give a file path or an http(s) URL", row=row, column=column)
    if "\x00" in text:
        raise ContentError(f"{_shown(text)} contains a NUL character", row=row, column=column)

    scheme = _SCHEME.match(text)
    if scheme is not None:
        return _resolve_url(text, scheme.group(1).lower(), row=row, column=column)
    return _resolve_path(text, root, row=row, column=column, must_exist=must_exist)


def _resolve_url(text: str, scheme: str, *, row: int | None, column: str | None) -> MediaRef:
    if scheme not in ("http", "https"):
        raise ContentError(
            f"{_shown(text)} uses the scheme {scheme!r}; only http and https links or file paths are accepted",
            row=row,
            column=column,
        )
    if len(text) > MAX_URL_LENGTH:
        raise ContentError(
            f"the link is {len(text)} characters long; at most {MAX_URL_LENGTH} are accepted",
            row=row,
            column=column,
        )
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise ContentError(
            f"{_shown(text)} contains spaces or control characters; percent-encode them (%20)",
            row=row,
            column=column,
        )
    try:
        parts = urlsplit(text)
        _ = parts.port  # reading the port raises ValueError on a malformed one
    except ValueError as exc:
        raise ContentError(f"{_shown(text)} is not a valid URL ({exc})", row=row, column=column) from None
    if not parts.hostname:
        raise ContentError(f"{_shown(text)} has no host name", row=row, column=column)
    return MediaRef(kind="url", value=text, url=text)


def _resolve_path(
    text: str, root: str | os.PathLike[str], *, row: int | None, column: str | None, must_exist: bool
) -> MediaRef:
    root_path = Path(root)
    try:
        root_resolved = root_path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ContentError(f"the media root {os.fspath(root)!r} does not exist", row=row, column=column) from None
    if not root_resolved.is_dir():
        raise ContentError(f"the media root {os.fspath(root)!r} is not a folder", row=row, column=column)

    candidates = [text]
    if "\\" in text and os.sep == "/":
        # Files written on Windows say photos\cat.png; try the same path with '/' when the literal
        # name (a backslash is a legal file-name character here) does not exist.
        candidates.append(text.replace("\\", "/"))
    resolved_paths = []
    for attempt in candidates:
        try:
            resolved_paths.append((root_resolved / attempt).resolve(strict=False))
        except (OSError, RuntimeError):  # RuntimeError: a symbolic-link loop on older Pythons
            raise ContentError(
                f"{_shown(text)} cannot be resolved (symbolic-link loop?)", row=row, column=column
            ) from None
    # The first candidate that exists, else the literal one (its error message is the clearest).
    resolved = next((p for p in resolved_paths if p.exists()), resolved_paths[0])

    if not resolved.is_relative_to(root_resolved):
        raise ContentError(
            f"{_shown(text)} points outside the media root; paths must stay inside the data "
            "file's folder (or the folder given as the media root)",
            row=row,
            column=column,
        )
    if must_exist:
        try:
            mode = resolved.stat().st_mode
        except FileNotFoundError:
            raise ContentError(
                f"{_shown(text)} does not exist in the media root {os.fspath(root_resolved)!r} "
                "(give the folder the paths are relative to with --media-root)",
                row=row,
                column=column,
            ) from None
        except OSError as exc:
            raise ContentError(f"{_shown(text)} cannot be read ({exc.strerror})", row=row, column=column) from None
        if stat.S_ISDIR(mode):
            raise ContentError(f"{_shown(text)} is a folder, not a file", row=row, column=column)
        if not stat.S_ISREG(mode):
            raise ContentError(f"{_shown(text)} is not a regular file", row=row, column=column)
    return MediaRef(
        kind="file",
        value=text,
        path=resolved,
        relative_path=resolved.relative_to(root_resolved).as_posix(),
    )


def _check_max_pixels(max_pixels: int) -> None:
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, int):
        raise TypeError(f"max_pixels must be an int, got {type(max_pixels).__name__}")
    if max_pixels < 1:
        raise ValueError(f"max_pixels must be at least 1, got {max_pixels}")


def _open_image(path: str | os.PathLike[str], max_pixels: int) -> PillowImage:
    """Open ``path`` lazily (header only) and check format and size; returns the open image."""
    from PIL import Image, UnidentifiedImageError

    _check_max_pixels(max_pixels)
    name = _shown(Path(path).name)
    try:
        with warnings.catch_warnings():
            # We apply our own (usually lower) limit below; Pillow's warning would only repeat it.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(path, formats=IMAGE_FORMATS)
    except Image.DecompressionBombError:
        # Pillow's own guard fires at twice Image.MAX_IMAGE_PIXELS, while reading the header.
        raise ContentError(f"{name} claims more pixels than the decompression-bomb limit allows") from None
    except UnidentifiedImageError:
        raise ContentError(f"{name} is not an image in a supported format ({', '.join(IMAGE_FORMATS)})") from None
    except FileNotFoundError:
        raise ContentError(f"{name} does not exist") from None
    except IsADirectoryError:
        raise ContentError(f"{name} is a folder, not an image") from None
    except OSError as exc:
        raise ContentError(f"{name} cannot be read ({exc.strerror or exc})") from None
    width, height = image.size
    if width < 1 or height < 1 or width * height > max_pixels:
        image.close()
        raise ContentError(
            f"{name} is {width}x{height} = {width * height:,} pixels; at most {max_pixels:,} are "
            "accepted (decompression-bomb limit)"
        )
    return image


def check_image(path: str | os.PathLike[str], *, max_pixels: int = MAX_IMAGE_PIXELS) -> ImageInfo:
    """Check that ``path`` is an image of a supported format and size, reading only its header.

    Parameters
    ----------
    path : str or os.PathLike
        The image file.
    max_pixels : int, default :data:`MAX_IMAGE_PIXELS`
        Largest width x height accepted.

    Returns
    -------
    ImageInfo

    Raises
    ------
    ContentError
        Not an image Pillow may open (see :data:`IMAGE_FORMATS`), unreadable, or too large.
        Damaged pixel data is found only by :func:`load_image`.
    """
    image = _open_image(path, max_pixels)
    with image:
        return ImageInfo(width=image.size[0], height=image.size[1], format=str(image.format), mode=image.mode)


def load_image(
    path: str | os.PathLike[str],
    *,
    max_pixels: int = MAX_IMAGE_PIXELS,
    max_side: int | None = None,
) -> np.ndarray:
    """Decode an image into RGB pixels, keeping colour.

    The size is checked from the header before decoding (see :func:`check_image`). The EXIF
    orientation is applied, so phone photos come out upright. Transparency is composited onto
    white; palette, greyscale, CMYK and 16-bit images are converted to 8-bit RGB (16-bit grey is
    scaled, not clipped). Animated or multi-page files give their first frame.

    Parameters
    ----------
    path : str or os.PathLike
        The image file.
    max_pixels : int, default :data:`MAX_IMAGE_PIXELS`
        Largest width x height accepted.
    max_side : int, optional
        When given, the image is shrunk (never enlarged) so that neither side exceeds it; JPEG
        files are then decoded at reduced scale, which is much faster for large photos.

    Returns
    -------
    ndarray of shape (height, width, 3), uint8

    Raises
    ------
    ContentError
        As :func:`check_image`, or the pixel data is damaged or truncated.
    """
    from PIL import Image, ImageOps

    if max_side is not None:
        if isinstance(max_side, bool) or not isinstance(max_side, int):
            raise TypeError(f"max_side must be an int or None, got {type(max_side).__name__}")
        if max_side < 1:
            raise ValueError(f"max_side must be at least 1, got {max_side}")
    name = _shown(Path(path).name)
    image = _open_image(path, max_pixels)
    try:
        with image:
            if max_side is not None and image.format in ("JPEG", "MPO"):
                # draft() lets libjpeg decode at 1/2, 1/4 or 1/8 scale, never below the request.
                image.draft("RGB", (max_side, max_side))
            image.load()
            image = ImageOps.exif_transpose(image)
            rgb = _to_rgb(image)
    except ContentError:
        raise
    except (OSError, ValueError, SyntaxError) as exc:
        # Pillow reports damaged data as OSError ("image file is truncated"), ValueError or
        # SyntaxError depending on the decoder.
        raise ContentError(f"{name} is damaged or truncated ({exc})") from None
    if max_side is not None and max(rgb.size) > max_side:
        rgb.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    return np.asarray(rgb, dtype=np.uint8).copy()


def _to_rgb(image: PillowImage) -> PillowImage:
    """Convert any Pillow mode to 8-bit RGB, keeping colour and scaling high bit depths."""
    from PIL import Image

    mode = image.mode
    if mode == "RGB":
        return image
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        values = np.asarray(image, dtype=np.float64)
        if mode.startswith("I;16"):
            top = 65535.0
        else:
            # 32-bit integer or float images carry no fixed range: 16-bit data often arrives as
            # mode "I"; anything else is stretched from 0 to its maximum.
            peak = float(values.max()) if values.size else 0.0
            top = 255.0 if peak <= 255.0 else (65535.0 if peak <= 65535.0 else peak)
        grey = np.clip(np.rint(values * (255.0 / top)), 0, 255).astype(np.uint8)
        return Image.fromarray(grey, mode="L").convert("RGB")
    has_alpha = mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info
    if has_alpha:
        rgba = image.convert("RGBA")
        # Transparent pixels carry arbitrary colour values; white is what a viewer shows.
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def thumbnail_for_display(
    path: str | os.PathLike[str],
    max_side: int,
    *,
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> np.ndarray:
    """An image for the annotator: shrunk to fit ``max_side``, never enlarged into blur.

    Parameters
    ----------
    path : str or os.PathLike
        The image file.
    max_side : int
        Longest side of the result, in pixels. A smaller image keeps its own size (the page
        can scale it up with crisp pixels if it wants; this function does not).
    max_pixels : int, default :data:`MAX_IMAGE_PIXELS`
        Largest width x height accepted.

    Returns
    -------
    ndarray of shape (height, width, 3), uint8
        ``max(height, width) <= max_side``.

    Raises
    ------
    ContentError
        As :func:`load_image`.
    """
    return load_image(path, max_pixels=max_pixels, max_side=max_side)


def _sniff_audio(head: bytes) -> str | None:
    """The audio format the first bytes announce, or ``None``."""
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head[:4] == b"fLaC":
        return "flac"
    if head[:4] == b"OggS":
        return "ogg"
    if len(head) >= 8 and head[4:8] == b"ftyp":
        return "m4a"
    if head[:3] == b"ID3":
        return "mp3"
    if len(head) >= 2 and head[0] == 0xFF and (head[1] & 0xE0) == 0xE0 and (head[1] & 0x06) != 0:
        # MPEG audio frame sync (11 set bits) with a valid layer; (0x06 == 0) is "reserved".
        return "mp3"
    return None


def check_audio(path: str | os.PathLike[str], *, max_bytes: int = MAX_AUDIO_BYTES) -> str:
    """Check that ``path`` is an audio clip a browser can play and return its MIME type.

    The extension must be a known audio one and the first bytes must be those of WAV, MP3, OGG,
    FLAC or MP4/M4A audio. When extension and content disagree, the content wins (browsers
    sniff it too).

    Parameters
    ----------
    path : str or os.PathLike
        The audio file.
    max_bytes : int, default :data:`MAX_AUDIO_BYTES`
        Largest file accepted.

    Returns
    -------
    str
        The MIME type for ``st.audio(..., format=...)``, a value of :data:`AUDIO_MIME_TYPES`.

    Raises
    ------
    ContentError
        Missing, not a regular file, too large, unknown extension, or content that is not audio.
    """
    p = Path(path)
    name = _shown(p.name)
    try:
        info = p.stat()
    except FileNotFoundError:
        raise ContentError(f"{name} does not exist") from None
    except OSError as exc:
        raise ContentError(f"{name} cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ContentError(f"{name} is not a regular file")
    extension = p.suffix.lower()
    if extension not in _AUDIO_EXTENSIONS:
        raise ContentError(f"{name} does not have an audio extension; accepted: {', '.join(sorted(_AUDIO_EXTENSIONS))}")
    if info.st_size > max_bytes:
        raise ContentError(f"{name} is {info.st_size:,} bytes; at most {max_bytes:,} are accepted")
    try:
        with p.open("rb") as handle:
            head = handle.read(16)
    except OSError as exc:
        raise ContentError(f"{name} cannot be read ({exc.strerror})") from None
    kind = _sniff_audio(head)
    if kind is None:
        raise ContentError(f"{name} is not an audio file ({', '.join(AUDIO_MIME_TYPES)})")
    return AUDIO_MIME_TYPES[kind]
