"""Optional model embedders (the ``winnow[embed]`` extra): sentence-transformers and open_clip.

Models are loaded from a local directory only; nothing is downloaded. A missing package or
model directory raises :class:`~app.io.featurizers.records.EmbedderUnavailable`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from app.io.featurizers.images import as_rgb_array
from app.io.featurizers.records import (
    STATE_FORMAT,
    EmbedderUnavailable,
    FeaturizerRecord,
    check_int,
    check_record,
    l2_normalise,
    row_numbers,
)
from app.io.media import MAX_IMAGE_PIXELS, ContentError, load_image
from engine.exceptions import InvalidInput

EMBED_EXTRA = "embed"
"""The optional dependency group (``pip install 'winnow[embed]'``) the model embedders need."""


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


class _LocalModelEmbedder(ABC):
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

    @abstractmethod
    def _load_model(self, model_dir: Path) -> None:
        """Load the library's model from ``model_dir`` into ``self.model_``."""

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
        check_int("batch_size", self.batch_size, 1)
        check_int("max_pixels", self.max_pixels, 1)
        model_dir = Path(self.model_dir)
        _check_model_dir(model_dir, self._markers, self._kind)
        _offline()
        self._load_model(model_dir)
        return self

    def fit(self, items: Sequence[Any] = (), *, rows: Sequence[int] | None = None) -> Self:
        """Load the model (nothing is learned); returns ``self``."""
        return self.load()

    @abstractmethod
    def transform(self, items: Sequence[Any], *, rows: Sequence[int] | None = None) -> np.ndarray:
        """Embed ``items``: one row of floats per item."""

    def fit_transform(self, items: Sequence[Any], *, rows: Sequence[int] | None = None) -> np.ndarray:
        """:meth:`fit` then :meth:`transform`."""
        return self.fit(items, rows=rows).transform(items, rows=rows)

    def to_record(self) -> FeaturizerRecord:
        """Parameters only (the model stays in its directory)."""
        params = {
            "format": STATE_FORMAT,
            "model_dir": os.fspath(self.model_dir),
            "batch_size": int(self.batch_size),
            "max_pixels": int(self.max_pixels),
        }
        return FeaturizerRecord(name=self.name, params=params)

    @classmethod
    def from_record(cls, record: FeaturizerRecord) -> Self:
        """Rebuild from :meth:`to_record`'s output (the model is loaded when first used)."""
        params = check_record(record, cls.name)
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
        for text, row in zip(texts, row_numbers(rows, len(texts)), strict=True):
            if not isinstance(text, str) or not text.strip():
                raise ContentError("the text is empty", row=row)
        self.load()
        Z = self.model_.encode(texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)
        return l2_normalise(np.asarray(Z, dtype=np.float64))


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
        numbers = list(row_numbers(rows, len(images)))
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
                    rgb = as_rgb_array(image, row, self.max_pixels)
                batch.append(self.preprocess_(Image.fromarray(rgb)))
            with self.torch_.no_grad():
                Z = self.model_.encode_image(self.torch_.stack(batch))
            out.append(Z.cpu().numpy().astype(np.float64))
        if not out:
            raise InvalidInput("images is empty; nothing to embed")
        return l2_normalise(np.concatenate(out))
