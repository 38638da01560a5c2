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

from app.io.featurizers.embedders import EMBED_EXTRA, ClipEmbedder, SentenceEmbedder
from app.io.featurizers.features_file import FEATURES_FILE_EXTENSIONS, FEATURES_FILE_MAX_BYTES, load_features_file
from app.io.featurizers.images import IMAGE_BLOCKS, ImageFeaturizer
from app.io.featurizers.records import EmbedderUnavailable, FeaturizerRecord
from app.io.featurizers.registry import featurizer_from_record
from app.io.featurizers.text import MIN_SVD_DIMENSION, TextFeaturizer

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
