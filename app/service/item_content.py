"""What a person looks at for one item (text, image, audio, link), read once per workbench.

One seam of :class:`app.service.workbench.Workbench`: the dataset's content is read from the
store once (one ``SELECT``) and kept; each item then only resolves one path, checked to stay
inside the dataset's media root.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from app.store import DatasetContent, dataset_content
from engine.exceptions import InvalidInput

__all__ = ["ItemContent", "ContentReader"]


@dataclass(frozen=True)
class ItemContent:
    """What a person looks at for one item; every field ``None`` when the item has none.

    Attributes
    ----------
    text : str or None
        The item's text, as imported (show it as text, never as Markdown or HTML).
    image_path, audio_path : pathlib.Path or None
        Absolute path of the item's image or audio clip, inside the dataset's media root
        (checked again when read from the store). The file may have been moved or deleted
        since the import: the caller opens it and handles the error.
    link : str or None
        An http(s) URL to the item elsewhere (never fetched by winnow).
    """

    text: str | None
    image_path: Path | None
    audio_path: Path | None
    link: str | None


_NO_CONTENT = ItemContent(text=None, image_path=None, audio_path=None, link=None)


class ContentReader:
    """The content of one dataset's items, read from the store on first use.

    Parameters
    ----------
    session_factory : sessionmaker
        The store.
    dataset_id : int
    dataset_name : str
        For the messages.
    """

    def __init__(self, session_factory: sessionmaker[Session], dataset_id: int, dataset_name: str) -> None:
        self.session_factory = session_factory
        self.dataset_id = dataset_id
        self.dataset_name = dataset_name
        self._content: DatasetContent | None = None
        self._media_root: Path | None = None

    def dataset_content(self) -> DatasetContent:
        """Every item's content as stored (media paths relative to the media root)."""
        if self._content is None:
            with self.session_factory() as s:
                self._content = dataset_content(s, self.dataset_id)
            if self._content.media_root is not None:
                self._media_root = Path(self._content.media_root).resolve()
        return self._content

    def item_content(self, position: int, n_instances: int) -> ItemContent:
        """The content of the item at ``position`` (see :meth:`Workbench.item_content`)."""
        if isinstance(position, (bool, np.bool_)) or not isinstance(position, (int, np.integer)):
            raise TypeError(f"position must be an int, got {type(position).__name__}")
        if not 0 <= position < n_instances:
            raise IndexError(f"position must be in [0, {n_instances}), got {position}")
        content = self.dataset_content()
        if not content.has_content:
            return _NO_CONTENT
        position = int(position)
        media = content.media_paths[position]
        kind = content.media_kinds[position]
        path = self._resolve_media(media) if media is not None else None
        return ItemContent(
            text=content.texts[position],
            image_path=path if kind == "image" else None,
            audio_path=path if kind == "audio" else None,
            link=content.links[position],
        )

    def export_content(self) -> dict[str, tuple[str | None, ...]]:
        """The content reference of every item as the exports write it (stored form: media
        paths relative to the media root, never a server path)."""
        content = self.dataset_content()
        return {"text": content.texts, "media_path": content.media_paths, "link": content.links}

    def _resolve_media(self, relative: str) -> Path:
        """``relative`` under the media root, symbolic links followed, checked to stay inside."""
        root = self._media_root
        if root is None:
            raise InvalidInput(f"dataset {self.dataset_name!r} has media paths but no media root")
        path = (root / relative).resolve()
        if not path.is_relative_to(root):
            raise InvalidInput(
                f"the stored media path {relative!r} of dataset {self.dataset_name!r} leads outside "
                "its media root; the file is not shown"
            )
        return path
