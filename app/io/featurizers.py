"""Featurizers: the numbers the k-NN measures, computed from item content or brought along.

Four sources of features, all returning ``float64`` arrays of shape ``(n_items, dimension)``:

:class:`TextFeaturizer` (name ``"tfidf-svd"``)
    TF-IDF (sublinear term frequency, smoothed idf) followed by a truncated SVD (latent semantic
    analysis [1]_), rows L2-normalised so that Euclidean neighbours are cosine neighbours.
    ``dimension`` (default 64) is clipped to ``n_docs - 1`` and ``vocabulary - 1``; when that
    leaves fewer than :data:`MIN_SVD_DIMENSION` dimensions (a handful of documents) the
    L2-normalised TF-IDF vectors themselves are the features. Fitting costs
    O(nnz x dimension) for the randomized SVD [2]_; transforming, one sparse product.
:class:`ImageFeaturizer` (name ``"image"``)
    No model weights: a 4x4 colour thumbnail in CIE Lab, a coarse histogram of oriented
    gradients (HOG [3]_, 2x2 cells of a 64 px greyscale resize) and an HSV colour histogram,
    each block L2-normalised so that layout, shape and colour weigh the same: 156 numbers per
    image. The default was chosen by measurement (``benchmarks/bench_featurizers.py``, figures
    in ``docs/featurizers.md``). Stateless.
:class:`SentenceEmbedder` / :class:`ClipEmbedder` (the ``winnow[embed]`` extra)
    sentence-transformers / open_clip models loaded from a **local directory only**; nothing is
    downloaded. A missing package or directory raises :class:`EmbedderUnavailable`.
:func:`load_features_file`
    Embeddings the user brings (``.npy``, ``.npz``, ``.parquet``), aligned by id with the items.

Recording a featurizer
----------------------
A fitted featurizer is recorded on its dataset so that items imported later get the same
transform. :meth:`TextFeaturizer.to_record` returns a :class:`FeaturizerRecord`: a name, JSON
parameters and a ``state`` that is an ``.npz`` archive of plain arrays (no pickle: the store may
hand it back from a file someone else wrote). :func:`featurizer_from_record` rebuilds an equal
featurizer; transforming new items after the round trip gives bit-identical features.

Errors
------
Bad content (an empty text, a broken image) raises :class:`~app.io.media.ContentError` naming
the item's row: the 1-based position in the input, or the number the caller passes in ``rows``
(a reader passes its data-row numbers). A bad features file raises
:class:`~app.io.errors.DataFileError`.

References
----------
.. [1] S. Deerwester, S. T. Dumais, G. W. Furnas, T. K. Landauer and R. Harshman, "Indexing by
   latent semantic analysis", Journal of the American Society for Information Science 41(6),
   391-407, 1990.
.. [2] N. Halko, P. G. Martinsson and J. A. Tropp, "Finding structure with randomness:
   probabilistic algorithms for constructing approximate matrix decompositions", SIAM Review
   53(2), 217-288, 2011.
.. [3] N. Dalal and B. Triggs, "Histograms of oriented gradients for human detection", CVPR 2005.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from app.io.errors import DataFileError
from app.io.limits import DEFAULT_MAX_DECOMPRESSED_BYTES, max_decompressed_bytes, npy_header, npz_member_shapes, too_big
from app.io.media import MAX_IMAGE_PIXELS, ContentError, load_image
from engine.exceptions import InvalidInput, WinnowError

__all__ = [
    "EMBED_EXTRA",
    "FEATURES_FILE_EXTENSIONS",
    "FEATURES_FILE_MAX_BYTES",
    "IMAGE_BLOCKS",
    "MIN_SVD_DIMENSION",
    "ClipEmbedder",
    "EmbedderUnavailable",
    "FeaturizerRecord",
    "ImageFeaturizer",
    "SentenceEmbedder",
    "TextFeaturizer",
    "featurizer_from_record",
    "load_features_file",
]

FEATURES_FILE_MAX_BYTES = DEFAULT_MAX_DECOMPRESSED_BYTES
"""Largest features array :func:`load_features_file` accepts, in bytes (1 GiB), by default: the
decompressed-size limit of :mod:`app.io.limits` (``WINNOW_MAX_DECOMPRESSED_BYTES`` changes it).

Checked *before* loading: from the ``.npy`` header (shape x item size), from the declared
uncompressed sizes and ``.npy`` headers of every ``.npz`` member (a zip bomb is refused without
inflating it), and from the Parquet footer (uncompressed row-group sizes). 1 GiB holds one
million 256-dimensional float32 embeddings with room to spare."""

FEATURES_FILE_EXTENSIONS: tuple[str, ...] = (".npy", ".npz", ".parquet")
"""Extensions :func:`load_features_file` reads (compared case-insensitively)."""

MIN_SVD_DIMENSION = 2
"""Below this many SVD dimensions the text featurizer keeps the TF-IDF vectors themselves."""

IMAGE_BLOCKS: tuple[str, ...] = ("thumbnail", "hog", "histogram", "pixels")
"""Blocks :class:`ImageFeaturizer` can concatenate (see its docstring)."""

EMBED_EXTRA = "embed"
"""The optional dependency group (``pip install 'winnow[embed]'``) the model embedders need."""

_STATE_FORMAT = 1  # bump when the layout of a record's state changes
_LOAD_SIDE = 256  # images are decoded to at most this side before the (smaller) block resizes
_SHOWN = 80  # longest piece of user content quoted in a message


@dataclass(frozen=True)
class FeaturizerRecord:
    """A featurizer as the store keeps it: name, parameters and fitted state, without pickle.

    Attributes
    ----------
    name : str
        ``"tfidf-svd"``, ``"image"``, ``"sentence-transformers"`` or ``"open-clip"``.
    params : dict
        JSON-serialisable parameters (``json.dumps(params)`` works): the constructor's, plus
        ``format`` and, for the built-in featurizers, ``output_dimension``.
    state : bytes
        An ``.npz`` archive of plain arrays (loadable with ``allow_pickle=False``); ``b""`` for
        stateless featurizers.
    """

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    state: bytes = b""


class EmbedderUnavailable(WinnowError, RuntimeError):
    """A model embedder cannot run: its package is not installed or its model directory is absent."""


# --------------------------------------------------------------------------------------------
# shared helpers


def _row_numbers(rows: Sequence[int] | None, n: int) -> Sequence[int]:
    """The 1-based row number of each input, as the caller counts them."""
    if rows is None:
        return range(1, n + 1)
    if len(rows) != n:
        raise ValueError(f"rows has {len(rows)} entries but there are {n} items")
    return rows


def _l2_normalise(Z: np.ndarray) -> np.ndarray:
    """Rows scaled to unit Euclidean norm; all-zero rows stay zero."""
    norms = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    norms[norms == 0.0] = 1.0
    return Z / norms[:, None]


def _quoted(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "...")


def _npz_bytes(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    # numpy's stub reads a ** mapping as possibly holding allow_pickle (a bool); these are arrays.
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return int(value)


def _check_record(record: FeaturizerRecord, name: str) -> dict[str, Any]:
    if not isinstance(record, FeaturizerRecord):
        raise TypeError(f"record must be a FeaturizerRecord, got {type(record).__name__}")
    if record.name != name:
        raise InvalidInput(f"record is for featurizer {record.name!r}, not {name!r}")
    params = dict(record.params)
    version = params.pop("format", None)
    if version != _STATE_FORMAT:
        raise InvalidInput(f"record format {version!r} is not supported (this winnow reads format {_STATE_FORMAT})")
    return params


# --------------------------------------------------------------------------------------------
# text


class TextFeaturizer:
    """TF-IDF + truncated SVD features for short documents, L2-normalised.

    Parameters
    ----------
    dimension : int, default 64
        Requested number of SVD dimensions. The fitted :attr:`dimension_` is at most
        ``n_docs - 1`` and ``vocabulary - 1``; below :data:`MIN_SVD_DIMENSION` the TF-IDF
        vectors are used as they are (:attr:`method_` ``"tfidf"``).
    analyzer : {"word", "char_wb"}, default "word"
        Words of two or more letters/digits, or character 3-5-grams inside word boundaries
        (better for typos and for languages written without spaces).
    min_df : int, default 1
        Ignore terms found in fewer documents.
    max_df : float, default 1.0
        Ignore terms found in more than this fraction of the documents.
    max_features : int, default 20000
        Keep at most this many terms (the most frequent); bounds the recorded state.
    random_state : int, default 0
        Seed of the randomized SVD.

    Attributes
    ----------
    vocabulary_ : ndarray of shape (n_terms,), str
        The terms; term ``j`` is column ``j`` of the TF-IDF matrix.
    idf_ : ndarray of shape (n_terms,), float64
        Smoothed inverse document frequencies, ``ln((1 + n) / (1 + df)) + 1``.
    components_ : ndarray of shape (dimension_, n_terms), float32
        SVD directions; empty (``(0, n_terms)``) when :attr:`method_` is ``"tfidf"``.
    dimension_ : int
        Number of output columns.
    method_ : {"svd", "tfidf"}
        What :meth:`transform` returns.

    Notes
    -----
    Blank texts and texts without a single word raise :class:`~app.io.media.ContentError`. A
    new text whose words are all outside the fitted vocabulary gets an all-zero row (it is
    equally far from every other item).
    """

    name: ClassVar[str] = "tfidf-svd"

    def __init__(
        self,
        dimension: int = 64,
        *,
        analyzer: str = "word",
        min_df: int = 1,
        max_df: float = 1.0,
        max_features: int = 20000,
        random_state: int = 0,
    ) -> None:
        self.dimension = dimension
        self.analyzer = analyzer
        self.min_df = min_df
        self.max_df = max_df
        self.max_features = max_features
        self.random_state = random_state

    def _params(self) -> dict[str, Any]:
        _check_int("dimension", self.dimension, 1)
        _check_int("min_df", self.min_df, 1)
        _check_int("max_features", self.max_features, 1)
        _check_int("random_state", self.random_state, 0)
        if self.analyzer not in ("word", "char_wb"):
            raise ValueError(f"analyzer must be 'word' or 'char_wb', got {self.analyzer!r}")
        if isinstance(self.max_df, bool) or not isinstance(self.max_df, (int, float)) or not 0.0 < self.max_df <= 1.0:
            raise ValueError(f"max_df must be a fraction in (0, 1], got {self.max_df!r}")
        return {
            "dimension": int(self.dimension),
            "analyzer": self.analyzer,
            "min_df": int(self.min_df),
            "max_df": float(self.max_df),
            "max_features": int(self.max_features),
            "random_state": int(self.random_state),
        }

    def _vectorizer(self, vocabulary: dict[str, int] | None = None):
        from sklearn.feature_extraction.text import CountVectorizer

        char = self.analyzer == "char_wb"
        return CountVectorizer(
            analyzer=self.analyzer,
            ngram_range=(3, 5) if char else (1, 1),
            lowercase=True,
            strip_accents="unicode",
            min_df=self.min_df if vocabulary is None else 1,
            max_df=float(self.max_df) if vocabulary is None else 1.0,
            max_features=self.max_features if vocabulary is None else None,
            vocabulary=vocabulary,
            dtype=np.float64,
        )

    def _checked_texts(self, texts: Sequence[Any], rows: Sequence[int] | None) -> tuple[list[str], Sequence[int]]:
        """``texts`` as a list after the cheap checks (type, blank), and their row numbers."""
        if isinstance(texts, (str, bytes)):
            raise TypeError("texts must be a sequence of strings, not a single string")
        texts = list(texts)
        numbers = _row_numbers(rows, len(texts))
        for text, row in zip(texts, numbers, strict=True):
            if text is None or (isinstance(text, float) and math.isnan(text)):
                raise ContentError("the text is empty", row=row)
            if not isinstance(text, str):
                raise ContentError(f"{text!r} is not text (got {type(text).__name__})", row=row)
            if not text.strip():
                raise ContentError("the text is empty", row=row)
        return texts, numbers

    def _check_words(self, texts: list[str], numbers: Sequence[int], counts: Any | None) -> None:
        """Refuse a text without a single word; only rows with no counted term are analysed."""
        analyse = self._vectorizer().build_analyzer()
        suspects = range(len(texts)) if counts is None else np.flatnonzero(np.diff(counts.tocsr().indptr) == 0).tolist()
        for i in suspects:
            if not analyse(texts[i]):
                raise ContentError(
                    f"the text {_quoted(texts[i])} has no word of two or more letters or digits", row=numbers[i]
                )

    def fit(self, texts: Sequence[str], *, rows: Sequence[int] | None = None) -> TextFeaturizer:
        """Learn the vocabulary, idf weights and SVD directions.

        Parameters
        ----------
        texts : sequence of str
            One document per item.
        rows : sequence of int, optional
            1-based row number of each text for error messages (default 1, 2, ...).

        Returns
        -------
        TextFeaturizer
            ``self``.

        Raises
        ------
        ContentError
            A text is blank or has no word.
        """
        params = self._params()
        texts, numbers = self._checked_texts(texts, rows)
        if not texts:
            raise InvalidInput("texts is empty; at least one document is needed to fit")
        vectorizer = self._vectorizer()
        try:
            counts = vectorizer.fit_transform(texts)
        except ValueError as exc:
            # Every text is wordless ("empty vocabulary"), or min_df / max_df pruned every term.
            self._check_words(texts, numbers, None)
            raise InvalidInput(
                f"no term is left to build features from ({exc}); lower min_df or raise max_df"
            ) from None
        self._check_words(texts, numbers, counts)
        terms = np.empty(len(vectorizer.vocabulary_), dtype=object)
        for term, j in vectorizer.vocabulary_.items():
            terms[j] = term
        n_docs = counts.shape[0]
        df = np.asarray((counts > 0).sum(axis=0)).ravel().astype(np.float64)
        self.vocabulary_ = terms.astype(str)
        self.idf_ = np.log((1.0 + n_docs) / (1.0 + df)) + 1.0
        tfidf = self._tfidf(counts)
        dimension = min(params["dimension"], n_docs - 1, len(terms) - 1)
        if dimension >= MIN_SVD_DIMENSION:
            from sklearn.decomposition import TruncatedSVD

            svd = TruncatedSVD(
                n_components=dimension, algorithm="randomized", n_iter=7, random_state=params["random_state"]
            )
            svd.fit(tfidf)
            # float32 halves the recorded state; transform always uses these stored values, so
            # features before and after a round trip are identical.
            self.components_ = svd.components_.astype(np.float32)
            self.method_ = "svd"
            self.dimension_ = dimension
        else:
            self.components_ = np.zeros((0, len(terms)), dtype=np.float32)
            self.method_ = "tfidf"
            self.dimension_ = len(terms)
        return self

    def _tfidf(self, counts) -> Any:
        """Sublinear tf x idf, rows L2-normalised (what sklearn's TfidfTransformer computes)."""
        from sklearn.preprocessing import normalize

        tf = counts.tocsr(copy=True).astype(np.float64)
        np.log(tf.data, out=tf.data)
        tf.data += 1.0
        return normalize(tf.multiply(self.idf_[None, :]).tocsr(), norm="l2", copy=False)

    def _check_fitted(self) -> None:
        if not hasattr(self, "components_"):
            from engine.exceptions import NotFittedError

            raise NotFittedError("this TextFeaturizer is not fitted; call fit or build it from a record")

    def transform(self, texts: Sequence[str], *, rows: Sequence[int] | None = None) -> np.ndarray:
        """Features of ``texts`` with the fitted transform.

        Parameters
        ----------
        texts : sequence of str
            One document per item.
        rows : sequence of int, optional
            1-based row number of each text for error messages (default 1, 2, ...).

        Returns
        -------
        ndarray of shape (n_texts, dimension_), float64
            Unit rows, or zero rows for texts with no known word.

        Raises
        ------
        ContentError
            A text is blank or has no word.
        """
        self._check_fitted()
        texts, numbers = self._checked_texts(texts, rows)
        vocabulary = {str(term): j for j, term in enumerate(self.vocabulary_)}
        counts = self._vectorizer(vocabulary).transform(texts)
        self._check_words(texts, numbers, counts)
        tfidf = self._tfidf(counts)
        if self.method_ == "tfidf":
            return np.asarray(tfidf.toarray(), dtype=np.float64)
        Z = np.asarray(tfidf @ self.components_.astype(np.float64).T)
        return _l2_normalise(Z)

    def fit_transform(self, texts: Sequence[str], *, rows: Sequence[int] | None = None) -> np.ndarray:
        """:meth:`fit` then :meth:`transform` (the same code path new items go through)."""
        return self.fit(texts, rows=rows).transform(texts, rows=rows)

    def to_record(self) -> FeaturizerRecord:
        """The fitted featurizer as a :class:`FeaturizerRecord` (parameters + ``.npz`` state)."""
        self._check_fitted()
        params = {
            **self._params(),
            "format": _STATE_FORMAT,
            "method": self.method_,
            "output_dimension": int(self.dimension_),
        }
        state = _npz_bytes(terms=self.vocabulary_, idf=self.idf_, components=self.components_)
        return FeaturizerRecord(name=self.name, params=params, state=state)

    @classmethod
    def from_record(cls, record: FeaturizerRecord) -> TextFeaturizer:
        """Rebuild a fitted featurizer from :meth:`to_record`'s output.

        Raises
        ------
        InvalidInput
            The record is for another featurizer, of an unknown format, or inconsistent.
        """
        params = _check_record(record, cls.name)
        method = params.pop("method", None)
        output_dimension = params.pop("output_dimension", None)
        try:
            featurizer = cls(**params)
            featurizer._params()
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"record parameters are not valid for {cls.name!r}: {exc}") from None
        try:
            with np.load(io.BytesIO(record.state), allow_pickle=False) as arrays:
                terms, idf, components = arrays["terms"], arrays["idf"], arrays["components"]
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise InvalidInput(f"record state of {cls.name!r} cannot be read: {exc}") from None
        n_terms = terms.shape[0]
        if (
            terms.dtype.kind != "U"
            or terms.ndim != 1
            or idf.dtype != np.float64
            or idf.shape != (n_terms,)
            or components.dtype != np.float32
            or components.ndim != 2
            or components.shape[1] != n_terms
            or method not in ("svd", "tfidf")
            or (method == "svd") != (components.shape[0] > 0)
            or output_dimension != (components.shape[0] if method == "svd" else n_terms)
        ):
            raise InvalidInput(f"record state of {cls.name!r} is inconsistent with its parameters")
        featurizer.vocabulary_ = terms
        featurizer.idf_ = idf
        featurizer.components_ = components
        featurizer.method_ = method
        featurizer.dimension_ = int(output_dimension)
        return featurizer


# --------------------------------------------------------------------------------------------
# images


def _as_rgb_array(image: Any, row: int, max_pixels: int) -> np.ndarray:
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
        hog_cells = _check_int("hog_cells", self.hog_cells, 2)
        hog_side = _check_int("hog_side", self.hog_side, 2 * hog_cells)
        if hog_side % hog_cells:
            raise ValueError(f"hog_side must be a multiple of hog_cells ({hog_cells}), got {hog_side}")
        return {
            "blocks": blocks,
            "thumbnail_side": _check_int("thumbnail_side", self.thumbnail_side, 1),
            "hog_side": hog_side,
            "hog_cells": hog_cells,
            "pixels_side": _check_int("pixels_side", self.pixels_side, 1),
            "max_pixels": _check_int("max_pixels", self.max_pixels, 1),
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
        numbers = _row_numbers(rows, len(images))
        sides = {
            "thumbnail": params["thumbnail_side"],
            "hog": params["hog_side"],
            "histogram": 32,
            "pixels": params["pixels_side"],
        }
        out = np.empty((len(images), self.dimension_), dtype=np.float64)
        for i, (image, row) in enumerate(zip(images, numbers, strict=True)):
            rgb = _as_rgb_array(image, row, params["max_pixels"])
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
        params = {**self._params(), "format": _STATE_FORMAT, "output_dimension": self.dimension_}
        return FeaturizerRecord(name=self.name, params=params, state=b"")

    @classmethod
    def from_record(cls, record: FeaturizerRecord) -> ImageFeaturizer:
        """Rebuild the featurizer from :meth:`to_record`'s output."""
        params = _check_record(record, cls.name)
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


# --------------------------------------------------------------------------------------------
# optional model embedders (winnow[embed])


def _import_optional(module: str, package: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise EmbedderUnavailable(
            f"{package} is not installed; install the extra with: pip install 'winnow[{EMBED_EXTRA}]'"
        ) from None


def _check_model_dir(model_dir: Path, markers: tuple[str, ...], kind: str) -> None:
    if not model_dir.exists():
        raise EmbedderUnavailable(
            f"model directory {str(model_dir)!r} does not exist; winnow never downloads models, "
            f"copy a {kind} model there first"
        )
    if not model_dir.is_dir():
        raise EmbedderUnavailable(f"model directory {str(model_dir)!r} is not a folder")
    if not any((model_dir / marker).is_file() for marker in markers):
        raise EmbedderUnavailable(
            f"{str(model_dir)!r} is not a {kind} model directory (none of {', '.join(markers)} in it)"
        )


def _offline() -> None:
    # Read by huggingface_hub / transformers when they are first imported: no network at all.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class _LocalModelEmbedder:
    """What both model embedders share: parameters, the offline load checks, records.

    Subclasses set ``name``, ``_markers`` (files one of which marks a model directory),
    ``_kind`` (the library, for messages) and implement ``_load_model(model_dir)`` and
    ``transform``.
    """

    name: ClassVar[str]
    _markers: ClassVar[tuple[str, ...]]
    _kind: ClassVar[str]

    def __init__(
        self, model_dir: str | os.PathLike[str], *, batch_size: int = 32, max_pixels: int = MAX_IMAGE_PIXELS
    ) -> None:
        self.model_dir = model_dir
        self.batch_size = batch_size
        self.max_pixels = max_pixels

    def _load_model(self, model_dir: Path) -> None:
        raise NotImplementedError

    def load(self) -> Self:
        """Import the library and load the model from its directory; returns ``self``.

        Raises
        ------
        EmbedderUnavailable
            The directory is missing or not a model directory, the package is not installed, or
            the library cannot load the model.
        """
        if hasattr(self, "model_"):
            return self
        _check_int("batch_size", self.batch_size, 1)
        _check_int("max_pixels", self.max_pixels, 1)
        model_dir = Path(self.model_dir)
        _check_model_dir(model_dir, self._markers, self._kind)
        _offline()
        self._load_model(model_dir)
        return self

    def fit(self, items: Sequence[Any] = (), *, rows: Sequence[int] | None = None) -> Self:
        """Load the model (nothing is learned); returns ``self``."""
        return self.load()

    def transform(self, items: Sequence[Any], *, rows: Sequence[int] | None = None) -> np.ndarray:
        raise NotImplementedError

    def fit_transform(self, items: Sequence[Any], *, rows: Sequence[int] | None = None) -> np.ndarray:
        """:meth:`fit` then :meth:`transform`."""
        return self.fit(items, rows=rows).transform(items, rows=rows)

    def to_record(self) -> FeaturizerRecord:
        """Parameters only (the model stays in its directory)."""
        params = {
            "format": _STATE_FORMAT,
            "model_dir": os.fspath(self.model_dir),
            "batch_size": int(self.batch_size),
            "max_pixels": int(self.max_pixels),
        }
        return FeaturizerRecord(name=self.name, params=params)

    @classmethod
    def from_record(cls, record: FeaturizerRecord) -> Self:
        """Rebuild from :meth:`to_record`'s output (the model is loaded when first used)."""
        params = _check_record(record, cls.name)
        try:
            return cls(**params)
        except TypeError as exc:
            raise InvalidInput(f"record parameters are not valid for {cls.name!r}: {exc}") from None


class SentenceEmbedder(_LocalModelEmbedder):
    """Text embeddings from a local sentence-transformers model directory (``winnow[embed]``).

    Parameters
    ----------
    model_dir : str or os.PathLike
        A directory holding a saved sentence-transformers model (``modules.json`` or
        ``config.json``), e.g. written by ``SentenceTransformer(...).save(dir)``.
    batch_size : int, default 32
    max_pixels : int, default :data:`~app.io.media.MAX_IMAGE_PIXELS`
        Unused for texts; accepted so that both embedders share one record layout.

    Notes
    -----
    Nothing is downloaded: ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` are set (unless the
    environment sets them) and the model is opened with ``local_files_only=True``. The package
    is imported, and the model loaded, on the first :meth:`fit` / :meth:`transform` (or
    :meth:`load`), on the CPU.
    """

    name: ClassVar[str] = "sentence-transformers"
    _markers: ClassVar[tuple[str, ...]] = ("modules.json", "config.json")
    _kind: ClassVar[str] = "sentence-transformers"

    def _load_model(self, model_dir: Path) -> None:
        module = _import_optional("sentence_transformers", "sentence-transformers")
        try:
            self.model_ = module.SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
        except Exception as exc:  # the library raises many types for an unusable folder
            raise EmbedderUnavailable(f"the model in {str(model_dir)!r} cannot be loaded: {exc}") from None

    def transform(self, texts: Sequence[str], *, rows: Sequence[int] | None = None) -> np.ndarray:
        """Embeddings of ``texts``, shape (n_texts, model dimension), float64, unit rows.

        Raises
        ------
        ContentError
            A text is blank.
        EmbedderUnavailable
            See :meth:`load`.
        """
        texts = list(texts)
        for text, row in zip(texts, _row_numbers(rows, len(texts)), strict=True):
            if not isinstance(text, str) or not text.strip():
                raise ContentError("the text is empty", row=row)
        self.load()
        Z = self.model_.encode(texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)
        return _l2_normalise(np.asarray(Z, dtype=np.float64))


class ClipEmbedder(_LocalModelEmbedder):
    """Image embeddings from a local open_clip model directory (``winnow[embed]``).

    Parameters
    ----------
    model_dir : str or os.PathLike
        A directory in the Hugging Face hub layout of open_clip: ``open_clip_config.json`` and
        ``open_clip_model.safetensors`` (or ``open_clip_pytorch_model.bin``). Loaded with
        open_clip's ``local-dir:`` schema (open_clip_torch 3.0 or later).
    batch_size : int, default 32
    max_pixels : int, default :data:`~app.io.media.MAX_IMAGE_PIXELS`
        Largest image accepted when a path is given.

    Notes
    -----
    As :class:`SentenceEmbedder`: offline, CPU, imported and loaded on first use.
    """

    name: ClassVar[str] = "open-clip"
    _markers: ClassVar[tuple[str, ...]] = ("open_clip_config.json",)
    _kind: ClassVar[str] = "open_clip"

    def _load_model(self, model_dir: Path) -> None:
        open_clip = _import_optional("open_clip", "open_clip_torch")
        self.torch_ = _import_optional("torch", "torch")
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{model_dir}", device="cpu")
        except Exception as exc:  # open_clip raises RuntimeError, KeyError, OSError, ...
            raise EmbedderUnavailable(f"the model in {str(model_dir)!r} cannot be loaded: {exc}") from None
        model.eval()
        self.model_, self.preprocess_ = model, preprocess

    def transform(self, images: Sequence[Any], *, rows: Sequence[int] | None = None) -> np.ndarray:
        """Embeddings of ``images`` (paths or uint8 arrays), float64, unit rows.

        Raises
        ------
        ContentError
            A file is not an image, is damaged, or is too large.
        EmbedderUnavailable
            See :meth:`load`.
        InvalidInput
            ``images`` is empty (the model's dimension is known only from an embedding).
        """
        from PIL import Image

        images = list(images)
        numbers = list(_row_numbers(rows, len(images)))
        self.load()
        out = []
        for start in range(0, len(images), self.batch_size):
            batch = []
            for image, row in zip(
                images[start : start + self.batch_size], numbers[start : start + self.batch_size], strict=True
            ):
                if isinstance(image, (str, os.PathLike)):
                    try:
                        rgb = load_image(image, max_pixels=self.max_pixels, max_side=1024)
                    except ContentError as exc:
                        raise exc.located(row=row) from None
                else:
                    rgb = _as_rgb_array(image, row, self.max_pixels)
                batch.append(self.preprocess_(Image.fromarray(rgb)))
            with self.torch_.no_grad():
                Z = self.model_.encode_image(self.torch_.stack(batch))
            out.append(Z.cpu().numpy().astype(np.float64))
        if not out:
            raise InvalidInput("images is empty; nothing to embed")
        return _l2_normalise(np.concatenate(out))


_FEATURIZERS = {cls.name: cls for cls in (TextFeaturizer, ImageFeaturizer, SentenceEmbedder, ClipEmbedder)}


def featurizer_from_record(
    record: FeaturizerRecord,
) -> TextFeaturizer | ImageFeaturizer | SentenceEmbedder | ClipEmbedder:
    """Rebuild the featurizer a :class:`FeaturizerRecord` describes.

    Parameters
    ----------
    record : FeaturizerRecord
        As returned by a featurizer's ``to_record``, possibly after a trip through the store
        (``params`` through JSON, ``state`` as bytes).

    Returns
    -------
    TextFeaturizer, ImageFeaturizer, SentenceEmbedder or ClipEmbedder

    Raises
    ------
    InvalidInput
        Unknown name, unknown format, or parameters / state that do not fit together.
    """
    if not isinstance(record, FeaturizerRecord):
        raise TypeError(f"record must be a FeaturizerRecord, got {type(record).__name__}")
    cls = _FEATURIZERS.get(record.name)
    if cls is None:
        raise InvalidInput(f"unknown featurizer {record.name!r}; known: {', '.join(sorted(_FEATURIZERS))}")
    # Records read back from the store went through JSON (tuples became lists); send fresh ones
    # the same way so that both behave alike.
    params = json.loads(json.dumps(record.params))
    return cls.from_record(FeaturizerRecord(name=record.name, params=params, state=bytes(record.state)))


# --------------------------------------------------------------------------------------------
# features brought along


def _check_max_bytes(max_bytes: int) -> int:
    return _check_int("max_bytes", max_bytes, 1)


def _checked_dtype(path: Path, dtype: np.dtype, what: str) -> None:
    if dtype.hasobject or dtype.fields is not None or dtype.kind not in "iuf":
        raise DataFileError(path, f"{what} has dtype {dtype}; features must be integers or floats")


def _read_npy(path: Path, max_bytes: int) -> np.ndarray:
    with path.open("rb") as handle:
        shape, dtype, header = npy_header(handle, path, "the file")
    _checked_dtype(path, dtype, "the array")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > max_bytes:
        raise too_big(path, f"the {'x'.join(map(str, shape))} array", nbytes, max_bytes)
    if path.stat().st_size < header + nbytes:
        raise DataFileError(path, "the file is truncated (shorter than its header says)")
    return np.load(path, allow_pickle=False)


def _read_npz(path: Path, max_bytes: int) -> tuple[np.ndarray | None, np.ndarray, str]:
    """``(ids or None, features, name of the features array)`` from an ``.npz`` archive."""
    # Declared sizes and .npy headers only: a zip bomb is refused without inflating it.
    shapes = npz_member_shapes(path, max_bytes)
    if "ids" in shapes and shapes["ids"][1].kind not in "USiu":
        raise DataFileError(path, f"ids have dtype {shapes['ids'][1]}; use strings or integers", column="ids")
    if "features" in shapes:
        if "ids" not in shapes:
            raise DataFileError(path, "has a 'features' array but no 'ids' array to align it with the items")
        feature_name = "features"
    elif len(shapes) == 1:
        feature_name = next(iter(shapes))
    else:
        raise DataFileError(
            path,
            f"holds arrays {', '.join(sorted(shapes)) or '(none)'}; expected 'ids' + 'features', "
            "or a single 2-D array in item order",
        )
    _checked_dtype(path, shapes[feature_name][1], f"array {feature_name!r}")
    try:
        with np.load(path, allow_pickle=False) as arrays:
            features = arrays[feature_name]
            ids = arrays["ids"] if feature_name == "features" else None
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        # e.g. an object array (it would need pickle, which is never allowed).
        raise DataFileError(path, f"cannot be read without pickle ({exc})") from None
    return ids, features, feature_name


def _ids_as_strings(path: Path, raw: np.ndarray, column: str) -> list[str]:
    if raw.ndim != 1:
        raise DataFileError(path, f"ids must be 1-D, got shape {raw.shape}", column=column)
    if raw.dtype.kind == "U":
        return [str(v) for v in raw]
    if raw.dtype.kind == "S":
        try:
            return [bytes(v).decode("utf-8") for v in raw]
        except UnicodeDecodeError:
            raise DataFileError(path, "ids are bytes that are not UTF-8", column=column) from None
    if raw.dtype.kind in "iu":
        return [str(int(v)) for v in raw]
    raise DataFileError(path, f"ids have dtype {raw.dtype}; use strings or integers", column=column)


def _read_parquet(path: Path, max_bytes: int, id_column: str) -> tuple[list[str], np.ndarray, list[str]]:
    """``(ids, features, feature column names)`` from a Parquet file."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(path, f"is not a valid Parquet file ({exc})") from None
    meta = parquet.metadata
    declared = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    columns = parquet.schema_arrow.names
    # The footer's sizes and a float64 copy of every column both bound the memory we need.
    estimate = max(declared, meta.num_rows * max(len(columns), 1) * 8)
    if estimate > max_bytes:
        raise too_big(path, "the table", estimate, max_bytes)
    if id_column not in columns:
        raise DataFileError(path, f"has no {id_column!r} column; columns are {', '.join(columns)}")
    schema = parquet.schema_arrow
    numeric, lists = [], []
    for name in columns:
        if name == id_column:
            continue
        kind = schema.field(name).type
        if pa.types.is_integer(kind) or pa.types.is_floating(kind):
            numeric.append(name)
        elif (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)) and (
            pa.types.is_integer(kind.value_type) or pa.types.is_floating(kind.value_type)
        ):
            lists.append(name)
        else:
            raise DataFileError(path, f"column {name!r} has type {kind}; features must be numeric", column=name)
    if lists and (numeric or len(lists) > 1):
        raise DataFileError(
            path,
            "mixes list columns with other feature columns; use numeric columns or one list column",
            column=lists[0],
        )
    if not numeric and not lists:
        raise DataFileError(path, f"has no feature column besides {id_column!r}")
    try:
        table = parquet.read()
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(path, f"cannot be read ({exc})") from None
    id_values = table.column(id_column)
    if id_values.null_count:
        row = int(np.flatnonzero(id_values.is_null().to_numpy(zero_copy_only=False))[0]) + 1
        raise DataFileError(path, "the id is missing", row=row, column=id_column, has_header=False)
    id_kind = id_values.type
    if not (pa.types.is_string(id_kind) or pa.types.is_large_string(id_kind) or pa.types.is_integer(id_kind)):
        raise DataFileError(path, f"ids have type {id_kind}; use strings or integers", column=id_column)
    ids = [str(v) for v in id_values.to_pylist()]
    if lists:
        name = lists[0]
        values = table.column(name).combine_chunks()
        if values.null_count:
            row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0]) + 1
            raise DataFileError(path, "the embedding is missing", row=row, column=name, has_header=False)
        lengths = np.asarray(pc.list_value_length(values).to_numpy(zero_copy_only=False))
        if lengths.size and (lengths != lengths[0]).any():
            row = int(np.flatnonzero(lengths != lengths[0])[0]) + 1
            raise DataFileError(
                path,
                f"the embedding has {lengths[row - 1]} values, row 1 has {lengths[0]}",
                row=row,
                column=name,
                has_header=False,
            )
        flat = pc.list_flatten(values)
        if flat.null_count:
            row = (
                int(
                    np.repeat(np.arange(len(lengths)), lengths)[
                        np.flatnonzero(flat.is_null().to_numpy(zero_copy_only=False))[0]
                    ]
                )
                + 1
            )
            raise DataFileError(path, "the embedding has a missing value", row=row, column=name, has_header=False)
        d = int(lengths[0]) if lengths.size else 0
        features = np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.float64).reshape(len(ids), d)
        return ids, features, [f"{name}[{j}]" for j in range(d)]
    blocks = []
    for name in numeric:
        column = table.column(name)
        if column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0]) + 1
            raise DataFileError(path, "the value is missing", row=row, column=name, has_header=False)
        blocks.append(np.asarray(column.to_numpy(), dtype=np.float64))
    return ids, np.column_stack(blocks), numeric


def _align(path: Path, file_ids: list[str], item_ids: list[str], id_column: str) -> np.ndarray:
    """Row of the file for each item, checking duplicates, missing and extra ids."""
    position: dict[str, int] = {}
    for row, value in enumerate(file_ids):
        first = position.setdefault(value, row)
        if first != row:
            raise DataFileError(
                path,
                f"id {_quoted(value)} appears twice (rows {first + 1} and {row + 1})",
                row=row + 1,
                column=id_column,
                has_header=False,
            )
    missing = [value for value in item_ids if value not in position]
    if missing:
        shown = ", ".join(_quoted(v) for v in missing[:3])
        raise DataFileError(
            path, f"{len(missing)} item id(s) have no features in the file, e.g. {shown}", column=id_column
        )
    wanted = set(item_ids)
    extra = [(row, value) for row, value in enumerate(file_ids) if value not in wanted]
    if extra:
        row, value = extra[0]
        raise DataFileError(
            path,
            f"{len(extra)} id(s) are not items of the dataset, e.g. {_quoted(value)}",
            row=row + 1,
            column=id_column,
            has_header=False,
        )
    return np.fromiter((position[value] for value in item_ids), dtype=np.intp, count=len(item_ids))


def load_features_file(
    path: str | os.PathLike[str],
    ids: Sequence[str],
    *,
    id_column: str = "id",
    expected_dimension: int | None = None,
    max_bytes: int | None = None,
) -> np.ndarray:
    """Read embeddings brought by the user and align them with the items.

    Formats (by extension):

    ``.npy``
        One 2-D array; row ``i`` belongs to item ``i`` (no ids to align by), so the row count
        must equal the number of items.
    ``.npz``
        Arrays ``ids`` (strings or integers) and ``features`` (2-D), aligned by id; or a single
        2-D array of any name, in item order.
    ``.parquet``
        An ``id_column`` column (strings or integers) and either numeric columns (one per
        dimension, in file order) or one list column of numbers (an embedding per row).

    Integer ids are compared as their decimal text (``7`` matches item ``"7"``). Every item must
    have exactly one row and every row must belong to an item.

    Parameters
    ----------
    path : str or os.PathLike
        The features file.
    ids : sequence of str
        The items' ids, in item order.
    id_column : str, default "id"
        Id column of a Parquet file.
    expected_dimension : int, optional
        Number of columns the features must have (e.g. that of the dataset's existing items).
    max_bytes : int, optional
        Largest array accepted, checked before anything is loaded; by default the limit of
        :func:`app.io.limits.max_decompressed_bytes` (:data:`FEATURES_FILE_MAX_BYTES` unless
        ``WINNOW_MAX_DECOMPRESSED_BYTES`` says otherwise).

    Returns
    -------
    ndarray of shape (len(ids), dimension), float64
        Finite values; row ``i`` belongs to ``ids[i]``.

    Raises
    ------
    DataFileError
        Missing file, unknown extension, too large, not 2-D, non-numeric, NaN or infinite values,
        wrong dimension, or ids that are missing, duplicated or not items (one line naming the
        row, 1-based, and the column).
    """
    max_bytes = _check_max_bytes(max_decompressed_bytes() if max_bytes is None else max_bytes)
    if expected_dimension is not None:
        expected_dimension = _check_int("expected_dimension", expected_dimension, 1)
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of item ids, not a single string")
    item_ids = [str(v) for v in ids]
    if len(set(item_ids)) != len(item_ids):
        raise ValueError("ids holds duplicated item ids; they cannot be aligned")
    path = Path(path)
    extension = path.suffix.lower()
    if extension not in FEATURES_FILE_EXTENSIONS:
        raise DataFileError(
            path, f"extension {path.suffix!r} is not a features file; use {', '.join(FEATURES_FILE_EXTENSIONS)}"
        )
    if not path.is_file():
        raise DataFileError(path, "does not exist" if not path.exists() else "is not a file")

    feature_names: list[str] | None = None
    file_ids: list[str] | None = None
    column_of_ids = "ids"
    if extension == ".npy":
        features = _read_npy(path, max_bytes)
    elif extension == ".npz":
        raw_ids, features, _ = _read_npz(path, max_bytes)
        if raw_ids is not None:
            file_ids = _ids_as_strings(path, raw_ids, "ids")
    else:
        file_ids, features, feature_names = _read_parquet(path, max_bytes, id_column)
        column_of_ids = id_column

    if features.ndim != 2:
        raise DataFileError(
            path,
            f"the features are {features.ndim}-D of shape {features.shape}; a 2-D array (items x dimensions) is needed",
        )
    if features.shape[1] == 0:
        raise DataFileError(path, "the features have 0 columns")
    if file_ids is not None and len(file_ids) != features.shape[0]:
        raise DataFileError(path, f"has {len(file_ids)} ids but {features.shape[0]} feature rows")
    if file_ids is None and features.shape[0] != len(item_ids):
        raise DataFileError(
            path,
            f"has {features.shape[0]} rows but the dataset has {len(item_ids)} items; "
            "without ids, row i must be item i",
        )
    if expected_dimension is not None and features.shape[1] != expected_dimension:
        raise DataFileError(
            path, f"the features have {features.shape[1]} columns; this dataset's features have {expected_dimension}"
        )
    features = np.asarray(features, dtype=np.float64)
    finite = np.isfinite(features)
    if not finite.all():
        row, col = (int(v) for v in np.argwhere(~finite)[0])
        column = feature_names[col] if feature_names is not None else f"feature {col}"
        raise DataFileError(
            path,
            f"the value {float(features[row, col])} is not a finite number",
            row=row + 1,
            column=column,
            has_header=False,
        )
    if file_ids is not None:
        features = features[_align(path, file_ids, item_ids, column_of_ids)]
    return np.ascontiguousarray(features)
