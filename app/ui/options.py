"""The Streamlit options winnow's server always runs with, set in code by ``app/ui/server.py``.

Set here rather than in a ``.streamlit/config.toml``: Streamlit reads that file from the folder
it is started in, so a server started anywhere else (or from a folder with its own config) would
show every user the developer menu, "Clear cache" and full tracebacks.
"""

from __future__ import annotations

from streamlit import config

from app.ui.gate import IDENTITY_HEADER, IDENTITY_KEY

__all__ = ["SERVER_OPTIONS", "DEV_OPTIONS", "apply_server_options"]

#: Streamlit options winnow always runs with; ``--dev`` relaxes the ones marked.
SERVER_OPTIONS: dict[str, object] = {
    "server.trustedUserHeaders": {IDENTITY_HEADER: IDENTITY_KEY},
    "server.enableXsrfProtection": True,
    "server.enableCORS": True,
    "server.runOnSave": False,
    "server.fileWatcherType": "none",
    # Streamlit's gc.collect() after every script run was 40 % of the server's CPU per answer
    # (py-spy of a `winnow ui` under bench_team, 20k items): a full collection over the
    # session's arrays and the libraries' objects on every key press. Python's own
    # generational collector still frees cycles; the memory stays bounded (bench_team's
    # peak RSS).
    "runner.postScriptGC": False,
    "server.headless": True,
    "global.developmentMode": False,
    "client.toolbarMode": "viewer",  # no developer menu, no "Clear cache", no Deploy button
    "client.showErrorDetails": "none",
    "browser.gatherUsageStats": False,
    "theme.primaryColor": "#2f6fb2",
    "theme.base": "light",
}
DEV_OPTIONS: dict[str, object] = {"client.toolbarMode": "developer", "client.showErrorDetails": "full"}


def apply_server_options(dev: bool) -> None:
    """Set :data:`SERVER_OPTIONS` (and :data:`DEV_OPTIONS` for ``winnow ui --dev``)."""
    for name, value in {**SERVER_OPTIONS, **(DEV_OPTIONS if dev else {})}.items():
        config.set_option(name, value)
