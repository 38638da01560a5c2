"""NumPy ``.npz`` archives: ``X``, ``candidates`` and optional ``y``, ``label_names``, ``ids``,
``feature_names`` and ``layout`` arrays."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from app.io.errors import DataFileError
from app.io.limits import npz_member_shapes
from app.io.readers.checks import (
    LoadedDataset,
    check_feature_matrix,
    check_label_names_in_file,
    check_store_limits,
    check_true_in_candidates,
    check_unique_ids,
    check_zero_one,
    detect_layout,
    first_line,
    names_for_columns,
    reject_binary_magic,
    string_vector,
)
from app.io.readers.labels import listing

__all__ = ["read_npz"]


def read_npz(file: Path, head: bytes, label_names: list[str] | None) -> LoadedDataset:
    if head.startswith(b"\x93NUMPY"):
        raise DataFileError(
            file, "is a single .npy array, not an .npz archive; save with numpy.savez(path, X=..., candidates=...)"
        )
    if not head.startswith(b"PK"):
        reject_binary_magic(file, head, expected="npz")
        raise DataFileError(file, "is not an .npz archive (not a zip file)")
    try:
        archive = np.load(file, allow_pickle=False)  # reads the zip directory, inflates nothing
    except Exception as exc:  # numpy / zipfile raise many types on corrupt input
        raise DataFileError(file, f"is not a readable .npz archive: {first_line(exc)}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise DataFileError(file, "is not an .npz archive")
    # Every member's declared size and .npy header, before any member is inflated: a 4 MB
    # archive cannot make winnow allocate gigabytes.
    with archive:
        npz_member_shapes(file)
    archive = np.load(file, allow_pickle=False)
    with archive:
        keys = sorted(archive.files)

        def get(key: str) -> np.ndarray | None:
            if key not in archive.files:
                return None
            try:
                return np.asarray(archive[key])
            except Exception as exc:  # corrupt member, pickled object array, ...
                reason = first_line(exc)
                if "allow_pickle" in reason:
                    reason = "it is an object array; save strings as a numpy str array (dtype 'U')"
                raise DataFileError(file, f"cannot be read: {reason}", column=key, has_header=False) from None

        raw_X, raw_candidates = get("X"), get("candidates")
        if raw_X is None or raw_candidates is None:
            key = "X" if raw_X is None else "candidates"
            raise DataFileError(
                file,
                f"has no array {key!r}; an .npz dataset needs 'X' (n x d features) and 'candidates' "
                f"(n x M bool) (arrays: {listing(keys) or 'none'})",
            )
        raw_y, raw_names, raw_ids = get("y"), get("label_names"), get("ids")
        raw_features, raw_layout = get("feature_names"), get("layout")

    if raw_X.dtype.kind not in "biuf" or raw_X.ndim != 2:
        raise DataFileError(
            file, f"must be a 2-D numeric array, got {raw_X.dtype} of shape {raw_X.shape}", column="X", has_header=False
        )
    X = check_feature_matrix(file, raw_X, "X")
    n, d = X.shape
    if raw_candidates.dtype.kind not in "biuf" or raw_candidates.ndim != 2 or raw_candidates.shape[0] != n:
        raise DataFileError(
            file,
            f"must be a bool array of shape ({n}, n_labels), got {raw_candidates.dtype} of shape "
            f"{raw_candidates.shape}",
            column="candidates",
            has_header=False,
        )
    candidates = check_zero_one(file, raw_candidates, "candidates")
    M = candidates.shape[1]
    file_names = string_vector(file, raw_names, "label_names", M) if raw_names is not None else None
    names = names_for_columns(file, label_names, file_names or [str(j) for j in range(M)], M, "candidates")
    if file_names is not None and label_names is None:
        check_label_names_in_file(file, names)

    true_labels = None
    if raw_y is not None:
        y = raw_y.reshape(-1) if raw_y.ndim == 2 and 1 in raw_y.shape else raw_y
        if y.ndim != 1 or y.shape[0] != n or y.dtype.kind not in "iuf":
            raise DataFileError(
                file,
                f"must be {n} integer label indices, got {y.dtype} of shape {raw_y.shape}",
                column="y",
                has_header=False,
            )
        bad = ~np.isfinite(y.astype(np.float64)) | (y != np.round(y)) | (y < -1) | (y >= M)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataFileError(
                file,
                f"value {y[i].item()!r} is not a label index in -1..{M - 1} (-1 = unknown)",
                row=i + 1,
                column="y",
                has_header=False,
            )
        true_labels = y.astype(np.int64)
        check_true_in_candidates(file, true_labels, candidates, names, "y")

    if raw_ids is not None:
        ids = string_vector(file, raw_ids, "ids", n)
        check_unique_ids(file, ids, range(1, n + 1), "ids", has_header=False)
    else:
        ids = [str(i) for i in range(n)]
    feature_names = (
        string_vector(file, raw_features, "feature_names", d)
        if raw_features is not None
        else [f"feature_{j}" for j in range(d)]
    )
    declared = None
    if raw_layout is not None:
        if raw_layout.size != 1 or raw_layout.dtype.kind not in "US":
            raise DataFileError(file, "must be one string such as 'image:8x8'", column="layout", has_header=False)
        item = raw_layout.reshape(-1)[0]
        declared = item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)
    layout = detect_layout(file, feature_names, declared)
    dataset = LoadedDataset(X, candidates, names, ids, true_labels, feature_names, layout, os.fspath(file))
    check_store_limits(
        file,
        dataset,
        rows=range(1, n + 1),
        has_header=False,
        id_column="ids" if raw_ids is not None else None,
        labels_column="label_names" if raw_names is not None else "candidates",
        feature_columns=False,
    )
    return dataset
