"""Image features with no model weights: a colour thumbnail, a coarse HOG and a colour histogram.

See :mod:`app.io.featurizers` for the blocks, how the default was chosen and the references.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from app.io.featurizers.records import STATE_FORMAT, FeaturizerRecord, check_int, check_record, row_numbers
from app.io.media import MAX_IMAGE_PIXELS, ContentError, load_image
from engine.exceptions import InvalidInput

IMAGE_BLOCKS: tuple[str, ...] = ("thumbnail", "hog", "histogram", "pixels")
"""Blocks :class:`ImageFeaturizer` can concatenate (see its docstring)."""

_LOAD_SIDE = 256  # images are decoded to at most this side before the (smaller) block resizes


def as_rgb_array(image: Any, row: int, max_pixels: int) -> np.ndarray:
    """An input image (path or array) as uint8 RGB of at most ``_LOAD_SIDE`` per side."""
    from PIL import Image

    if isinstance(image, (str, os.PathLike)):
        try:
            return load_image(image, max_pixels=max_pixels, max_side=_LOAD_SIDE)
        except ContentError as exc:
            raise exc.located(row=row) from None
    if not isinstance(image, np.ndarray):
        raise TypeError(f"row {row}: an image must be a path or a uint8 array, got {type(image).__name__}")
    if image.dtype != np.uint8 or image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (3, 4)):
        raise ValueError(
            f"row {row}: an image array must be uint8 of shape (h, w), (h, w, 3) or (h, w, 4); "
            f"got {image.dtype} {image.shape}"
        )
    if image.shape[0] < 1 or image.shape[1] < 1:
        raise ContentError(f"the image is {image.shape[1]}x{image.shape[0]} pixels", row=row)
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    elif image.shape[2] == 4:
        alpha = image[:, :, 3:4].astype(np.float64) / 255.0
        image = np.rint(image[:, :, :3] * alpha + 255.0 * (1.0 - alpha)).astype(np.uint8)
    if max(image.shape[:2]) > _LOAD_SIDE:
        pil = Image.fromarray(image)
        pil.thumbnail((_LOAD_SIDE, _LOAD_SIDE), Image.Resampling.LANCZOS)
        image = np.asarray(pil)
    return image


def _resized(rgb: np.ndarray, side: int, *, grey: bool = False) -> np.ndarray:
    """Squash ``rgb`` to ``side`` x ``side`` (antialiased), as float64 in [0, 1]."""
    from PIL import Image

    pil = Image.fromarray(rgb)
    if grey:
        pil = pil.convert("L")
    small = pil.resize((side, side), Image.Resampling.LANCZOS)
    return np.asarray(small, dtype=np.float64) / 255.0


def _block(rgb: np.ndarray, block: str, side: int, hog_cells: int = 8) -> np.ndarray:
    """One feature block of one image (before block weighting)."""
    if block == "pixels":
        return _resized(rgb, side).ravel()
    if block == "thumbnail":
        from skimage.color import rgb2lab

        lab = rgb2lab(_resized(rgb, side))
        # L in [0, 100], a and b in about [-100, 100]: one scale keeps the colour distances
        # perceptual (Lab is built so that Euclidean distance follows perceived difference).
        return (lab / 100.0).ravel()
    if block == "hog":
        from skimage.feature import hog

        grey = _resized(rgb, side, grey=True)
        cell = side // hog_cells
        return hog(
            grey,
            orientations=9,
            pixels_per_cell=(cell, cell),
            cells_per_block=(2, 2),
            block_norm="L2-Hys",
            feature_vector=True,
        )
    if block == "histogram":
        from skimage.color import rgb2hsv

        hsv = rgb2hsv(_resized(rgb, side)).reshape(-1, 3)
        # 8 hues x 3 saturations x 3 values; hue is meaningless for greys, which fall in the
        # low-saturation bins whatever their hue.
        edges = (np.linspace(0, 1, 9), np.linspace(0, 1, 4), np.linspace(0, 1, 4))
        counts, _ = np.histogramdd(hsv, bins=edges)
        return np.sqrt(counts.ravel() / hsv.shape[0])  # Hellinger embedding: unit norm
    raise ValueError(f"unknown image block {block!r}; choose from {', '.join(IMAGE_BLOCKS)}")


class ImageFeaturizer:
    """Image features without model weights: thumbnail + coarse HOG + colour histogram by default.

    Each image is shrunk (aspect ratio not kept: the whole picture counts) and described by the
    concatenation of ``blocks``; every block is scaled to unit L2 norm, so each weighs the same
    in Euclidean distance whatever its length.

    ========== ============================================================ ==================
    block      what it measures                                             length
    ========== ============================================================ ==================
    thumbnail  colour layout: ``thumbnail_side``² pixels in CIE Lab          3 x side²
    hog        shape: HOG of a ``hog_side``² greyscale resize cut into      36 x (cells - 1)²
               ``hog_cells``² cells, 9 orientations, 2x2 blocks, L2-Hys [3]_
    histogram  colour distribution: 8x3x3 HSV histogram, Hellinger          72
    pixels     raw RGB values of a ``pixels_side``² resize                  3 x side²
    ========== ============================================================ ==================

    Parameters
    ----------
    blocks : sequence of str, default ("thumbnail", "hog", "histogram")
        Blocks to concatenate, from :data:`IMAGE_BLOCKS`.
    thumbnail_side : int, default 4
    hog_side : int, default 64
        A multiple of ``hog_cells``.
    hog_cells : int, default 2
        HOG cells per side (at least 2). Two cells of 32 px give one 2x2 block: where the
        edges run in each quarter of the picture, which matched textures and photos best.
    pixels_side : int, default 16
    max_pixels : int, default :data:`~app.io.media.MAX_IMAGE_PIXELS`
        Largest image accepted when a path is given.

    Notes
    -----
    The defaults are the best simple combination measured by ``benchmarks/bench_featurizers.py``
    (leave-one-out 5-NN accuracy over seven image sets; see ``docs/featurizers.md``): finer HOG
    grids and larger thumbnails help on centred shapes such as digits but hurt on textures and
    photo crops, where the exact position of a stroke means little. Images given as paths are
    decoded with :func:`~app.io.media.load_image` (any mode; colour kept; at most
    256 px per side before the block resizes). The featurizer is stateless: ``fit`` only checks
    the parameters, and a record holds no state.
    """

    name: ClassVar[str] = "image"

    def __init__(
        self,
        blocks: Sequence[str] = ("thumbnail", "hog", "histogram"),
        *,
        thumbnail_side: int = 4,
        hog_side: int = 64,
        hog_cells: int = 2,
        pixels_side: int = 16,
        max_pixels: int = MAX_IMAGE_PIXELS,
    ) -> None:
        self.blocks = blocks
        self.thumbnail_side = thumbnail_side
        self.hog_side = hog_side
        self.hog_cells = hog_cells
        self.pixels_side = pixels_side
        self.max_pixels = max_pixels

    def _params(self) -> dict[str, Any]:
        if isinstance(self.blocks, str):
            raise TypeError("blocks must be a sequence of block names, not a single string")
        blocks = list(self.blocks)
        unknown = [b for b in blocks if b not in IMAGE_BLOCKS]
        if not blocks or unknown or len(set(blocks)) != len(blocks):
            raise ValueError(f"blocks must be distinct names from {', '.join(IMAGE_BLOCKS)}; got {self.blocks!r}")
        hog_cells = check_int("hog_cells", self.hog_cells, 2)
        hog_side = check_int("hog_side", self.hog_side, 2 * hog_cells)
        if hog_side % hog_cells:
            raise ValueError(f"hog_side must be a multiple of hog_cells ({hog_cells}), got {hog_side}")
        return {
            "blocks": blocks,
            "thumbnail_side": check_int("thumbnail_side", self.thumbnail_side, 1),
            "hog_side": hog_side,
            "hog_cells": hog_cells,
            "pixels_side": check_int("pixels_side", self.pixels_side, 1),
            "max_pixels": check_int("max_pixels", self.max_pixels, 1),
        }

    @property
    def dimension_(self) -> int:
        """Number of output columns (known without fitting: the featurizer is stateless)."""
        params = self._params()
        sizes = {
            "thumbnail": 3 * params["thumbnail_side"] ** 2,
            "hog": 36 * (params["hog_cells"] - 1) ** 2,
            "histogram": 72,
            "pixels": 3 * params["pixels_side"] ** 2,
        }
        return sum(sizes[b] for b in params["blocks"])

    def fit(self, images: Sequence[Any] = (), *, rows: Sequence[int] | None = None) -> ImageFeaturizer:
        """Check the parameters (nothing is learned); returns ``self``."""
        self._params()
        return self

    def transform(self, images: Sequence[Any], *, rows: Sequence[int] | None = None) -> np.ndarray:
        """Features of ``images``.

        Parameters
        ----------
        images : sequence of path or ndarray
            Image files, or uint8 arrays of shape (h, w), (h, w, 3) or (h, w, 4).
        rows : sequence of int, optional
            1-based row number of each image for error messages (default 1, 2, ...).

        Returns
        -------
        ndarray of shape (n_images, dimension_), float64

        Raises
        ------
        ContentError
            A file is not an image, is damaged, or is larger than ``max_pixels``.
        """
        params = self._params()
        images = list(images)
        numbers = row_numbers(rows, len(images))
        sides = {
            "thumbnail": params["thumbnail_side"],
            "hog": params["hog_side"],
            "histogram": 32,
            "pixels": params["pixels_side"],
        }
        out = np.empty((len(images), self.dimension_), dtype=np.float64)
        for i, (image, row) in enumerate(zip(images, numbers, strict=True)):
            rgb = as_rgb_array(image, row, params["max_pixels"])
            parts = []
            for block in params["blocks"]:
                values = _block(rgb, block, sides[block], params["hog_cells"])
                norm = float(np.linalg.norm(values))
                parts.append(values / norm if norm > 0 else values)
            out[i] = np.concatenate(parts)
        return out

    def fit_transform(self, images: Sequence[Any], *, rows: Sequence[int] | None = None) -> np.ndarray:
        """:meth:`fit` then :meth:`transform`."""
        return self.fit(images, rows=rows).transform(images, rows=rows)

    def to_record(self) -> FeaturizerRecord:
        """The featurizer as a :class:`FeaturizerRecord` (parameters only; no state)."""
        params = {**self._params(), "format": STATE_FORMAT, "output_dimension": self.dimension_}
        return FeaturizerRecord(name=self.name, params=params, state=b"")

    @classmethod
    def from_record(cls, record: FeaturizerRecord) -> ImageFeaturizer:
        """Rebuild the featurizer from :meth:`to_record`'s output."""
        params = check_record(record, cls.name)
        output_dimension = params.pop("output_dimension", None)
        try:
            featurizer = cls(**params)
            featurizer._params()
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"record parameters are not valid for {cls.name!r}: {exc}") from None
        if output_dimension != featurizer.dimension_:
            raise InvalidInput(
                f"record of {cls.name!r} says dimension {output_dimension!r}, "
                f"its parameters give {featurizer.dimension_}"
            )
        return featurizer
