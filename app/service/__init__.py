"""winnow's service layer: a labelling session at work, for the CLI and the browser app.

``app/cli/`` and the pages in ``app/ui/`` call these functions and add no logic of their
own; this layer reads and writes through :mod:`app.store`, reads files through :mod:`app.io`
and computes with public :mod:`engine` names only.

Modules
-------
``workbench``  :class:`Workbench`: the one facade over a session at work, made of
               ``ranking_state`` (targets, graph, ranker, NL/APL), ``lots`` (the lots read
               from the answers), ``serving`` (the served order, audits and suspects in their
               slots), ``explanations``, ``model_view`` (DST-PLL rejects), ``answers``
               (stale-answer checks, the write), ``item_content`` and ``session_tables``
               (export tables)
``sessions``   import a file, find / list sessions, record an answer by item id
``uploads``    files uploaded in the browser (data file, media, zip archive) as a dataset, and
               the Sessions page's "Create session"
``progress``   replay a session's events and measure it after each one
``exports``    the ranked list, labelled data, answer log and votes as tables and files
``votes``      crowd votes: items read with their votes, an item's vote summary, the votes export
``hotkeys``    a session's keyboard keys as editable text, and changing them (admins)
``delivery``   the labelled dataset handed back: final labels, their sources, the stated error;
               a session's label settings
``completion`` when a session's work is done (one definition), and what more answers would buy
``graphs``     a dataset's k-NN graph, built once, persisted and loaded by content hash
``tasks``      progress reports of heavy work, and background builds shared per process
``auth``       accounts, sign-in and the single-user / team mode decision
``team``       the item reserved for each annotator, conflicts in detail, progress, agreement
``suspects``   every item's suspicion that its set misses the true label (most suspect
               first), the items a test flags, and the labels the neighbours suggest instead

The public names are listed in ``__init__.pyi`` (what type checkers and IDEs read) and loaded
on first use with ``lazy_loader`` (Scientific Python SPEC 1): the workbench pulls in pandas,
scikit-learn and OR-Tools (seconds of imports), which `winnow --help` and the store-only
commands should not pay for.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
