"""app.io.image_folder: a folder of images + a labels CSV, or one sub-folder per label; the image sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from sklearn.neighbors import NearestNeighbors

from app.io.errors import DataFileError
from app.io.featurizers import ImageFeaturizer
from app.io.image_folder import ImageFolder, read_image_folder
from tests.io.test_featurizers import load_sample_script
from tests.io.test_media import png_claiming

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    photos = tmp_path / "photos"
    (photos / "night").mkdir(parents=True)
    Image.new("RGB", (8, 6), "red").save(photos / "a.png")
    Image.new("L", (5, 5), 90).save(photos / "b.jpg")
    Image.new("RGB", (6, 6), "navy").save(photos / "night" / "c.png")
    return photos


def write_labels(tmp_path: Path, text: str, name: str = "labels.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_folder_with_labels_csv(tmp_path: Path, folder: Path) -> None:
    labels = write_labels(
        tmp_path,
        "id,path,candidates,true_label,notes\n"
        "x1,a.png,cat|dog,cat,first\n"
        "x2,b.jpg,dog,,\n"
        'x3,night/c.png,"[""owl"", ""bat"", ""owl""]",bat,\n',
    )
    result = read_image_folder(folder, labels)
    assert result == ImageFolder(
        root=folder.resolve(),
        ids=("x1", "x2", "x3"),
        paths=("a.png", "b.jpg", "night/c.png"),
        candidates=(("cat", "dog"), ("dog",), ("owl", "bat")),
        true_labels=("cat", None, "bat"),
        labels_file=labels,
    )


def test_file_column_and_default_ids(tmp_path: Path, folder: Path) -> None:
    labels = write_labels(
        tmp_path, "file\tcandidates\na.png\tcat\nb.jpg\tdog | cat |\nnight/c.png\towl\n", name="labels.tsv"
    )
    result = read_image_folder(folder, labels)
    assert result.ids == result.paths == ("a.png", "b.jpg", "night/c.png")
    assert result.candidates[1] == ("dog", "cat") and result.true_labels is None


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("a.png,cat\nmissing.png,dog\n", r"row 2 \(spreadsheet row 3\), column 'path': 'missing.png' does not exist"),
        ("a.png,cat\n../../etc/passwd,dog\n", r"row 2 \(spreadsheet row 3\), column 'path': .*outside the media root"),
        ("a.png,cat\nhttps://example.org/x.png,dog\n", r"row 2 .*column 'path': a link is not a file of the folder"),
        ("a.png,cat\nnotes.png,dog\n", r"row 2 .*column 'path': 'notes.png' is not an image"),
        ("a.png,cat\nbomb.png,dog\n", r"row 2 .*column 'path': 'bomb.png' claims more pixels than the decompression"),
        ("a.png,cat\n./a.png,dog\n", r"row 2 .*column 'path': 'a.png' is already listed on row 1"),
        ("a.png,cat\nb.jpg,\n", r"row 2 .*column 'candidates': the candidate set is empty"),
        ("a.png,cat\nb.jpg,[cat\n", r"row 2 .*column 'candidates': .*looks like a JSON list"),
        ("a.png,cat\n,dog\n", r"row 2 .*column 'path': the cell is empty"),
    ],
)
def test_bad_rows_name_row_and_column(tmp_path: Path, folder: Path, rows: str, message: str) -> None:
    (folder / "notes.png").write_text("not an image")
    (folder / "bomb.png").write_bytes(png_claiming(20000, 10000))
    labels = write_labels(tmp_path, "path,candidates\n" + rows)
    with pytest.raises(DataFileError, match=message) as info:
        read_image_folder(folder, labels, unlisted="ignore")
    assert "\n" not in str(info.value)


def test_repeated_id_and_true_label_outside_the_set(tmp_path: Path, folder: Path) -> None:
    labels = write_labels(tmp_path, "id,path,candidates\nk,a.png,cat\nk,b.jpg,dog\n")
    with pytest.raises(DataFileError, match=r"row 2 .*column 'id': id 'k' is already used on row 1"):
        read_image_folder(folder, labels, unlisted="ignore")
    labels = write_labels(tmp_path, "path,candidates,true_label\na.png,cat|dog,owl\n")
    with pytest.raises(
        DataFileError, match=r"row 1 .*column 'true_label': true label 'owl' is not among the candidates cat\|dog"
    ):
        read_image_folder(folder, labels, unlisted="ignore")


def test_unlisted_images_are_an_error_unless_ignored(tmp_path: Path, folder: Path) -> None:
    (folder / ".hidden.png").write_bytes(b"skipped: hidden")
    (folder / "readme.txt").write_text("not an image extension")
    labels = write_labels(tmp_path, "path,candidates\na.png,cat\n")
    with pytest.raises(DataFileError, match=r"2 image\(s\) in the folder are not listed, e.g. 'b.jpg', 'night/c.png'"):
        read_image_folder(folder, labels)
    assert read_image_folder(folder, labels, unlisted="ignore").paths == ("a.png",)
    with pytest.raises(ValueError, match="unlisted must be"):
        read_image_folder(folder, labels, unlisted="warn")


def test_bad_labels_files(tmp_path: Path, folder: Path) -> None:
    with pytest.raises(DataFileError, match="needs the column\\(s\\) candidates; found path"):
        read_image_folder(folder, write_labels(tmp_path, "path\na.png\n"))
    with pytest.raises(DataFileError, match="needs the column\\(s\\) path \\(or file\\); found name, candidates"):
        read_image_folder(folder, write_labels(tmp_path, "name,candidates\na.png,cat\n"))
    with pytest.raises(DataFileError, match="has a header but no rows"):
        read_image_folder(folder, write_labels(tmp_path, "path,candidates\n"))
    with pytest.raises(DataFileError, match="the labels file is empty"):
        read_image_folder(folder, write_labels(tmp_path, ""))
    with pytest.raises(DataFileError, match="the labels file does not exist"):
        read_image_folder(folder, tmp_path / "none.csv")
    with pytest.raises(DataFileError, match="the image folder does not exist"):
        read_image_folder(tmp_path / "none", tmp_path / "labels.csv")


def test_one_subfolder_per_label(tmp_path: Path) -> None:
    root = tmp_path / "pets"
    for label, names in {"cat": ["2.png", "10.png"], "dog": ["1.jpg"]}.items():
        (root / label).mkdir(parents=True)
        for name in names:
            Image.new("RGB", (4, 4)).save(root / label / name)
    result = read_image_folder(root)
    assert result.paths == ("cat/2.png", "cat/10.png", "dog/1.jpg")  # natural order
    assert result.candidates == (("cat",), ("cat",), ("dog",)) and result.labels_file is None
    Image.new("RGB", (4, 4)).save(root / "loose.png")
    with pytest.raises(DataFileError, match=r"1 image\(s\) are not inside a label sub-folder, e.g. 'loose.png'"):
        read_image_folder(root)
    (root / "loose.png").unlink()
    (root / "dog" / "fake.png").write_text("no")
    with pytest.raises(DataFileError, match="'dog/fake.png': 'fake.png' is not an image"):
        read_image_folder(root)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataFileError, match="holds no image"):
        read_image_folder(tmp_path / "empty")


# ---------------------------------------------------------------------------- the image sample


def test_image_sample_reads_and_is_well_formed() -> None:
    sample = read_image_folder(SAMPLE / "photos", SAMPLE / "photos_labels.csv")
    assert len(sample.ids) == 96 and len(set(sample.ids)) == 96
    assert sample.true_labels is not None
    assert all(t in s for t, s in zip(sample.true_labels, sample.candidates, strict=True))
    partial = np.mean([len(s) > 1 for s in sample.candidates])
    assert 0.45 < partial < 0.75
    modes = set()
    for rel in sample.paths:
        with Image.open(sample.root / rel) as image:
            assert image.size == (48, 48)
            modes.add(image.mode)
    assert modes == {"L", "RGB"}
    assert not any(label in rel for rel in sample.paths for label in set(sample.true_labels))  # names hide labels
    total = sum(p.stat().st_size for p in (SAMPLE / "photos").iterdir()) + (SAMPLE / "photos_labels.csv").stat().st_size
    assert total < 500_000


def test_image_sample_is_reproducible() -> None:
    # Depends on scikit-image / scikit-learn's bundled photos and Pillow's resampling, like the
    # digits sample depends on load_digits.
    table, pictures = load_sample_script("make_image_sample").build()
    assert table.to_csv(index=False, lineterminator="\n") == (SAMPLE / "photos_labels.csv").read_text()
    for rel, pixels in pictures.items():
        np.testing.assert_array_equal(np.asarray(Image.open(SAMPLE / "photos" / rel)), pixels)


def test_image_sample_gives_useful_neighbours() -> None:
    table = pd.read_csv(SAMPLE / "photos_labels.csv")
    X = ImageFeaturizer().fit_transform([SAMPLE / "photos" / p for p in table["path"]])
    _, idx = NearestNeighbors(n_neighbors=2).fit(X).kneighbors(X)
    y = table["true_label"].to_numpy()
    assert (y[idx[:, 1]] == y).mean() > 0.6  # eight surfaces: chance is 0.125


def test_image_dataset_from_subfolders_and_features_from(tmp_path: Path) -> None:
    from app.io.image_folder import read_image_dataset

    root = tmp_path / "pets"
    for label, colour in {"cat": "red", "dog": "blue"}.items():
        (root / label).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (6, 6), colour).save(root / label / f"{i}.png")
    ds = read_image_dataset(root)
    assert ds.label_names == ["cat", "dog"] and ds.ids == ["cat/0.png", "cat/1.png", "dog/0.png", "dog/1.png"]
    assert ds.candidates.tolist() == [[True, False], [True, False], [False, True], [False, True]]
    assert ds.true_labels is None and ds.featurizer is not None and ds.media_root == str(root.resolve())
    np.savez(tmp_path / "emb.npz", ids=np.array(ds.ids[::-1]), features=np.arange(8.0).reshape(4, 2))
    brought = read_image_dataset(root, features_from=tmp_path / "emb.npz")
    np.testing.assert_array_equal(brought.X, np.arange(8.0).reshape(4, 2)[::-1])
    assert brought.featurizer is None
