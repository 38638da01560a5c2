"""app.io.featurizers: text and image features, records without pickle, embedders, features files."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from sklearn.neighbors import NearestNeighbors

from app.io.errors import DataFileError
from app.io.featurizers import (
    FEATURES_FILE_MAX_BYTES,
    ClipEmbedder,
    EmbedderUnavailable,
    FeaturizerRecord,
    ImageFeaturizer,
    SentenceEmbedder,
    TextFeaturizer,
    featurizer_from_record,
    load_features_file,
)
from app.io.media import ContentError
from engine.exceptions import InvalidInput, NotFittedError

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"

PETS = [
    "the cat sleeps on the warm sofa",
    "a kitten chases the cat toy",
    "our cat purrs and sleeps",
    "the dog barks at the postman",
    "a puppy chews the dog bone",
    "the dog fetches a stick",
]
MONEY = [
    "the bank raised interest rates",
    "investors sold bank shares",
    "bond yields and interest rates rose",
    "the market fell as shares slid",
    "the central bank cut rates",
    "shares and bonds rallied on the market",
]
CORPUS = PETS + MONEY


def store_round_trip(record: FeaturizerRecord) -> FeaturizerRecord:
    """What the store does: params through JSON text, state as raw bytes."""
    return FeaturizerRecord(name=record.name, params=json.loads(json.dumps(record.params)), state=bytes(record.state))


# ---------------------------------------------------------------------------- text


def test_text_features_are_unit_rows_and_group_topics() -> None:
    featurizer = TextFeaturizer(dimension=4)
    X = featurizer.fit_transform(CORPUS)
    assert X.shape == (12, 4) and X.dtype == np.float64
    assert featurizer.method_ == "svd" and featurizer.dimension_ == 4
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0)
    _, idx = NearestNeighbors(n_neighbors=2).fit(X).kneighbors(X)
    topic = np.array([0] * 6 + [1] * 6)
    assert (topic[idx[:, 1]] == topic).mean() >= 10 / 12


def test_dimension_is_clipped_to_documents_and_vocabulary() -> None:
    featurizer = TextFeaturizer(dimension=64).fit(CORPUS)
    assert featurizer.dimension_ == 11  # n_docs - 1
    tiny = TextFeaturizer(dimension=64).fit(["red apples", "green apples", "red pears", "ripe pears here"])
    # 4 documents, 6 terms: at most 3 dimensions.
    assert tiny.method_ == "svd" and tiny.dimension_ == 3
    few_terms = TextFeaturizer(dimension=64).fit(["aa bb", "bb cc", "aa cc", "aa bb cc", "cc aa"])
    assert few_terms.dimension_ == 2  # vocabulary - 1


def test_very_few_documents_fall_back_to_tfidf() -> None:
    featurizer = TextFeaturizer().fit(["the only document here", "another one"])
    assert featurizer.method_ == "tfidf" and featurizer.dimension_ == len(featurizer.vocabulary_) == 6
    X = featurizer.transform(["the only one", "nothing known"])
    assert X.shape == (2, 6)
    np.testing.assert_allclose(np.linalg.norm(X[0]), 1.0)
    assert not X[1].any()  # no known word: a zero row


@pytest.mark.parametrize("method_corpus", [CORPUS, ["one lonely document", "and a second"]])
def test_record_round_trip_gives_bit_identical_features(method_corpus: list[str]) -> None:
    featurizer = TextFeaturizer(dimension=5, random_state=3).fit(method_corpus)
    new = ["a cat and a dog at the bank", "interest rates for the kitten", "unknown words only"]
    before = featurizer.transform(new)
    record = featurizer.to_record()
    assert record.name == "tfidf-svd" and record.params["output_dimension"] == featurizer.dimension_
    with np.load(io.BytesIO(record.state), allow_pickle=False) as arrays:
        assert sorted(arrays.files) == ["components", "idf", "terms"]
    rebuilt = featurizer_from_record(store_round_trip(record))
    assert isinstance(rebuilt, TextFeaturizer)
    after = rebuilt.transform(new)
    assert before.tobytes() == after.tobytes()
    assert rebuilt.to_record().params == record.params


def test_fitting_is_deterministic() -> None:
    a = TextFeaturizer(dimension=6).fit_transform(CORPUS)
    b = TextFeaturizer(dimension=6).fit_transform(CORPUS)
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("bad", ["", "   \n", None, float("nan")])
def test_empty_text_names_the_row(bad: object) -> None:
    with pytest.raises(ContentError, match=r"^row 3: the text is empty$") as info:
        TextFeaturizer().fit(["first text", "second text", bad])
    assert info.value.row == 3
    with pytest.raises(ContentError, match=r"^row 12: the text is empty$"):
        TextFeaturizer().fit(["first text", "second text", bad], rows=[10, 11, 12])


def test_text_without_words_and_non_text_are_refused() -> None:
    featurizer = TextFeaturizer(dimension=2).fit(CORPUS)
    with pytest.raises(ContentError, match=r"^row 2: the text '!! \?' has no word"):
        featurizer.transform(["cat", "!! ?"])
    with pytest.raises(ContentError, match=r"^row 1: the text 'x' has no word"):
        TextFeaturizer().fit(["x"])
    with pytest.raises(ContentError, match="is not text"):
        featurizer.transform([42])
    with pytest.raises(TypeError, match="not a single string"):
        featurizer.transform("a cat")


def test_text_parameter_and_state_errors() -> None:
    with pytest.raises(NotFittedError):
        TextFeaturizer().transform(["a cat"])
    with pytest.raises(ValueError, match="dimension must be at least 1"):
        TextFeaturizer(dimension=0).fit(CORPUS)
    with pytest.raises(ValueError, match="analyzer must be 'word' or 'char_wb'"):
        TextFeaturizer(analyzer="chars").fit(CORPUS)
    with pytest.raises(InvalidInput, match="at least one document"):
        TextFeaturizer().fit([])
    with pytest.raises(InvalidInput, match="no term is left"):
        TextFeaturizer(min_df=5).fit(["aa bb", "cc dd"])
    with pytest.raises(ValueError, match="rows has 1 entries but there are 2 items"):
        TextFeaturizer().fit(["aa bb", "cc dd"], rows=[1])


def test_char_analyzer_round_trips() -> None:
    featurizer = TextFeaturizer(dimension=3, analyzer="char_wb").fit(CORPUS)
    rebuilt = featurizer_from_record(store_round_trip(featurizer.to_record()))
    assert featurizer.transform(["kitten"]).tobytes() == rebuilt.transform(["kitten"]).tobytes()


def test_bad_records_are_refused() -> None:
    record = TextFeaturizer(dimension=3).fit(CORPUS).to_record()
    with pytest.raises(InvalidInput, match="unknown featurizer 'bag-of-words'"):
        featurizer_from_record(FeaturizerRecord("bag-of-words", record.params, record.state))
    with pytest.raises(InvalidInput, match="format 99 is not supported"):
        featurizer_from_record(FeaturizerRecord(record.name, {**record.params, "format": 99}, record.state))
    with pytest.raises(InvalidInput, match="inconsistent"):
        featurizer_from_record(FeaturizerRecord(record.name, {**record.params, "output_dimension": 7}, record.state))
    with pytest.raises(InvalidInput, match="cannot be read"):
        featurizer_from_record(FeaturizerRecord(record.name, record.params, b"not an npz"))
    with pytest.raises(InvalidInput, match="not valid"):
        featurizer_from_record(FeaturizerRecord(record.name, {**record.params, "colour": "red"}, record.state))
    # A state holding an object array would need pickle: refused, never unpickled.
    buffer = io.BytesIO()
    np.savez(buffer, terms=np.array([{"a": 1}], dtype=object), idf=np.ones(1), components=np.zeros((0, 1), np.float32))
    with pytest.raises(InvalidInput, match="cannot be read"):
        featurizer_from_record(FeaturizerRecord(record.name, record.params, buffer.getvalue()))
    with pytest.raises(TypeError, match="FeaturizerRecord"):
        featurizer_from_record({"name": "tfidf-svd"})


def load_sample_script(name: str):
    """Import ``sample_data/<name>.py`` (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, SAMPLE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_text_sample_is_reproducible_and_well_formed() -> None:
    generator = load_sample_script("make_text_sample")
    committed = (SAMPLE / "texts.csv").read_text(encoding="utf-8")
    assert generator.build().to_csv(index=False, lineterminator="\n") == committed
    table = pd.read_csv(SAMPLE / "texts.csv", dtype=str, keep_default_na=False)
    assert list(table.columns) == ["id", "text", "candidates", "true_label"]
    assert len(table) == 300 and table["id"].is_unique
    assert sorted(table["true_label"].unique()) == sorted(generator.TOPICS)
    sets = table["candidates"].str.split("|")
    assert all(
        t in s and len(set(s)) == len(s) and 1 <= len(s) <= 3 for t, s in zip(table["true_label"], sets, strict=True)
    )
    assert 0.5 < (sets.str.len() > 1).mean() < 0.7
    assert (table["text"].str.len() > 20).all()


def test_text_sample_gives_useful_neighbours() -> None:
    table = pd.read_csv(SAMPLE / "texts.csv")
    X = TextFeaturizer().fit_transform(table["text"].tolist())
    _, idx = NearestNeighbors(n_neighbors=2).fit(X).kneighbors(X)
    y = table["true_label"].to_numpy()
    assert (y[idx[:, 1]] == y).mean() > 0.8  # five topics: chance is 0.2


# ---------------------------------------------------------------------------- images


def _flat(colour: tuple[int, int, int], size: tuple[int, int] = (20, 30)) -> np.ndarray:
    return np.full((size[1], size[0], 3), colour, dtype=np.uint8)


def _stripes(vertical: bool) -> np.ndarray:
    image = np.zeros((64, 64, 3), dtype=np.uint8)
    if vertical:
        image[:, ::8] = 255
    else:
        image[::8, :] = 255
    return image


def test_default_image_features_shape_and_block_norms() -> None:
    featurizer = ImageFeaturizer()
    assert featurizer.dimension_ == 48 + 36 + 72
    X = featurizer.fit_transform([_flat((200, 30, 30)), _stripes(True)])
    assert X.shape == (2, 156) and np.isfinite(X).all()
    np.testing.assert_allclose(np.linalg.norm(X[1, :48]), 1.0)  # thumbnail block
    np.testing.assert_allclose(np.linalg.norm(X[1, 48:84]), 1.0)  # hog block
    np.testing.assert_allclose(np.linalg.norm(X[1, 84:]), 1.0)  # histogram block


def test_colour_and_shape_both_count() -> None:
    X = ImageFeaturizer().transform(
        [_flat((220, 20, 20)), _flat((210, 30, 25)), _flat((20, 20, 220)), _stripes(True), _stripes(False)]
    )
    distance = lambda i, j: float(np.linalg.norm(X[i] - X[j]))  # noqa: E731
    assert distance(0, 1) < distance(0, 2)  # red is nearer red than blue
    assert distance(3, 4) > 0.5  # stripes that turn differ in their gradients


def test_paths_of_any_mode_give_the_features_of_their_pixels(tmp_path: Path) -> None:
    rgb = np.random.default_rng(0).integers(0, 256, (40, 50, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    Image.fromarray(rgb).convert("RGBA").save(tmp_path / "rgba.png")
    Image.fromarray(rgb).convert("P").save(tmp_path / "palette.png")
    Image.fromarray(rgb).convert("L").save(tmp_path / "grey.png")
    Image.fromarray(rgb[:, :, 0].astype(np.uint16) * 257).save(tmp_path / "deep.png")
    featurizer = ImageFeaturizer()
    X = featurizer.transform([tmp_path / n for n in ("rgb.png", "rgba.png", "palette.png", "grey.png", "deep.png")])
    assert np.isfinite(X).all()
    from_array = featurizer.transform([rgb])
    assert X[0].tobytes() == from_array[0].tobytes() == X[1].tobytes()


def test_bad_image_names_the_row(tmp_path: Path) -> None:
    (tmp_path / "broken.png").write_text("nope")
    Image.new("RGB", (4, 4)).save(tmp_path / "ok.png")
    with pytest.raises(ContentError, match=r"^row 8: 'broken.png' is not an image"):
        ImageFeaturizer().transform([tmp_path / "ok.png", tmp_path / "broken.png"], rows=[7, 8])
    with pytest.raises(ValueError, match="uint8"):
        ImageFeaturizer().transform([np.zeros((4, 4, 3))])
    with pytest.raises(ContentError, match="at most 10 are accepted"):
        ImageFeaturizer(max_pixels=10).transform([tmp_path / "ok.png"])


def test_image_parameters_and_record() -> None:
    featurizer = ImageFeaturizer(["thumbnail", "hog"], thumbnail_side=8, hog_side=32, hog_cells=4)
    assert featurizer.dimension_ == 192 + 36 * 9
    record = featurizer.to_record()
    assert record.state == b""
    rebuilt = featurizer_from_record(store_round_trip(record))
    image = _stripes(True)
    assert rebuilt.transform([image]).tobytes() == featurizer.transform([image]).tobytes()
    with pytest.raises(InvalidInput, match="says dimension"):
        featurizer_from_record(FeaturizerRecord("image", {**record.params, "output_dimension": 3}))
    with pytest.raises(ValueError, match="blocks must be distinct names"):
        ImageFeaturizer(["edges"]).fit()
    with pytest.raises(ValueError, match="multiple of hog_cells"):
        ImageFeaturizer(hog_side=30, hog_cells=4).fit()
    with pytest.raises(TypeError, match="not a single string"):
        ImageFeaturizer("hog").fit()


# ---------------------------------------------------------------------------- embedders


@pytest.mark.parametrize(
    ("cls", "marker"), [(SentenceEmbedder, "modules.json"), (ClipEmbedder, "open_clip_config.json")]
)
def test_embedder_without_model_directory_names_the_path(tmp_path: Path, cls: type, marker: str) -> None:
    with pytest.raises(
        EmbedderUnavailable, match=r"model directory '.*nowhere' does not exist; winnow never downloads"
    ):
        cls(tmp_path / "nowhere").fit()
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmbedderUnavailable, match=f"is not a .* model directory \\(none of .*{marker}"):
        cls(tmp_path / "empty").transform(["x"] if cls is SentenceEmbedder else [np.zeros((2, 2, 3), np.uint8)])


@pytest.mark.parametrize(
    ("cls", "module", "marker", "package"),
    [
        (SentenceEmbedder, "sentence_transformers", "modules.json", "sentence-transformers"),
        (ClipEmbedder, "open_clip", "open_clip_config.json", "open_clip_torch"),
    ],
)
def test_embedder_without_package_says_which_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cls: type, module: str, marker: str, package: str
) -> None:
    (tmp_path / marker).write_text("{}")
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail like a missing package
    with pytest.raises(EmbedderUnavailable) as info:
        cls(tmp_path).load()
    assert str(info.value) == f"{package} is not installed; install the extra with: pip install 'winnow[embed]'"


def test_embedder_records_and_text_checks(tmp_path: Path) -> None:
    embedder = featurizer_from_record(store_round_trip(SentenceEmbedder(tmp_path, batch_size=8).to_record()))
    assert isinstance(embedder, SentenceEmbedder) and embedder.model_dir == str(tmp_path) and embedder.batch_size == 8
    clip = featurizer_from_record(store_round_trip(ClipEmbedder(tmp_path).to_record()))
    assert isinstance(clip, ClipEmbedder) and clip.model_dir == str(tmp_path)
    with pytest.raises(ContentError, match="^row 2: the text is empty"):
        SentenceEmbedder(tmp_path).transform(["fine", " "])


# ---------------------------------------------------------------------------- features files

IDS = ["a", "b", "c", "d"]
F = np.arange(12, dtype=np.float64).reshape(4, 3) / 4


def test_npy_in_item_order(tmp_path: Path) -> None:
    np.save(tmp_path / "f.npy", F.astype(np.float32))
    out = load_features_file(tmp_path / "f.npy", IDS)
    assert out.dtype == np.float64 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, F)
    with pytest.raises(DataFileError, match="has 4 rows but the dataset has 3 items"):
        load_features_file(tmp_path / "f.npy", IDS[:3])
    with pytest.raises(DataFileError, match="the features have 3 columns; this dataset's features have 5"):
        load_features_file(tmp_path / "f.npy", IDS, expected_dimension=5)


def test_npz_is_aligned_by_id(tmp_path: Path) -> None:
    order = [2, 0, 3, 1]
    np.savez(tmp_path / "f.npz", ids=np.array(IDS)[order], features=F[order])
    np.testing.assert_array_equal(load_features_file(tmp_path / "f.npz", IDS), F)
    np.savez(tmp_path / "ints.npz", ids=np.array([3, 1, 2]), features=F[:3])
    np.testing.assert_array_equal(load_features_file(tmp_path / "ints.npz", ["1", "2", "3"]), F[[1, 2, 0]])
    np.savez(tmp_path / "single.npz", embeddings=F)
    np.testing.assert_array_equal(load_features_file(tmp_path / "single.npz", IDS), F)


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (["a", "b", "c"], r"1 id\(s\) are not items of the dataset, e.g. 'd'"),
        (["a", "b", "c", "d", "e"], r"1 item id\(s\) have no features in the file, e.g. 'e'"),
    ],
)
def test_npz_id_mismatch(tmp_path: Path, ids: list[str], message: str) -> None:
    np.savez(tmp_path / "f.npz", ids=np.array(IDS), features=F)
    with pytest.raises(DataFileError, match=message) as info:
        load_features_file(tmp_path / "f.npz", ids)
    assert "\n" not in str(info.value)


def test_duplicated_ids_name_both_rows(tmp_path: Path) -> None:
    np.savez(tmp_path / "f.npz", ids=np.array(["a", "b", "a", "c"]), features=F)
    with pytest.raises(DataFileError, match=r"row 3 \(1-based\), column 'ids': id 'a' appears twice \(rows 1 and 3\)"):
        load_features_file(tmp_path / "f.npz", ["a", "b", "c"])


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (
            {"ids": np.array(IDS), "features": np.array([[1.0, np.nan]] * 4)},
            r"row 1 \(1-based\), column 'feature 1': the value nan is not a finite number",
        ),
        (
            {"ids": np.array(IDS), "features": np.array([[1.0, 2.0]] * 3 + [[np.inf, 0.0]])},
            r"row 4 \(1-based\), column 'feature 0': the value inf",
        ),
        ({"ids": np.array(IDS), "features": np.array(["x"] * 4)}, "dtype <U1; features must be integers or floats"),
        ({"ids": np.array(IDS), "features": np.ones(4)}, "1-D of shape"),
        ({"ids": np.array(IDS), "features": np.ones((4, 2), dtype=bool)}, "dtype bool"),
        ({"ids": np.array(IDS[:3]), "features": np.ones((4, 2))}, "has 3 ids but 4 feature rows"),
        ({"features": np.ones((4, 2))}, "no 'ids' array"),
        ({"x": np.ones((4, 2)), "y": np.ones((4, 2))}, "holds arrays x, y; expected 'ids' \\+ 'features'"),
        ({"ids": np.array([1.5, 2.5, 3.5, 4.5]), "features": np.ones((4, 2))}, "ids have dtype float64"),
    ],
)
def test_bad_npz(tmp_path: Path, arrays: dict[str, np.ndarray], message: str) -> None:
    np.savez(tmp_path / "f.npz", **arrays)
    with pytest.raises(DataFileError, match=message):
        load_features_file(tmp_path / "f.npz", IDS)


def test_npz_object_arrays_are_never_unpickled(tmp_path: Path) -> None:
    np.savez(tmp_path / "f.npz", ids=np.array(IDS, dtype=object), features=F)
    with pytest.raises(DataFileError, match="ids have dtype object"):
        load_features_file(tmp_path / "f.npz", IDS)
    np.save(tmp_path / "f.npy", np.array([[{"x": 1}]] * 4, dtype=object), allow_pickle=True)
    with pytest.raises(DataFileError, match="dtype object"):
        load_features_file(tmp_path / "f.npy", IDS)


def test_zip_bomb_is_refused_before_inflating(tmp_path: Path) -> None:
    # 16 MB of zeros deflate to ~16 KB; with a 1 MB limit the declared size alone refuses it.
    np.savez_compressed(tmp_path / "bomb.npz", ids=np.array(IDS), features=np.zeros((4, 500_000)))
    assert (tmp_path / "bomb.npz").stat().st_size < 100_000
    with pytest.raises(DataFileError, match=r"the archive needs 16,000,\d+ bytes once loaded; at most 1,000,000"):
        load_features_file(tmp_path / "bomb.npz", IDS, max_bytes=1_000_000)


def test_forged_sizes_are_refused_with_the_default_limit(tmp_path: Path) -> None:
    np.savez(tmp_path / "f.npz", ids=np.array(IDS), features=F)
    data = bytearray((tmp_path / "f.npz").read_bytes())
    central = data.index(b"PK\x01\x02")  # first central-directory entry: uncompressed size at +24
    data[central + 24 : central + 28] = (0xFFFFFFF0).to_bytes(4, "little")
    (tmp_path / "forged.npz").write_bytes(bytes(data))
    with pytest.raises(DataFileError, match=f"at most {FEATURES_FILE_MAX_BYTES:,} are accepted"):
        load_features_file(tmp_path / "forged.npz", IDS)


def test_npy_header_claiming_a_huge_array_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": (10**9, 1000)})
    (tmp_path / "huge.npy").write_bytes(buffer.getvalue() + b"\x00" * 64)
    with pytest.raises(DataFileError, match=r"the 1000000000x1000 array needs 8,000,000,000,000 bytes"):
        load_features_file(tmp_path / "huge.npy", IDS)
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": (4, 3)})
    (tmp_path / "short.npy").write_bytes(buffer.getvalue() + b"\x00" * 10)
    with pytest.raises(DataFileError, match="truncated"):
        load_features_file(tmp_path / "short.npy", IDS)


def test_npz_member_header_larger_than_its_data_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": (4, 10**6)})
    with zipfile.ZipFile(tmp_path / "lie.npz", "w") as archive:
        archive.writestr("features.npy", buffer.getvalue() + b"\x00" * 32)
        ids = io.BytesIO()
        np.save(ids, np.array(IDS))
        archive.writestr("ids.npy", ids.getvalue())
    with pytest.raises(DataFileError, match="array 'features' claims 32,000,000 bytes but the archive holds"):
        load_features_file(tmp_path / "lie.npz", IDS)


def test_parquet_numeric_columns_and_list_column(tmp_path: Path) -> None:
    order = [3, 1, 0, 2]
    table = pd.DataFrame({"id": np.array(IDS)[order], "x": F[order, 0], "y": F[order, 1], "z": F[order, 2]})
    table.to_parquet(tmp_path / "cols.parquet")
    np.testing.assert_array_equal(load_features_file(tmp_path / "cols.parquet", IDS), F)
    lists = pa.table({"item": [1, 2, 3, 4], "embedding": [list(row) for row in F]})
    pq.write_table(lists, tmp_path / "list.parquet")
    np.testing.assert_array_equal(
        load_features_file(tmp_path / "list.parquet", ["1", "2", "3", "4"], id_column="item"), F
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (pa.table({"id": IDS, "x": [1.0, None, 2.0, 3.0]}), r"row 2 \(1-based\), column 'x': the value is missing"),
        (pa.table({"id": IDS, "x": ["a", "b", "c", "d"]}), "column 'x' has type string; features must be numeric"),
        (pa.table({"key": IDS, "x": [1.0] * 4}), "has no 'id' column; columns are key, x"),
        (pa.table({"id": IDS}), "has no feature column besides 'id'"),
        (
            pa.table({"id": IDS, "e": [[1.0, 2.0], [1.0], [1.0, 2.0], [3.0, 4.0]]}),
            r"row 2 \(1-based\), column 'e': the embedding has 1 values, row 1 has 2",
        ),
        (pa.table({"id": IDS, "e": [[1.0], [2.0], [3.0], [4.0]], "x": [1.0] * 4}), "mixes list columns"),
        (pa.table({"id": ["a", "b", "c", None], "x": [1.0] * 4}), r"row 4 \(1-based\), column 'id': the id is missing"),
        (pa.table({"id": IDS, "x": [1.0, 2.0, float("inf"), 0.0]}), r"row 3 \(1-based\), column 'x': the value inf"),
    ],
)
def test_bad_parquet(tmp_path: Path, table: pa.Table, message: str) -> None:
    pq.write_table(table, tmp_path / "f.parquet")
    with pytest.raises(DataFileError, match=message):
        load_features_file(tmp_path / "f.parquet", IDS)


def test_parquet_size_limit_and_file_errors(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": IDS, "x": [1.0] * 4}), tmp_path / "f.parquet")
    with pytest.raises(DataFileError, match="at most 10 are accepted"):
        load_features_file(tmp_path / "f.parquet", IDS, max_bytes=10)
    with pytest.raises(DataFileError, match="does not exist"):
        load_features_file(tmp_path / "none.npy", IDS)
    (tmp_path / "f.csv").write_text("id,x\n")
    with pytest.raises(DataFileError, match=r"extension '.csv' is not a features file; use .npy, .npz, .parquet"):
        load_features_file(tmp_path / "f.csv", IDS)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(DataFileError, match="not a valid .npz archive"):
        load_features_file(tmp_path / "bad.npz", IDS)
