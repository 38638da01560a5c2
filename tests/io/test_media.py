"""app.io.media: resolving media cells, opening images safely, checking audio clips."""

from __future__ import annotations

import struct
import wave
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.io.media import (
    AUDIO_MIME_TYPES,
    ContentError,
    MediaRef,
    check_audio,
    check_image,
    load_image,
    resolve_media,
    thumbnail_for_display,
)
from engine.exceptions import InvalidInput


def png_claiming(width: int, height: int) -> bytes:
    """A PNG signature + IHDR + IEND: a valid header for a huge image, with no pixel data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    media = tmp_path / "data"
    (media / "photos").mkdir(parents=True)
    Image.new("RGB", (4, 3), (200, 10, 10)).save(media / "photos" / "cat.png")
    (tmp_path / "secret.png").write_bytes(b"outside")
    return media


# ---------------------------------------------------------------------------- resolve_media


def test_relative_path_resolves_inside_root(root: Path) -> None:
    ref = resolve_media("photos/cat.png", root, row=3, column="image")
    assert ref == MediaRef(
        kind="file",
        value="photos/cat.png",
        path=(root / "photos" / "cat.png").resolve(),
        relative_path="photos/cat.png",
    )


def test_surrounding_blanks_and_dot_segments_inside_root_are_fine(root: Path) -> None:
    ref = resolve_media("  photos/../photos/./cat.png ", root)
    assert ref.relative_path == "photos/cat.png" and ref.value == "photos/../photos/./cat.png"


def test_absolute_path_inside_root_is_accepted(root: Path) -> None:
    ref = resolve_media(str((root / "photos" / "cat.png").resolve()), root)
    assert ref.kind == "file" and ref.relative_path == "photos/cat.png"


@pytest.mark.parametrize("value", ["../secret.png", "../../etc/passwd", "photos/../../secret.png", "/etc/passwd"])
def test_paths_outside_root_are_refused_naming_row_and_column(root: Path, value: str) -> None:
    with pytest.raises(ContentError, match=r"^row 7, column 'image': .*points outside the media root") as info:
        resolve_media(value, root, row=7, column="image")
    assert info.value.row == 7 and info.value.column == "image"
    assert str(root) not in str(info.value)  # no server path in the message


def test_symlink_leaving_root_is_refused_and_one_staying_inside_is_followed(root: Path, tmp_path: Path) -> None:
    (root / "escape.png").symlink_to(tmp_path / "secret.png")
    (root / "alias.png").symlink_to(root / "photos" / "cat.png")
    with pytest.raises(ContentError, match="outside the media root"):
        resolve_media("escape.png", root)
    assert resolve_media("alias.png", root).relative_path == "photos/cat.png"


def test_missing_file_and_folder_are_refused(root: Path) -> None:
    with pytest.raises(ContentError, match=r"^row 2, column 'image': 'photos/dog.png' does not exist"):
        resolve_media("photos/dog.png", root, row=2, column="image")
    with pytest.raises(ContentError, match="is a folder"):
        resolve_media("photos", root)
    assert resolve_media("photos/dog.png", root, must_exist=False).relative_path == "photos/dog.png"


def test_missing_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ContentError, match="media root .* does not exist"):
        resolve_media("a.png", tmp_path / "nowhere")


def test_windows_separators_are_tried_when_the_literal_name_does_not_exist(root: Path) -> None:
    assert resolve_media("photos\\cat.png", root).relative_path == "photos/cat.png"


def test_windows_drive_is_a_path_not_a_scheme(root: Path) -> None:
    with pytest.raises(ContentError, match="does not exist"):
        resolve_media("C:/photos/cat.png", root)


@pytest.mark.parametrize("url", ["https://example.org/a.png", "http://host:8080/p?q=1#x", "HTTPS://EXAMPLE.ORG/A"])
def test_http_urls_are_kept_as_links(root: Path, url: str) -> None:
    assert resolve_media(url, root) == MediaRef(kind="url", value=url, url=url)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("file:///etc/passwd", "scheme 'file'"),
        ("javascript:alert(1)", "scheme 'javascript'"),
        ("data:image/png;base64,AAAA", "scheme 'data'"),
        ("ftp://host/a.png", "scheme 'ftp'"),
        ("http://", "no host name"),
        ("https://host/a b.png", "spaces or control characters"),
        ("http://host:99999/a.png", "not a valid URL"),
        ("https://host/" + "a" * 3000, "at most 2048"),
    ],
)
def test_bad_links_are_refused(root: Path, value: str, message: str) -> None:
    with pytest.raises(ContentError, match=message):
        resolve_media(value, root, row=1, column="image")


@pytest.mark.parametrize("value", ["", "   ", None, float("nan")])
def test_empty_cell_is_refused(root: Path, value: object) -> None:
    with pytest.raises(ContentError, match=r"^row 4, column 'audio': the cell is empty"):
        resolve_media(value, root, row=4, column="audio")


def test_non_text_cell_and_nul_are_refused(root: Path) -> None:
    with pytest.raises(ContentError, match="is not a file path or URL"):
        resolve_media(12, root)
    with pytest.raises(ContentError, match="NUL"):
        resolve_media("cat\x00.png", root)


def test_error_is_one_line_and_an_invalid_input(root: Path) -> None:
    with pytest.raises(InvalidInput) as info:
        resolve_media("a\nb.png", root, row=1, column="image")
    assert "\n" not in str(info.value)


def test_located_adds_row_and_column() -> None:
    error = ContentError("broken").located(row=5, column="image")
    assert str(error) == "row 5, column 'image': broken"
    assert str(error.located(row=6)) == "row 6, column 'image': broken"


# ---------------------------------------------------------------------------- images


def test_load_image_keeps_colour_of_rgb(tmp_path: Path) -> None:
    pixels = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "a.png")
    np.testing.assert_array_equal(load_image(tmp_path / "a.png"), pixels)


def test_transparent_pixels_become_white(tmp_path: Path) -> None:
    rgba = np.zeros((2, 2, 4), dtype=np.uint8)
    rgba[0, 0] = (255, 0, 0, 255)  # opaque red
    rgba[0, 1] = (0, 0, 255, 0)  # transparent blue
    Image.fromarray(rgba, mode="RGBA").save(tmp_path / "a.png")
    out = load_image(tmp_path / "a.png")
    assert tuple(out[0, 0]) == (255, 0, 0) and tuple(out[0, 1]) == (255, 255, 255)


def test_palette_with_transparency(tmp_path: Path) -> None:
    image = Image.new("P", (2, 1))
    image.putpalette([0, 200, 0] + [10, 20, 30] + [0] * 762)
    image.putpixel((0, 0), 0)
    image.putpixel((1, 0), 1)
    image.save(tmp_path / "a.png", transparency=1)
    out = load_image(tmp_path / "a.png")
    assert tuple(out[0, 0]) == (0, 200, 0) and tuple(out[0, 1]) == (255, 255, 255)


def test_greyscale_and_sixteen_bit_are_scaled_not_clipped(tmp_path: Path) -> None:
    Image.new("L", (3, 2), 77).save(tmp_path / "grey.png")
    assert (load_image(tmp_path / "grey.png") == 77).all()
    deep = np.array([[0, 32896, 65535]], dtype=np.uint16)
    Image.fromarray(deep).save(tmp_path / "deep.png")
    assert Image.open(tmp_path / "deep.png").mode.startswith("I")
    out = load_image(tmp_path / "deep.png")
    assert out.shape == (1, 3, 3) and out.dtype == np.uint8
    np.testing.assert_array_equal(out[0, :, 0], [0, 128, 255])


def test_cmyk_jpeg_and_exif_rotation(tmp_path: Path) -> None:
    Image.new("CMYK", (6, 4), (0, 255, 255, 0)).save(tmp_path / "cmyk.jpg")
    out = load_image(tmp_path / "cmyk.jpg")
    assert out.shape == (4, 6, 3) and out[..., 0].mean() > 200 and out[..., 1].mean() < 60
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    Image.new("RGB", (6, 4), "white").save(tmp_path / "turned.jpg", exif=exif)
    assert load_image(tmp_path / "turned.jpg").shape == (6, 4, 3)


def test_non_images_and_unsupported_formats_are_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.png").write_text("not a picture")
    with pytest.raises(ContentError, match="'notes.png' is not an image in a supported format"):
        load_image(tmp_path / "notes.png")
    Image.new("RGB", (2, 2)).save(tmp_path / "a.ppm")  # Pillow reads PPM, winnow does not
    with pytest.raises(ContentError, match="not an image in a supported format"):
        check_image(tmp_path / "a.ppm")
    with pytest.raises(ContentError, match="does not exist"):
        load_image(tmp_path / "none.png")


def test_truncated_image_is_refused_on_decoding(tmp_path: Path) -> None:
    pixels = np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "full.png")
    data = (tmp_path / "full.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    assert check_image(tmp_path / "cut.png").width == 64  # the header alone is fine
    with pytest.raises(ContentError, match="'cut.png' is damaged or truncated"):
        load_image(tmp_path / "cut.png")


def test_two_hundred_megapixel_png_is_refused_before_decoding(tmp_path: Path) -> None:
    # A 70-byte file claiming 20000 x 10000 pixels: decoding it would need 600 MB.
    (tmp_path / "bomb.png").write_bytes(png_claiming(20000, 10000))
    with pytest.raises(ContentError, match="decompression-bomb limit"):
        check_image(tmp_path / "bomb.png")
    with pytest.raises(ContentError, match="decompression-bomb limit"):
        load_image(tmp_path / "bomb.png")


def test_pixel_limit_is_ours_and_configurable(tmp_path: Path) -> None:
    # 60 megapixels: under Pillow's own guard, over winnow's 50-megapixel default.
    (tmp_path / "big.png").write_bytes(png_claiming(10000, 6000))
    with pytest.raises(ContentError, match=r"10000x6000 = 60,000,000 pixels; at most 50,000,000"):
        load_image(tmp_path / "big.png")
    Image.new("RGB", (20, 20)).save(tmp_path / "small.png")
    with pytest.raises(ContentError, match="at most 100 are accepted"):
        load_image(tmp_path / "small.png", max_pixels=100)
    assert check_image(tmp_path / "small.png", max_pixels=400).format == "PNG"
    with pytest.raises(ValueError, match="max_pixels"):
        check_image(tmp_path / "small.png", max_pixels=0)


def test_thumbnail_shrinks_but_never_enlarges(tmp_path: Path) -> None:
    Image.new("RGB", (300, 200), (0, 128, 255)).save(tmp_path / "big.jpg", quality=95)
    Image.new("RGB", (40, 30), (0, 128, 255)).save(tmp_path / "small.png")
    big = thumbnail_for_display(tmp_path / "big.jpg", 100)
    assert big.shape == (67, 100, 3) and abs(int(big[30, 50, 2]) - 255) < 8
    assert thumbnail_for_display(tmp_path / "small.png", 100).shape == (30, 40, 3)


# ---------------------------------------------------------------------------- audio


def _wav(path: Path) -> None:
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(8000)
        handle.writeframes(b"\x00\x00" * 80)


@pytest.mark.parametrize(
    ("name", "head", "mime"),
    [
        ("a.mp3", b"ID3\x04\x00\x00\x00\x00\x00\x00", "audio/mpeg"),
        ("b.mp3", b"\xff\xfb\x90\x64" + b"\x00" * 8, "audio/mpeg"),
        ("c.ogg", b"OggS\x00\x02" + b"\x00" * 8, "audio/ogg"),
        ("d.flac", b"fLaC\x00\x00\x00\x22" + b"\x00" * 8, "audio/flac"),
        ("e.m4a", b"\x00\x00\x00\x20ftypM4A " + b"\x00" * 8, "audio/mp4"),
    ],
)
def test_audio_formats_by_content(tmp_path: Path, name: str, head: bytes, mime: str) -> None:
    (tmp_path / name).write_bytes(head)
    assert check_audio(tmp_path / name) == mime


def test_wav_and_content_wins_over_extension(tmp_path: Path) -> None:
    _wav(tmp_path / "a.wav")
    assert check_audio(tmp_path / "a.wav") == AUDIO_MIME_TYPES["wav"] == "audio/wav"
    _wav(tmp_path / "mislabelled.mp3")
    assert check_audio(tmp_path / "mislabelled.mp3") == "audio/wav"


def test_bad_audio_is_refused(tmp_path: Path) -> None:
    (tmp_path / "fake.mp3").write_text("hello, not audio")
    with pytest.raises(ContentError, match="'fake.mp3' is not an audio file"):
        check_audio(tmp_path / "fake.mp3")
    _wav(tmp_path / "clip.txt")
    with pytest.raises(ContentError, match="does not have an audio extension"):
        check_audio(tmp_path / "clip.txt")
    with pytest.raises(ContentError, match="does not exist"):
        check_audio(tmp_path / "none.wav")
    (tmp_path / "folder.wav").mkdir()
    with pytest.raises(ContentError, match="not a regular file"):
        check_audio(tmp_path / "folder.wav")
    _wav(tmp_path / "long.wav")
    with pytest.raises(ContentError, match="at most 10 are accepted"):
        check_audio(tmp_path / "long.wav", max_bytes=10)
