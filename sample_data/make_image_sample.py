"""Build winnow's image sample: 96 small photos of 8 surfaces with partial labels.

Run ``python sample_data/make_image_sample.py`` from the repository root; it rewrites the PNG
files in ``sample_data/photos/`` and ``sample_data/photos_labels.csv`` (columns
``id,path,candidates,true_label``; ``path`` is relative to ``photos/``). Nothing is downloaded:
the pictures are crops of photographs that ship with scikit-image (``skimage.data``) and
scikit-learn (``load_sample_images``), cut with a seeded ``numpy.random.default_rng``, so the
output is the same on every machine with the same package data.

How a picture is made (documented in ``sample_data/README.md``)
---------------------------------------------------------------
For each label in ``SURFACES`` (12 pictures each): pick one of the label's source regions, a
square crop side in the region's range, a position inside the region; flip left-right with
probability 1/2; turn the greyscale textures (brick, grass, gravel) by a random multiple of 90
degrees; scale the brightness by a factor in [0.85, 1.15]; shrink to ``SIDE`` x ``SIDE`` pixels
(Lanczos). Greyscale sources stay greyscale PNGs (mode ``L``), the others are RGB.

How a candidate set is made
---------------------------
With probability ``P_PARTIAL`` a picture is partial and gets 1 or 2 false labels (equally
likely) drawn without replacement from the other surfaces, a look-alike (``CONFUSABLE``)
``CONFUSABLE_WEIGHT`` times as likely as any other.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

SEED = 20240614
PER_LABEL = 12
SIDE = 48
P_PARTIAL = 0.6
FALSE_LABEL_COUNTS = (1, 2)
CONFUSABLE_WEIGHT = 5.0

OUT_DIR = Path(__file__).resolve().parent
PHOTOS_DIR = OUT_DIR / "photos"
LABELS_PATH = OUT_DIR / "photos_labels.csv"

# label -> [(source image, (x0, y0, x1, y1) region, (smallest, largest) crop side)]
SURFACES: dict[str, list[tuple[str, tuple[int, int, int, int], tuple[int, int]]]] = {
    "brick": [("brick", (0, 0, 512, 512), (96, 200))],
    "grass": [("grass", (0, 0, 512, 512), (96, 200))],
    "gravel": [("gravel", (0, 0, 512, 512), (96, 200))],
    "fur": [("chelsea", (20, 20, 300, 290), (50, 90))],
    "petals": [("flower", (250, 40, 420, 260), (50, 100))],
    "leaves": [("flower", (0, 0, 200, 427), (60, 120)), ("flower", (460, 0, 640, 300), (60, 120))],
    "sky": [("china", (0, 0, 200, 80), (40, 70)), ("rocket", (150, 0, 380, 130), (40, 70))],
    "wood": [("coffee", (0, 0, 200, 120), (50, 100))],
}
_TEXTURES = {"brick", "grass", "gravel"}
_PAIRS = [
    ("brick", "gravel"),
    ("grass", "gravel"),
    ("grass", "leaves"),
    ("fur", "wood"),
    ("petals", "wood"),
    ("leaves", "sky"),
    ("brick", "wood"),
    ("fur", "grass"),
]
CONFUSABLE: dict[str, tuple[str, ...]] = {
    label: tuple(sorted({b for a, b in _PAIRS if a == label} | {a for a, b in _PAIRS if b == label}))
    for label in SURFACES
}


def source_images() -> dict[str, np.ndarray]:
    """The package photographs the crops come from (uint8; greyscale (h, w) or RGB (h, w, 3))."""
    import skimage.data
    from sklearn.datasets import load_sample_images

    china, flower = load_sample_images().images
    return {
        "brick": skimage.data.brick(),
        "grass": skimage.data.grass(),
        "gravel": skimage.data.gravel(),
        "chelsea": skimage.data.chelsea(),
        "coffee": skimage.data.coffee(),
        "rocket": skimage.data.rocket(),
        "china": china,
        "flower": flower,
    }


def crop(
    image: np.ndarray,
    region: tuple[int, int, int, int],
    sides: tuple[int, int],
    *,
    out_side: int,
    turn: bool,
    rng: np.random.Generator,
) -> np.ndarray:
    """One random square crop of ``region`` of ``image``, jittered and shrunk to ``out_side``."""
    x0, y0, x1, y1 = region
    side = min(int(rng.integers(sides[0], sides[1] + 1)), x1 - x0, y1 - y0)
    x = int(rng.integers(x0, x1 - side + 1))
    y = int(rng.integers(y0, y1 - side + 1))
    patch = image[y : y + side, x : x + side]
    if rng.random() < 0.5:
        patch = patch[:, ::-1]
    if turn:
        patch = np.rot90(patch, int(rng.integers(4)))
    patch = np.clip(np.rint(patch * rng.uniform(0.85, 1.15)), 0, 255).astype(np.uint8)
    small = Image.fromarray(np.ascontiguousarray(patch)).resize((out_side, out_side), Image.Resampling.LANCZOS)
    return np.asarray(small)


def candidate_set(label: str, rng: np.random.Generator) -> list[str]:
    """The true label plus, for a partial picture, 1 or 2 false labels (module docstring)."""
    labels = [label]
    if rng.random() < P_PARTIAL:
        others = [other for other in SURFACES if other != label]
        weights = np.array([CONFUSABLE_WEIGHT if other in CONFUSABLE[label] else 1.0 for other in others])
        n_false = int(rng.choice(FALSE_LABEL_COUNTS))
        labels += [
            others[int(j)] for j in rng.choice(len(others), size=n_false, replace=False, p=weights / weights.sum())
        ]
    order = list(SURFACES)
    return sorted(labels, key=order.index)


def build(seed: int = SEED) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """The labels table (id, path, candidates, true_label) and the pictures by relative path."""
    rng = np.random.default_rng(seed)
    sources = source_images()
    order = [label for label in SURFACES for _ in range(PER_LABEL)]
    rng.shuffle(order)
    rows, pictures = [], {}
    for i, label in enumerate(order):
        name, region, sides = SURFACES[label][int(rng.integers(len(SURFACES[label])))]
        path = f"img_{i + 1:03d}.png"  # the name must not give the label away
        pictures[path] = crop(sources[name], region, sides, out_side=SIDE, turn=label in _TEXTURES, rng=rng)
        rows.append(
            {
                "id": f"p{i + 1:03d}",
                "path": path,
                "candidates": "|".join(candidate_set(label, rng)),
                "true_label": label,
            }
        )
    return pd.DataFrame(rows, columns=["id", "path", "candidates", "true_label"]), pictures


def main() -> None:
    table, pictures = build()
    PHOTOS_DIR.mkdir(exist_ok=True)
    for old in PHOTOS_DIR.glob("*.png"):
        old.unlink()
    for path, pixels in pictures.items():
        # optimize=True: smaller files; PNG is lossless, so the pixels are exactly these.
        Image.fromarray(pixels).save(PHOTOS_DIR / path, optimize=True)
    table.to_csv(LABELS_PATH, index=False, lineterminator="\n")
    print(f"wrote {len(pictures)} pictures to {PHOTOS_DIR.name}/ and {LABELS_PATH.name}")


if __name__ == "__main__":
    main()
