"""Options shared by several commands: the database, the item content and the label settings.

Other tools rely on the option names; a command takes them from here so that they stay the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from app.store import LabelSettings


DEFAULT_DB = "winnow.db"

DbOption = typer.Option(DEFAULT_DB, "--db", help="SQLite file or any SQLAlchemy URL (postgresql://...).")

# Item content: the same options for `winnow import` and `winnow rank` (other tools rely on the names).
TextColumnOption = typer.Option(None, "--text-column", help="Column with each item's text (default: 'text').")
ImageColumnOption = typer.Option(
    None, "--image-column", help="Column with each item's image file or URL (default: 'image' or 'path')."
)
AudioColumnOption = typer.Option(None, "--audio-column", help="Column with each item's audio file (default: 'audio').")
LinkColumnOption = typer.Option(
    None, "--link-column", help="Column with an http(s) link per item (default: 'link' or 'url')."
)
IgnoreColumnsOption = typer.Option(
    None,
    "--ignore-columns",
    help="Columns to skip, comma-separated (repeat the option or not: a,b or --ignore-columns a --ignore-columns b).",
)
FeaturesFromOption = typer.Option(
    None, "--features-from", help="Embeddings aligned by id (.npy, .npz, .parquet) used as the features."
)
MediaRootOption = typer.Option(
    None, "--media-root", help="Folder the media paths are relative to (default: the data file's folder)."
)


MaxErrorOption = typer.Option(
    None, "--max-error", help="Largest error accepted in model labels, > 0 and < 0.5 (default 0.05)."
)
ConfidenceOption = typer.Option(
    None, "--confidence", help="Confidence with which the stated error must hold, >= 0.5 and < 1 (default 0.9)."
)
AuditOption = typer.Option(
    None,
    "--audit",
    help="Share of served items that are audits while the model's labels are being checked, "
    "a fraction from 0 to 0.5 (0.3 is the app's 30%; default 0.5; 0: no audits, so no model label is stated).",
)
PromiseOption = typer.Option(
    None,
    "--promise",
    help="What a stated error means: 'confidence' (at most --max-error wrong, with --confidence) or "
    "'average' (at most --max-error wrong on average). Default: confidence.",
)


def label_settings(
    max_error: float | None, confidence: float | None, audit: float | None, promise: str | None = None
) -> LabelSettings | None:
    """The label settings given on the command line (checked now, before anything is written),
    or ``None`` when none was given."""
    from app.store import LabelSettings

    if max_error is None and confidence is None and audit is None and promise is None:
        return None
    defaults = LabelSettings()
    return LabelSettings(
        max_error=defaults.max_error if max_error is None else max_error,
        confidence=defaults.confidence if confidence is None else confidence,
        audit_share=defaults.audit_share if audit is None else audit,
        promise=defaults.promise if promise is None else promise,
    )


def _column_list(values: list[str] | None) -> tuple[str, ...]:
    """``--ignore-columns a,b --ignore-columns c`` as ``("a", "b", "c")``."""
    return tuple(part.strip() for value in values or () for part in value.split(",") if part.strip())


def content_options(
    text_column: str | None,
    image_column: str | None,
    audio_column: str | None,
    link_column: str | None,
    ignore_columns: list[str] | None,
    features_from: Path | None,
    media_root: Path | None,
) -> dict[str, object]:
    """The content options as keyword arguments of the service layer (``None`` left out)."""
    options: dict[str, object] = {
        "text_column": text_column,
        "image_column": image_column,
        "audio_column": audio_column,
        "link_column": link_column,
        "features_from": features_from,
        "media_root": media_root,
    }
    options = {key: value for key, value in options.items() if value is not None}
    ignored = _column_list(ignore_columns)
    if ignored:
        options["ignore_columns"] = ignored
    return options
