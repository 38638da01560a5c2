"""How good are the neighbours each built-in featurizer gives? k-NN accuracy against random features.

For every labelled set and featurizer: the featurization time and the leave-one-out accuracy
of a 5-NN majority vote on the *true* labels (Euclidean distance; a tie goes to the tied label
whose member is nearest), next to the same accuracy on random Gaussian features (64
dimensions, seed 0) computed in the same process: ``ratio`` = accuracy / random accuracy.
This measures the features alone, which is what the partial-label k-NN builds on.

Sets (all made from data that ships with a package or that a sample script writes; nothing is
downloaded):

texts-sample
    ``sample_data/texts.csv``: 300 snippets, 5 topics (``sample_data/make_text_sample.py``).
texts-hard
    The same generator, 1500 snippets, each later sentence off topic with probability 0.5.
photos-sample
    ``sample_data/photos/``: 96 crops of 8 surfaces, read from the PNG files.
patches-hard, patches-hard-2
    16 classes x 30 crops (64 px) of 14 package photographs (regions: sky, foliage, temple,
    water, fur, petals, wood, motorcycle, brick, grass, gravel, coins, stars, tissue, retina,
    spacesuit) with strong jitter: crop scale, flips, brightness, contrast, hue, noise, and
    one crop in five turned grey. The ``-2`` set is drawn again with another seed, so that a
    choice does not rest on one draw.
textures-grey, textures-grey-2
    8 greyscale textures x 40 crops (48 px), turned by multiples of 90 degrees: colour says
    nothing, shape everything. Two seeds, as above.
digits-32
    scikit-learn's 1797 handwritten 8x8 digits, upscaled to 32x32.
faces-lfw
    scikit-image's ``lfw_subset``: 100 faces and 100 non-faces, 25x25 greyscale.

Timings are for one thread (BLAS pools limited to one thread with threadpoolctl, after a
warm-up call that pays the imports), so that they mean the same on a busy machine.

Run:  python -m benchmarks.bench_featurizers            (a few minutes on one core)
Prints a markdown table and a summary per featurizer; ``docs/featurizers.md`` quotes them.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageEnhance
from sklearn.neighbors import NearestNeighbors

from app.io.featurizers import ImageFeaturizer, TextFeaturizer

K = 5
RANDOM_DIMENSION = 64
ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"


def loo_knn_accuracy(X: np.ndarray, y: np.ndarray, k: int = K) -> float:
    """Leave-one-out accuracy of a k-NN majority vote (ties: the tied label met first)."""
    nn = NearestNeighbors(n_neighbors=k + 1).fit(X)
    _, idx = nn.kneighbors(X)
    correct = 0
    for i, row in enumerate(idx):
        # Drop the item itself (not necessarily first when duplicates sit at distance 0).
        neighbours = [j for j in row if j != i][:k]
        votes: dict[object, int] = {}
        for j in neighbours:
            votes[y[j]] = votes.get(y[j], 0) + 1
        best = max(votes.values())
        winner = next(y[j] for j in neighbours if votes[y[j]] == best)
        correct += winner == y[i]
    return correct / len(y)


def _load_module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------- text sets


def text_sets() -> dict[str, tuple[list[str], np.ndarray]]:
    sample = pd.read_csv(SAMPLE / "texts.csv")
    generator = _load_module(SAMPLE / "make_text_sample.py")
    hard = generator.build(1500, off_topic=0.5, seed=7)
    return {
        "texts-sample": (sample["text"].tolist(), sample["true_label"].to_numpy()),
        "texts-hard": (hard["text"].tolist(), hard["true_label"].to_numpy()),
    }


def text_featurizers() -> dict[str, Callable[[list[str]], np.ndarray]]:
    def tfidf_only(texts: list[str]) -> np.ndarray:
        # dimension >= n_docs is clipped to n_docs - 1, so ask for the raw TF-IDF directly:
        # a featurizer fitted with one dimension too few falls back to it.
        featurizer = TextFeaturizer(dimension=1)
        return featurizer.fit_transform(texts)

    featurizers: dict[str, Callable[[list[str]], np.ndarray]] = {"tfidf (no SVD)": tfidf_only}
    for dimension in (16, 32, 64, 128):
        featurizers[f"tfidf-svd {dimension}"] = lambda t, d=dimension: TextFeaturizer(d).fit_transform(t)
    featurizers["char-tfidf-svd 64"] = lambda t: TextFeaturizer(64, analyzer="char_wb").fit_transform(t)
    return featurizers


# ---------------------------------------------------------------------------- image sets


def _package_photos() -> dict[str, np.ndarray]:
    import skimage.data
    from sklearn.datasets import load_sample_images

    china, flower = load_sample_images().images
    return {
        "china": china,
        "flower": flower,
        "chelsea": skimage.data.chelsea(),
        "coffee": skimage.data.coffee(),
        "rocket": skimage.data.rocket(),
        "motorcycle": skimage.data.stereo_motorcycle()[0],
        "astronaut": skimage.data.astronaut(),
        "ihc": skimage.data.immunohistochemistry(),
        "retina": skimage.data.retina(),
        "hubble": skimage.data.hubble_deep_field(),
        "brick": skimage.data.brick(),
        "grass": skimage.data.grass(),
        "gravel": skimage.data.gravel(),
        "coins": skimage.data.coins(),
        "moon": skimage.data.moon(),
        "page": skimage.data.page(),
        "text": skimage.data.text(),
        "cell": skimage.data.cell(),
    }


# class -> [(photo, (x0, y0, x1, y1))]
_HARD_REGIONS: dict[str, list[tuple[str, tuple[int, int, int, int]]]] = {
    "sky": [("china", (330, 0, 640, 190)), ("rocket", (0, 0, 640, 110))],
    "foliage": [("china", (0, 300, 200, 427)), ("china", (420, 250, 640, 427)), ("flower", (0, 0, 200, 427))],
    "temple": [("china", (80, 40, 350, 380))],
    "water": [("china", (350, 230, 540, 300))],
    "fur": [("chelsea", (20, 20, 300, 290))],
    "petals": [("flower", (250, 40, 420, 260))],
    "wood": [("coffee", (0, 0, 200, 120)), ("motorcycle", (60, 110, 280, 290))],
    "motorcycle": [("motorcycle", (100, 160, 640, 440))],
    "brick": [("brick", (0, 0, 512, 512))],
    "grass": [("grass", (0, 0, 512, 512))],
    "gravel": [("gravel", (0, 0, 512, 512))],
    "coins": [("coins", (0, 0, 384, 303))],
    "stars": [("hubble", (0, 0, 1000, 872))],
    "tissue": [("ihc", (0, 0, 512, 512))],
    "retina": [("retina", (250, 250, 1150, 1150))],
    "spacesuit": [("astronaut", (90, 280, 400, 512))],
}
_GREY_TEXTURES = ["brick", "grass", "gravel", "coins", "moon", "page", "text", "cell"]


def _crop(
    image: np.ndarray, region: tuple[int, int, int, int], rng: np.random.Generator, *, low: float, high: float
) -> np.ndarray:
    """A random square crop of ``region`` whose side is a fraction in [low, high] of the region's."""
    x0, y0, x1, y1 = region
    short = min(x1 - x0, y1 - y0)
    side = max(8, int(short * rng.uniform(low, high)))
    x = int(rng.integers(x0, x1 - side + 1))
    y = int(rng.integers(y0, y1 - side + 1))
    return np.ascontiguousarray(image[y : y + side, x : x + side])


def hard_patches(
    photos: dict[str, np.ndarray], per_class: int = 30, side: int = 64, seed: int = 0
) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for label, regions in _HARD_REGIONS.items():
        for _ in range(per_class):
            name, region = regions[int(rng.integers(len(regions)))]
            pil = Image.fromarray(_crop(photos[name], region, rng, low=0.15, high=0.6)).convert("RGB")
            if rng.random() < 0.5:
                pil = pil.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            pil = ImageEnhance.Brightness(pil).enhance(rng.uniform(0.7, 1.3))
            pil = ImageEnhance.Contrast(pil).enhance(rng.uniform(0.7, 1.3))
            hsv = np.asarray(pil.convert("HSV")).copy()
            hsv[:, :, 0] = (hsv[:, :, 0].astype(int) + int(rng.integers(-10, 11))) % 256  # hue +-14 degrees
            pil = Image.fromarray(hsv, mode="HSV").convert("RGB")
            if rng.random() < 0.2:
                pil = pil.convert("L").convert("RGB")
            pixels = np.asarray(pil.resize((side, side), Image.Resampling.LANCZOS), dtype=np.float64)
            pixels = np.clip(pixels + rng.normal(0, 6, pixels.shape), 0, 255).astype(np.uint8)
            images.append(pixels)
            labels.append(label)
    return images, np.array(labels)


def grey_textures(
    photos: dict[str, np.ndarray], per_class: int = 40, side: int = 48, seed: int = 1
) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for label in _GREY_TEXTURES:
        image = photos[label]
        for _ in range(per_class):
            patch = np.rot90(
                _crop(image, (0, 0, image.shape[1], image.shape[0]), rng, low=0.3, high=0.9), int(rng.integers(4))
            )
            pil = Image.fromarray(np.ascontiguousarray(patch)).resize((side, side), Image.Resampling.LANCZOS)
            pil = ImageEnhance.Brightness(pil).enhance(rng.uniform(0.8, 1.2))
            images.append(np.asarray(pil))
            labels.append(label)
    return images, np.array(labels)


def digits_32() -> tuple[list[np.ndarray], np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = [
        np.asarray(
            Image.fromarray(np.rint(im * (255 / 16)).astype(np.uint8)).resize((32, 32), Image.Resampling.BILINEAR)
        )
        for im in digits.images
    ]
    return images, digits.target


def faces_lfw() -> tuple[list[np.ndarray], np.ndarray]:
    import skimage.data

    faces = skimage.data.lfw_subset()  # 100 faces then 100 non-faces, floats in [0, 1]
    images = [np.rint(face * 255).astype(np.uint8) for face in faces]
    return images, np.array(["face"] * 100 + ["not face"] * 100)


def image_sets() -> dict[str, tuple[list, np.ndarray]]:
    labels = pd.read_csv(SAMPLE / "photos_labels.csv")
    photos = _package_photos()
    return {
        "photos-sample": ([SAMPLE / "photos" / p for p in labels["path"]], labels["true_label"].to_numpy()),
        "patches-hard": hard_patches(photos, seed=0),
        "patches-hard-2": hard_patches(photos, seed=10),
        "textures-grey": grey_textures(photos, seed=1),
        "textures-grey-2": grey_textures(photos, seed=11),
        "digits-32": digits_32(),
        "faces-lfw": faces_lfw(),
    }


IMAGE_FEATURIZERS: dict[str, ImageFeaturizer] = {
    "pixels 16x16 RGB": ImageFeaturizer(["pixels"]),
    "thumbnail 4x4 Lab": ImageFeaturizer(["thumbnail"], thumbnail_side=4),
    "thumbnail 8x8 Lab": ImageFeaturizer(["thumbnail"], thumbnail_side=8),
    "histogram HSV": ImageFeaturizer(["histogram"]),
    "hog 64px, 8x8 cells": ImageFeaturizer(["hog"], hog_side=64, hog_cells=8),
    "hog 64px, 2x2 cells": ImageFeaturizer(["hog"], hog_side=64, hog_cells=2),
    "pixels + hog 8x8": ImageFeaturizer(["pixels", "hog"], hog_cells=8),
    "thumbnail 8 + hog 8x8": ImageFeaturizer(["thumbnail", "hog"], thumbnail_side=8, hog_cells=8),
    "thumbnail 4 + hog 2x2": ImageFeaturizer(["thumbnail", "hog"], thumbnail_side=4, hog_cells=2),
    "thumbnail 4 + histogram": ImageFeaturizer(["thumbnail", "histogram"], thumbnail_side=4),
    "thumbnail 8 + hog 32px 4x4 + histogram": ImageFeaturizer(
        ["thumbnail", "hog", "histogram"], thumbnail_side=8, hog_side=32, hog_cells=4
    ),
    "thumbnail 4 + hog 4x4 + histogram": ImageFeaturizer(["thumbnail", "hog", "histogram"], hog_cells=4),
    "default: thumbnail 4 + hog 2x2 + histogram": ImageFeaturizer(),
}


# ---------------------------------------------------------------------------- run


def run(only: str | None = None) -> pd.DataFrame:
    rows = []

    def measure(dataset: str, name: str, featurize: Callable[[], np.ndarray], y: np.ndarray, baseline: float) -> None:
        start = time.perf_counter()
        X = featurize()
        seconds = time.perf_counter() - start
        accuracy = loo_knn_accuracy(X, y)
        rows.append(
            {
                "dataset": dataset,
                "n": len(y),
                "classes": len(set(y)),
                "featurizer": name,
                "dimension": X.shape[1],
                "accuracy": accuracy,
                "seconds": seconds,
                "ratio": accuracy / baseline,
            }
        )
        print(f"  {dataset:14s} {name:36s} d={X.shape[1]:5d} acc={accuracy:.3f} ({seconds:.2f} s)", flush=True)

    # Warm-up: the first call pays scikit-learn / scikit-image imports, not the featurizer.
    TextFeaturizer(2).fit_transform(["warm up the text path", "second warm up document", "third one"])
    ImageFeaturizer().fit_transform([np.zeros((8, 8, 3), dtype=np.uint8)])
    rng = np.random.default_rng(0)
    sets: dict[str, tuple[list, np.ndarray, dict[str, Callable]]] = {}
    if only in (None, "text"):
        for dataset, (texts, y) in text_sets().items():
            sets[dataset] = (texts, y, {n: (lambda f=f, t=texts: f(t)) for n, f in text_featurizers().items()})
    if only in (None, "image"):
        for dataset, (images, y) in image_sets().items():
            sets[dataset] = (
                images,
                y,
                {n: (lambda f=f, i=images: f.fit_transform(i)) for n, f in IMAGE_FEATURIZERS.items()},
            )
    for dataset, (_, y, featurizers) in sets.items():
        random_X = rng.normal(size=(len(y), RANDOM_DIMENSION))
        baseline = loo_knn_accuracy(random_X, y)
        rows.append(
            {
                "dataset": dataset,
                "n": len(y),
                "classes": len(set(y)),
                "featurizer": "random (baseline)",
                "dimension": RANDOM_DIMENSION,
                "accuracy": baseline,
                "seconds": 0.0,
                "ratio": 1.0,
            }
        )
        for name, featurize in featurizers.items():
            measure(dataset, name, featurize, y, baseline)
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> str:
    lines = [
        "| dataset | n | classes | featurizer | dimension | 5-NN accuracy | seconds | × random |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in table.itertuples(index=False):
        lines.append(
            f"| {r.dataset} | {r.n} | {r.classes} | {r.featurizer} | {r.dimension} | "
            f"{r.accuracy:.3f} | {r.seconds:.2f} | {r.ratio:.2f} |"
        )
    return "\n".join(lines)


def pivot(table: pd.DataFrame) -> str:
    """5-NN accuracy with one row per featurizer and one column per set (dimension in brackets)."""
    datasets = list(dict.fromkeys(table["dataset"]))
    lines = ["| featurizer (dimension) | " + " | ".join(datasets) + " |", "|---|" + "---:|" * len(datasets)]
    for name, part in table.groupby("featurizer", sort=False):
        accuracy = dict(zip(part["dataset"], part["accuracy"], strict=True))
        dimension = part["dimension"].iloc[0]
        lines.append(
            f"| {name} ({dimension}) | "
            + " | ".join(f"{accuracy[d]:.3f}" if d in accuracy else "" for d in datasets)
            + " |"
        )
    return "\n".join(lines)


def summary(table: pd.DataFrame) -> str:
    """Mean accuracy and ratio per featurizer over the image (or text) sets it ran on."""
    lines = ["| featurizer | sets | mean 5-NN accuracy | mean × random | worst × random |", "|---|---:|---:|---:|---:|"]
    grouped = table.groupby("featurizer", sort=False).agg(
        sets=("dataset", "size"), accuracy=("accuracy", "mean"), ratio=("ratio", "mean"), worst=("ratio", "min")
    )
    for name, r in grouped.iterrows():
        lines.append(f"| {name} | {int(r.sets)} | {r.accuracy:.3f} | {r.ratio:.2f} | {r.worst:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["text", "image"], help="run only the text or the image sets")
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        table = run(args.only)
    print()
    print(markdown(table))
    for kind in ("texts", None):
        part = (
            table[table["dataset"].str.startswith("texts")]
            if kind
            else table[~table["dataset"].str.startswith("texts")]
        )
        if not part.empty:
            print()
            print(f"5-NN accuracy on the {'text' if kind else 'image'} sets:")
            print(pivot(part))
            print()
            print(f"Summary over the {'text' if kind else 'image'} sets:")
            print(summary(part))


if __name__ == "__main__":
    main()
