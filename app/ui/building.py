"""The progress of a session being opened in the background, polled while the app stays usable.

:func:`show_build_progress` draws a progress element for the tab's running
:class:`~app.service.BuildJob` inside a fragment that reruns itself every half second: it
reads the job's latest :class:`~app.service.ProgressUpdate` (stage, units done of total,
percentage and time left) and, once the build is finished, reruns the whole app so the page
shows the opened session. Only the fragment reruns while polling, so the sidebar, the
Sessions page and other sessions keep working.
"""

from __future__ import annotations

import streamlit as st

from app.service import BuildJob

__all__ = ["POLL_SECONDS", "show_build_progress", "build_progress_text"]

#: How often the progress element looks at the build.
POLL_SECONDS = 0.5


OPENING = "Opening the session"
OPENING_NOTE = (
    "The neighbour graph is built once and saved; next time the session opens in seconds. "
    "Other sessions and the Sessions page stay available meanwhile."
)


def build_progress_text(job: BuildJob, what: str = OPENING) -> tuple[float, str]:
    """The bar's fraction and its caption for the job's latest update."""
    update = job.latest
    if update is None:
        return 0.0, f"{what}: starting…"
    return update.fraction or 0.0, f"{what}, {update.describe()}"


def show_build_progress(job: BuildJob, what: str = OPENING, note: str | None = OPENING_NOTE) -> None:
    """A progress element for ``job`` that polls it until it finishes, then reruns the app.

    ``what`` and ``note`` are fixed texts of the page; the caption adds only numbers and
    stage names, never user content.
    """

    @st.fragment(run_every=POLL_SECONDS)
    def poll() -> None:
        if not job.running:
            st.rerun(scope="app")
        fraction, text = build_progress_text(job, what)
        st.progress(fraction, text=text)
        if note:
            st.caption(note)

    poll()
