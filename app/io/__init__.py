"""Reading and writing files: datasets in, ranked query lists and labelled datasets out.

Everything is validated before anything is written; a bad file raises
:class:`~app.io.errors.DataFileError` with a one-line message naming file, row and column.

The public names are listed in ``__init__.pyi`` and loaded on first use with ``lazy_loader``
(as :mod:`app.service`): the table readers and writers pull in pandas and pyarrow (0.3-0.5 s),
which reading a file of answers (``winnow answer --from``) does not need.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
