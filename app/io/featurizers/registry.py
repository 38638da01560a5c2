"""Rebuilding a featurizer from the record the store keeps (any of the four kinds)."""

from __future__ import annotations

import json

from app.io.featurizers.embedders import ClipEmbedder, SentenceEmbedder
from app.io.featurizers.images import ImageFeaturizer
from app.io.featurizers.records import FeaturizerRecord
from app.io.featurizers.text import TextFeaturizer
from engine.exceptions import InvalidInput

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
