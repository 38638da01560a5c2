"""Text features: TF-IDF followed by a truncated SVD (latent semantic analysis), L2-normalised.

See :mod:`app.io.featurizers` for the method, its cost and the references.
"""

from __future__ import annotations

import io
import math
import zipfile
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from app.io.featurizers.records import (
    STATE_FORMAT,
    FeaturizerRecord,
    check_int,
    check_record,
    l2_normalise,
    npz_bytes,
    quoted,
    row_numbers,
)
from app.io.media import ContentError
from engine.exceptions import InvalidInput

MIN_SVD_DIMENSION = 2
"""Below this many SVD dimensions the text featurizer keeps the TF-IDF vectors themselves."""


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
        check_int("dimension", self.dimension, 1)
        check_int("min_df", self.min_df, 1)
        check_int("max_features", self.max_features, 1)
        check_int("random_state", self.random_state, 0)
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
        numbers = row_numbers(rows, len(texts))
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
                    f"the text {quoted(texts[i])} has no word of two or more letters or digits", row=numbers[i]
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
        return l2_normalise(Z)

    def fit_transform(self, texts: Sequence[str], *, rows: Sequence[int] | None = None) -> np.ndarray:
        """:meth:`fit` then :meth:`transform` (the same code path new items go through)."""
        return self.fit(texts, rows=rows).transform(texts, rows=rows)

    def to_record(self) -> FeaturizerRecord:
        """The fitted featurizer as a :class:`FeaturizerRecord` (parameters + ``.npz`` state)."""
        self._check_fitted()
        params = {
            **self._params(),
            "format": STATE_FORMAT,
            "method": self.method_,
            "output_dimension": int(self.dimension_),
        }
        state = npz_bytes(terms=self.vocabulary_, idf=self.idf_, components=self.components_)
        return FeaturizerRecord(name=self.name, params=params, state=state)

    @classmethod
    def from_record(cls, record: FeaturizerRecord) -> TextFeaturizer:
        """Rebuild a fitted featurizer from :meth:`to_record`'s output.

        Raises
        ------
        InvalidInput
            The record is for another featurizer, of an unknown format, or inconsistent.
        """
        params = check_record(record, cls.name)
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
