"""Pieces the winnow pages share: how an item is drawn (its text, image, audio and link, or its
features and the PCA map), user content made safe for Markdown, the keyboard helper, and the
caches of what the service layer computes (progress replay, reject queue, export files).

Nothing here computes a session's state: the replay, the reject queue and the exports come
from :mod:`app.service`. Results that depend only on a session's events are cached by
``(session id, number of events)``: the log is append-only, so that pair names one state of
the session.

User content (item texts, label names, ids, session and annotator names) is data, never
markup: it is drawn with ``st.text`` or, where Streamlit only takes Markdown (button labels,
alerts), passed through :func:`md` first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd
import streamlit as st
from PIL import Image, ImageDraw

from app.dataset_rules import image_shape
from app.io.media import ContentError, thumbnail_for_display
from app.service import (
    EXPORT_MIME,
    DeliveredLabels,
    ItemContent,
    RejectQueue,
    Workbench,
    WorkStatus,
    check_session_action,
    export_bytes,
    promise_meaning,
    safe_file_name,
    session_progress,
    session_rights,
    session_table,
    team_figures,
)
from app.ui import downloads
from app.ui.errors import shown_error
from app.ui.state import Keys, TabState, current
from app.ui.state import annotator as ui_annotator
from engine.exceptions import InvalidInput

if TYPE_CHECKING:
    from app.store import LabelSettings

__all__ = [
    "workbench_or_stop",
    "md",
    "show_notice",
    "show_item",
    "show_neighbours",
    "keyboard",
    "pca_projection",
    "progress_history",
    "delivered_labels",
    "labelled_curve",
    "export_maker",
    "export_links",
    "show_work_status",
    "reject_queue",
    "label_set",
    "style",
    "MapFrame",
    "pca_map",
]

#: Points drawn behind the current item on the PCA map (the rest would only slow the page).
MAP_POINTS = 1_000
#: Longest side of an item's picture on the Query page, and of a thumbnail, in CSS pixels.
ITEM_SIDE = {"large": 320, "small": 128, "thumb": 72}
#: Longest side of a pixel-feature picture (an ``image:HxW`` layout such as the 8x8 digits).
DIGIT_SIDE = 200
#: Texts longer than this many characters scroll inside a fixed-height box.
SCROLL_TEXT = 400
#: Characters of an item's text shown as a neighbour's snippet.
SNIPPET = 140

#: The PCA map: its size in pixels (width, height), the margin kept clear around the points,
#: the colours of the sample of other items and of the asked item, and their radii in pixels.
MAP_SIZE = (520, 320)
MAP_MARGIN = 10
MAP_COLOURS = {"other items": (159, 179, 200), "this item": (214, 39, 40)}
MAP_RADII = {"other items": 2, "this item": 7}

# Every ASCII punctuation character may be backslash-escaped in CommonMark; escaping all of
# them turns off emphasis, links, images, HTML, math ($) and Streamlit's :colour[...] syntax.
_MARKDOWN_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")


def workbench_or_stop(bench: Workbench | None) -> Workbench:
    """The tab's open session; without one, or when the signed-in user may not open it (the
    session policy of the store: an annotator opens only the sessions assigned to them), a
    link to the Sessions page, and the page stops.

    While the tab's session is being opened in the background, ``Home.py`` already shows
    its progress, so the page says nothing more than the link.
    """
    if bench is None:
        if current().building is None:
            st.info("No labelling session is open yet.")
        st.page_link("views/sessions.py", label="Create or open a session", icon=":material/folder_open:")
        st.stop()
    try:  # asked on every run, never cached: an assignment or a role can change at any time
        check_session_action(bench.session_factory, bench.session_id, "open", actor=current().user)
    except InvalidInput as exc:
        st.error(md(f"This session is not open to you: {shown_error(exc)}"))
        st.page_link("views/sessions.py", label="Open a session assigned to you", icon=":material/folder_open:")
        st.stop()
    return bench


def md(value: object) -> str:
    """``value`` as Markdown that displays exactly its text (one line).

    >>> md("![x](http://host/p.png)")
    '\\\\!\\\\[x\\\\]\\\\(http\\\\:\\\\/\\\\/host\\\\/p\\\\.png\\\\)'
    >>> md("<b>x</b>")
    '\\\\<b\\\\>x\\\\<\\\\/b\\\\>'
    """
    text = " ".join(str(value).split())  # a line break would start a new Markdown block
    return _MARKDOWN_PUNCTUATION.sub(lambda m: "\\" + m.group(0), text)


#: Streamlit writes a button's shortcut in a faint ``<kbd>`` after its label; this makes it a
#: key cap in front of the label, so every button shows its key unmistakably.
KEYCAP_CSS = """
<style>
button span[data-has-shortcut="true"] { gap: 0.6rem; }
button kbd[aria-label^="Shortcut"] {
  order: -1; opacity: 1; font-weight: 700; font-size: 0.95rem; min-width: 1.6rem; text-align: center;
  padding: 0.05rem 0.4rem; border: 1px solid currentColor; border-radius: 0.3rem; box-shadow: 0 2px 0 currentColor;
}
</style>
"""


#: What "open targets" means, in plain words (the Progress page's help): what the query order
#: works on, not what is left to label (that is the undecided items).
OPEN_TARGETS_HELP = (
    "Items whose nearest neighbours could still vote for more than one label, depending on which label "
    "of their sets is the true one. The Query page asks first the answers that settle the most of them. "
    "Not the work left: that is the undecided items."
)
#: What "undecided" means (the same count on the Query, Rejects and Progress pages).
UNDECIDED_HELP = (
    "Items without a label: no annotator settled them and the model will not label them. "
    "The Rejects page lists exactly these; the Query, Progress and Rejects pages count the same items."
)
#: What "model labels" means (the same count on the Query and Progress pages and in the export).
MODEL_LABELS_HELP = (
    "Items nobody answered that carry the model's label, because audited answers back it: the statement "
    "on the Progress page says how far to trust them."
)


def ask_for_name(tab: TabState) -> bool:
    """True (and a line saying so) while nobody is named to answer in this tab: the page then
    draws its answer buttons disabled. Nobody is named by default, not even the operating
    system's user: answers must be someone's."""
    if ui_annotator(tab):
        return False
    st.warning("Who is answering? Enter your name in the sidebar (Annotator) to answer.")
    return True


def hide_repeated_keys(widget_keys: list[str]) -> None:
    """Hide the key cap of the buttons whose shortcut is their own label (a label ``3`` with the
    key ``3`` would read "3 3"): the label already names the key."""
    if widget_keys:
        rules = ", ".join(f".st-key-{key} kbd" for key in widget_keys)
        st.html(f"<style>{rules} {{ display: none; }}</style>")


def moved_targets_text(criterion: str, n_targets: int) -> str:
    """What the query score counts, worded so that it cannot contradict the "If you say …" lines
    (those count nearby items that become certain or narrow down, for every criterion).

    >>> moved_targets_text("apl", 3)
    'An answer can change the necessary or possible labels of 3 nearby items.'
    """
    items = f"{n_targets} nearby item" + ("" if n_targets == 1 else "s")
    if criterion == "decision_change":
        if n_targets == 0:
            return (
                "An answer is not expected to change which label wins for any nearby item "
                "(an item can become certain and keep its winner)."
            )
        return (
            f"An answer can change which label wins for {items} (an item can also become certain and keep its winner)."
        )
    if criterion in ("apl", "pl"):
        return f"An answer can change the necessary or possible labels of {items}."
    return "This criterion is a baseline: it does not count nearby items."


def style() -> None:
    """Add winnow's page styles (the key caps of :data:`KEYCAP_CSS`); call once per run."""
    st.html(KEYCAP_CSS)


def show_notice(tab: TabState) -> None:
    """Show (once) the message the last callback left, as plain text in a coloured box."""
    if tab.notice is None:
        return
    level, text = tab.notice
    tab.notice = None
    {"error": st.error, "warning": st.warning, "info": st.info}.get(level, st.success)(md(text))


def label_set(bench: Workbench, row: np.ndarray) -> str:
    """A candidate row as ``"3 | 8 | 9"`` (plain text: draw it with ``st.text``)."""
    return " | ".join(bench.label_names[m] for m in np.flatnonzero(row))


# -------------------------------------------------------------------------------- keyboard

_KEYBOARD_JS = """
export default function (component) {
  const { data } = component;
  if (!window.__winnowKeyboard) {
    window.__winnowKeyboard = true;
    // Streamlit ignores shortcut keys while a text field has the focus. After Enter (the
    // value is committed) or Escape, give the focus back to the page so that the next key
    // answers instead of typing into the field. Deferred, so the field handles the key first.
    document.addEventListener("keydown", (event) => {
      const field = event.target;
      if (!(field instanceof HTMLElement)) return;
      const typing = field.tagName === "INPUT" || field.tagName === "TEXTAREA" || field.isContentEditable;
      if (!typing) return;
      const done = event.key === "Escape" || (event.key === "Enter" && field.tagName === "INPUT");
      if (done) setTimeout(() => release(field), 0);
    }, true);
  }
  function release(field) {
    // Blurring alone leaves the focus on <body>, and Streamlit puts it back into the field
    // when it redraws the page; an element outside Streamlit's tree keeps it instead.
    let sink = document.getElementById("winnow-focus-sink");
    if (!sink) {
      sink = document.createElement("div");
      sink.id = "winnow-focus-sink";
      sink.tabIndex = -1;
      sink.style.cssText = "position:fixed;top:0;left:0;width:0;height:0;overflow:hidden;outline:none";
      document.body.appendChild(sink);
    }
    field.blur();
    sink.focus({ preventScroll: true });
  }
  if (data && data.focus) {
    // A page asked for a field to be ready for typing (e.g. the "another label" search). The
    // field may be drawn a moment after this component: look for it for up to two seconds.
    const started = Date.now();
    const focusWanted = () => {
      const wanted = document.querySelector(data.focus);
      if (wanted instanceof HTMLElement) wanted.focus();
      else if (Date.now() - started < 2000) setTimeout(focusWanted, 50);
    };
    focusWanted();
  }
}
"""
_keyboard = st.components.v2.component("winnow_keyboard", js=_KEYBOARD_JS)


def keyboard(*, focus: str | None = None, key: str = "keyboard") -> None:
    """Mount the keyboard helper: after Enter or Escape in a text field the focus returns to the
    page (so shortcut keys work again); ``focus`` is a CSS selector of a field to focus now."""
    _keyboard(key=key, data={"focus": focus}, height=0, width="stretch")


# -------------------------------------------------------------------------------- drawing


def dataset_key(bench: Workbench) -> str:
    """The store's URL: with the dataset id it names a dataset for the caches below."""
    return bench.session_factory.kw["bind"].url.render_as_string(hide_password=True)


def item_image(features: np.ndarray, shape: tuple[int, int], *, lo: float, hi: float, pixels: int = 200) -> np.ndarray:
    """Grey image (dark ink on white) scaled up by pixel repetition to about ``pixels`` wide."""
    grid = np.asarray(features, dtype=float).reshape(shape)
    span = hi - lo if hi > lo else 1.0
    grey = 1.0 - np.clip((grid - lo) / span, 0.0, 1.0)
    scale = max(1, pixels // shape[1])
    return np.repeat(np.repeat(grey, scale, axis=0), scale, axis=1)


#: Most a small photo is enlarged (whole pixels): beyond this its pixels show as blocks.
MAX_ENLARGEMENT = 4


def crisp(pixels: np.ndarray, side: int) -> np.ndarray:
    """A small picture enlarged by whole-pixel repetition towards ``side``, at most
    :data:`MAX_ENLARGEMENT` times (never interpolated, so it is never blurred); a picture
    already that large is returned as it is."""
    factor = min(MAX_ENLARGEMENT, max(1, side // max(pixels.shape[:2])))
    if factor == 1:
        return pixels
    return np.repeat(np.repeat(pixels, factor, axis=0), factor, axis=1)


@st.cache_data(show_spinner=False, max_entries=256)
def _picture(path: str, side: int, modified_ns: int) -> np.ndarray:
    """The image file shrunk to fit ``side`` (never enlarged), cached per file version."""
    return thumbnail_for_display(path, side)


def picture(path: Path, side: int) -> np.ndarray:
    """An item's image at most ``side`` pixels on its longest side, colour kept: shrunk by
    :func:`app.io.media.thumbnail_for_display`, small ones enlarged only by :func:`crisp`.

    Raises :class:`~app.io.media.ContentError` (one line, no server path) when the file cannot
    be shown.
    """
    try:
        modified = path.stat().st_mtime_ns
    except OSError:
        raise ContentError(f"{path.name!r} is no longer in the media folder") from None
    return crisp(_picture(str(path), side, modified), side)


@st.cache_data(show_spinner=False, max_entries=8)
def pca_projection(store_url: str, dataset_id: int, _X: np.ndarray) -> np.ndarray:
    """2-D PCA coordinates of every instance of a dataset (cached per store and dataset)."""
    from sklearn.decomposition import PCA

    X = np.asarray(_X, dtype=float)
    if X.shape[1] < 2:
        return np.column_stack([X[:, 0], np.zeros(X.shape[0])])
    return PCA(n_components=2, random_state=0).fit_transform(X)


@st.cache_data(show_spinner=False, max_entries=8)
def _feature_range(store_url: str, dataset_id: int, _X: np.ndarray) -> tuple[float, float]:
    return float(np.min(_X)), float(np.max(_X))


class MapFrame(NamedTuple):
    """Where PCA coordinates land on the map: ``lo`` (the smallest of each axis) is drawn at the
    margin, ``lo + span`` at the opposite one; the second axis points up."""

    lo: np.ndarray
    span: np.ndarray

    @classmethod
    def fitting(cls, coords: np.ndarray) -> MapFrame:
        span = np.ptp(coords, axis=0).astype(float)
        return cls(coords.min(axis=0).astype(float), np.where(span > 0, span, 1.0))

    def pixels(self, coords: np.ndarray) -> np.ndarray:
        """``(x, y)`` pixel positions of ``coords`` (rows of two PCA coordinates)."""
        width, height = MAP_SIZE
        unit = (np.asarray(coords, dtype=float) - self.lo) / self.span
        x = MAP_MARGIN + unit[:, 0] * (width - 1 - 2 * MAP_MARGIN)
        y = height - 1 - MAP_MARGIN - unit[:, 1] * (height - 1 - 2 * MAP_MARGIN)
        return np.column_stack([x, y])


def _dots(image: Image.Image, centres: np.ndarray, item: str) -> None:
    draw, radius = ImageDraw.Draw(image), MAP_RADII[item]
    ring = (255, 255, 255) if item == "this item" else None  # stands out inside a cluster
    for x, y in centres:
        draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=MAP_COLOURS[item], outline=ring, width=2)


@st.cache_data(show_spinner=False, max_entries=8)
def _map_background(store_url: str, dataset_id: int, _coords: np.ndarray) -> tuple[np.ndarray, MapFrame]:
    """The map without the asked item: a seeded sample of :data:`MAP_POINTS` items, drawn once
    per dataset."""
    rng = np.random.default_rng(0)
    n = _coords.shape[0]
    rows = np.sort(rng.choice(n, size=min(n, MAP_POINTS), replace=False))
    frame = MapFrame.fitting(_coords)
    image = Image.new("RGB", MAP_SIZE, "white")
    ImageDraw.Draw(image).rectangle([0, 0, MAP_SIZE[0] - 1, MAP_SIZE[1] - 1], outline=(225, 225, 225))
    _dots(image, frame.pixels(_coords[rows]), "other items")
    return np.asarray(image), frame


def pca_map(background: np.ndarray, frame: MapFrame, here: np.ndarray) -> np.ndarray:
    """The map with the asked item (PCA coordinates ``here``) drawn over the background.

    A picture rather than a chart: the browser only shows it, where a chart of a thousand points
    cost each annotator's browser more than the rest of the Query page together.
    """
    image = Image.fromarray(background)  # a copy: the cached background stays as it is
    _dots(image, frame.pixels(np.asarray(here, dtype=float).reshape(1, 2)), "this item")
    return np.asarray(image)


def content_or_warning(bench: Workbench, position: int) -> ItemContent:
    """:meth:`Workbench.item_content`; a stored path the service refuses (it leads outside the
    media root) is reported in one line and the item is drawn without its media."""
    try:
        return bench.item_content(position)
    except InvalidInput as exc:
        st.warning(md(shown_error(exc)))
        return ItemContent(text=None, image_path=None, audio_path=None, link=None)


def has_content(content: ItemContent) -> bool:
    return any(v is not None for v in (content.text, content.image_path, content.audio_path, content.link))


def show_item(bench: Workbench, position: int, *, size: str = "large") -> None:
    """Draw an item as a person looks at it.

    Its text (wrapped; a long one scrolls in a fixed-height box), its image (colour kept,
    never blurred by enlarging), an audio player and its link. An item without content shows
    its pixel-feature picture (``image:HxW`` layouts, e.g. the digits) or, failing that, its
    features and its place on a PCA map. With content, the features and the map stay one
    click away, in an expander (``size="large"`` only).
    """
    content = content_or_warning(bench, position)
    side = ITEM_SIDE[size]
    if not has_content(content):
        pictured = _show_features(bench, position, side=side, primary=True, detailed=size == "large")
        if pictured and size == "large":
            with st.expander("Features and map"):
                _show_features(bench, position, side=side, primary=False, detailed=True)
        return
    if content.image_path is not None:
        try:
            st.image(picture(content.image_path, side))
        except ContentError as exc:
            st.warning(md(f"The image cannot be shown: {exc}"))
    if content.text is not None:
        if len(content.text) > SCROLL_TEXT or size != "large":
            with st.container(height=260 if size == "large" else 140, border=True):
                st.text(content.text)
        else:
            with st.container(border=True):
                st.text(content.text)
    if content.audio_path is not None:
        _show_audio(content.audio_path)
    if content.link is not None:
        st.link_button("Open the item's page", content.link, icon=":material/open_in_new:")
    if size == "large":
        with st.expander("Features and map"):
            _show_features(bench, position, side=side, primary=False, detailed=True)


def _show_audio(path: Path) -> None:
    from app.io.media import check_audio

    try:
        mime = check_audio(path)
        st.audio(path.read_bytes(), format=mime)
    except (ContentError, OSError) as exc:
        st.warning(md(f"The audio clip cannot be played: {exc if isinstance(exc, ContentError) else path.name}"))


def _show_features(bench: Workbench, position: int, *, side: int, primary: bool, detailed: bool) -> bool:
    """The pixel picture of an ``image:HxW`` layout when ``primary``, else (when ``detailed``)
    the feature table and the PCA map. Returns whether the picture was drawn."""
    state = bench.state
    dataset = (dataset_key(bench), bench.config.dataset_id)
    shape = image_shape(state.layout, state.X.shape[1])
    if shape is not None and primary:
        lo, hi = _feature_range(*dataset, state.X)
        st.image(item_image(state.X[position], shape, lo=lo, hi=hi, pixels=min(side, DIGIT_SIDE)), clamp=True)
        return True
    if not detailed:
        return False
    names = state.feature_names or tuple(f"x{j}" for j in range(state.X.shape[1]))
    shown = min(len(names), 24)
    table = pd.DataFrame({"feature": list(names[:shown]), "value": [f"{v:.4g}" for v in state.X[position, :shown]]})
    st.dataframe(table, hide_index=True, height=min(36 * (shown + 1), 300))
    if shown < len(names):
        st.caption(f"first {shown} of {len(names)} features")
    coords = pca_projection(*dataset, state.X)
    background, frame = _map_background(*dataset, coords)
    shown_points = min(len(coords), MAP_POINTS)
    st.image(
        pca_map(background, frame, coords[position]),
        caption=f"Its place (red) among {shown_points:,} items of the dataset (grey), on its first two principal"
        " components",
    )
    return False


def show_neighbours(bench: Workbench, positions: list[int]) -> None:
    """The items that decide an item's label: thumbnails in rows of five when they have a
    picture or a text to show; otherwise (items known only by their features) one table of
    their ids and candidate labels, which a reader scans at a glance and a browser draws as
    one element instead of ten."""
    state = bench.state
    contents = [content_or_warning(bench, p) for p in positions]
    pictured = image_shape(state.layout, state.X.shape[1]) is not None
    if not pictured and all(c.image_path is None and c.text is None for c in contents):
        st.dataframe(
            {
                "item": [state.external_ids[p] for p in positions],
                "candidate labels": [label_set(bench, state.candidates[p]) for p in positions],
            },
            hide_index=True,
        )
        return
    per_row = 5
    for start in range(0, len(positions), per_row):
        row = zip(positions[start : start + per_row], contents[start : start + per_row], strict=True)
        for column, (position, content) in zip(st.columns(per_row), row, strict=False):
            with column:
                _thumbnail(bench, position, content)


def _thumbnail(bench: Workbench, position: int, content: ItemContent) -> None:
    """A small view of an item for lists (neighbours): its picture, or a snippet of its text,
    then its id and current candidate labels, all as plain text."""
    state = bench.state
    if content.image_path is not None:
        try:
            st.image(picture(content.image_path, ITEM_SIDE["thumb"]))
        except ContentError:
            st.text("(image missing)")
    elif content.text is not None:
        snippet = content.text if len(content.text) <= SNIPPET else content.text[: SNIPPET - 1] + "…"
        st.text(snippet)
    elif content.audio_path is None and image_shape(state.layout, state.X.shape[1]) is not None:
        _show_features(bench, position, side=ITEM_SIDE["thumb"], primary=True, detailed=False)
    st.text(f"{state.external_ids[position]}\n{label_set(bench, state.candidates[position])}")


# -------------------------------------------------------------------------------- progress


@st.cache_data(show_spinner="Replaying the answers…", max_entries=16)
def progress_history(db: str, session_id: int, n_events: int, actor: str | None, _bench: Workbench) -> pd.DataFrame:
    """:func:`app.service.session_progress` as ``actor``, cached by ``(db, session, number of
    events, actor)``."""
    return session_progress(_bench, n_events, actor=actor)


@st.cache_data(show_spinner="Labelling the dataset…", max_entries=16)
def delivered_labels(
    db: str, session_id: int, n_events: int, settings: LabelSettings, _bench: Workbench
) -> DeliveredLabels:
    """:meth:`Workbench.labels`, cached by ``(db, session, number of events, label settings)``:
    the settings change without an event (an admin sets a new target), and the labels follow."""
    return _bench.labels()


def labelled_curve(history: pd.DataFrame, labels: DeliveredLabels) -> pd.DataFrame:
    """The Progress page's chart data: labelled items against answered items.

    Parameters
    ----------
    history : pandas.DataFrame
        :func:`app.service.session_progress` (its ``answered`` and ``expert_or_given`` columns).
    labels : DeliveredLabels
        The labels as they are now.

    Returns
    -------
    pandas.DataFrame
        Long form, columns ``answered``, ``items`` and ``labels``: the series ``"expert + given"``
        after every event (the last state at each number of answered items: an undo steps back),
        and ``"expert + given + model"`` with one point, now. The model's labels are not
        replayed: their calibration reads the audits as they are now.
    """
    replayed = history.drop_duplicates("answered", keep="last").sort_values("answered")
    known = pd.DataFrame(
        {
            "answered": replayed["answered"].astype(int),
            "items": replayed["expert_or_given"].astype(int),
            "labels": EXPERT_GIVEN,
        }
    )
    now = pd.DataFrame(
        {
            "answered": [int(history["answered"].iloc[-1])],
            "items": [sum(labels.counts[source] for source in ("expert", "given", "model"))],
            "labels": [WITH_MODEL],
        }
    )
    return pd.concat([known, now], ignore_index=True)


#: The series of :func:`labelled_curve`.
EXPERT_GIVEN, WITH_MODEL = "expert + given", "expert + given + model (now)"
#: Counts are whole numbers: integer ticks only (an empty session's zero-width range shows "0",
#: not "0.000000"; a few answers show 1, 2, 3, not 0.5 steps).
COUNT_AXIS: dict = {"format": "d", "tickMinStep": 1}
#: The labelled-items chart: one line per series, every point drawn (the model's is one point).
LABELLED_SPEC: dict = {
    "height": 320,  # the whole chart, legend and axes included
    "mark": {"type": "line", "point": {"size": 70}},
    "encoding": {
        "x": {"field": "answered", "type": "quantitative", "title": "answered items", "axis": COUNT_AXIS},
        "y": {
            "field": "items",
            "type": "quantitative",
            "title": "labelled items",
            "axis": COUNT_AXIS,
            "scale": {"zero": True},
        },
        "color": {
            "field": "labels",
            "type": "nominal",
            "title": None,
            # Above the chart, side by side, never cut short.
            "legend": {"orient": "top", "direction": "horizontal", "labelLimit": 0},
            "scale": {"domain": [EXPERT_GIVEN, WITH_MODEL], "range": ["#1f77b4", "#2ca02c"]},
        },
    },
}


def count_chart(x: str, y: str, *, x_type: str = "quantitative", y_title: str | None = None) -> dict:
    """A line chart of a count (``y``) against ``x``, with whole-number ticks on every count axis."""
    x_axis: dict[str, object] = {"field": x, "type": x_type, "title": x}
    # Counts get whole numbers; times of day to the second (answers come seconds apart).
    x_axis["axis"] = COUNT_AXIS if x_type == "quantitative" else {"format": "%H:%M:%S", "labelOverlap": True}
    return {
        "height": 300,
        "mark": {"type": "line", "point": True},
        "encoding": {
            "x": x_axis,
            "y": {
                "field": y,
                "type": "quantitative",
                "title": y_title or y,
                "axis": COUNT_AXIS,
                "scale": {"zero": True},
            },
        },
    }


#: The accuracy chart: DST-PLL's accuracy over every item (a wide, light line) and over the
#: labels its accept rule keeps (a thin dashed one), so both stay visible where they coincide.
ACCURACY_SPEC: dict = {
    "height": 300,
    # Clipped to the plot: a wide line at 100 % would otherwise be drawn above the axis's end.
    "mark": {"type": "line", "clip": True},
    "encoding": {
        # The axis ends at the last event (not at a rounder number past the data).
        "x": {
            "field": "events",
            "type": "quantitative",
            "title": "events",
            "axis": COUNT_AXIS,
            "scale": {"nice": False, "zero": True},
        },
        # An accuracy lies in [0, 1]: the axis never runs past 100 %.
        "y": {
            "field": "accuracy",
            "type": "quantitative",
            "title": "accuracy",
            "axis": {"format": ".0%"},
            "scale": {"domain": [0, 1], "nice": False},
        },
        "color": {
            "field": "labels",
            "type": "nominal",
            "title": None,
            "legend": {"orient": "top", "direction": "horizontal", "labelLimit": 0},
            "scale": {"range": ["#9ecae1", "#d62728"]},
        },
        "strokeWidth": {"field": "labels", "type": "nominal", "scale": {"range": [6, 2]}, "legend": None},
        "strokeDash": {"field": "labels", "type": "nominal", "scale": {"range": [[1, 0], [6, 4]]}, "legend": None},
    },
}
#: Raw agreement is shown from this many items answered by two or more annotators (one shared
#: item would show a big "0%" or "100%" that means nothing).
AGREEMENT_MIN_ITEMS = 10


def accuracy_frame(history: pd.DataFrame) -> pd.DataFrame:
    """The accuracy chart's data, long form: ``events``, ``accuracy`` and ``labels`` (which line)."""
    frame = history[["step", "dst_accuracy", "accepted_accuracy"]].rename(
        columns={"step": "events", "dst_accuracy": "every item", "accepted_accuracy": "labels it is sure of"}
    )
    return frame.melt(id_vars="events", var_name="labels", value_name="accuracy").dropna()


@st.cache_data(show_spinner=False, max_entries=16)
def team_tables(
    db: str, session_id: int, n_events: int, actor: str | None, _bench: Workbench
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, float | int]]:
    """:func:`app.service.team_figures` (per-annotator progress, pair agreement, overall
    agreement) as ``actor``, cached like the replay."""
    return team_figures(_bench, actor=actor)


# -------------------------------------------------------------------------------- rejects


@st.cache_data(show_spinner="Running the model on the current candidate sets…", max_entries=16)
def reject_queue(db: str, session_id: int, n_events: int, _bench: Workbench) -> RejectQueue:
    """:meth:`Workbench.rejects`, cached by ``(db, session, number of events)``."""
    return _bench.rejects()


# -------------------------------------------------------------------------------- the work's state


def show_work_status(status: WorkStatus, *, statement: str | None = None) -> None:
    """Where the work stands, in the service's words (plain text): done or what is left, the
    statement about the model labels and what its promise means, and what more answers would buy."""
    (st.success if status.done else st.info)(md(status.headline))
    if statement is not None:
        st.text(statement)
        if status.summary.stated:
            st.caption(md(promise_meaning(status.summary)))
    st.text(status.more_answers)


# -------------------------------------------------------------------------------- exports

#: The exports a page links to: (what, title), and the formats of each.
EXPORTS = (
    ("ranked", "Ranked query list"),
    ("labelled", "Labelled data"),
    ("events", "Events log (every answer, skip and undo)"),
)
FORMATS = ("csv", "json", "jsonl")
FORMAT_TITLES = {"csv": "CSV", "json": "JSON", "jsonl": "JSON Lines"}
#: How often the links are drawn again: well within a ticket's life, so a link on an open
#: page keeps working while one copied elsewhere dies (app.ui.downloads).
RENEW_SECONDS = downloads.LIFETIME / 3


@st.fragment(run_every=RENEW_SECONDS)
def export_links(bench: Workbench, kinds: tuple[str, ...] = ("ranked", "labelled", "events")) -> None:
    """One link per export of ``kinds`` the user may take; its file is made when fetched, as this user."""
    tab = current()
    rights = session_rights(bench.session_factory, bench.session_id, actor=tab.user)  # every run: never cached
    owner = downloads.DownloadOwner(tab.user, tab.sign_in_handle if tab.user is not None else None)
    base = str(st.get_option("server.baseUrlPath") or "")
    for what, title in EXPORTS:
        if what not in kinds or f"export_{what}" not in rights:
            continue
        row = st.columns([2, 1, 1, 1])
        row[0].markdown(f"**{title}**")
        for column, fmt in zip(row[1:], FORMATS, strict=True):
            name = f"{what}.{fmt}"
            token = downloads.DOWNLOADS.issue(
                owner,
                safe_file_name(f"{bench.config.name}-{what}.{fmt}"),
                EXPORT_MIME[fmt],
                export_maker(bench, what, fmt, tab.user),
                renew=tab.download_tokens.get(name),
            )
            tab.download_tokens[name] = token
            column.link_button(FORMAT_TITLES[fmt], downloads.download_path(token, base), key=Keys.export(what, fmt))


def export_maker(bench: Workbench, what: str, fmt: str, actor: str | None) -> Callable[[], bytes]:
    """A function that makes :func:`app.service.session_table` of ``what`` as a ``fmt`` file as
    ``actor``, from the session as it is when called (a download link's file is made when it
    is fetched: the store checks ``actor``'s export right then, and an admin's events file
    holds the session's audit rows, a reviewer's does not)."""

    def make() -> bytes:
        bench.refresh()
        return export_bytes(session_table(bench, what, actor=actor), fmt)

    return make
