"""winnow's engine: k-NN vote ambiguity, query scores and partial-label learners.

Pure numpy / scipy / scikit-learn / OR-Tools; no files, databases or user interface.

The public names are listed in ``__init__.pyi`` (what type checkers and IDEs read) and loaded
on first use with ``lazy_loader`` (Scientific Python SPEC 1): the learners load scikit-learn
(about a second), which `winnow --help` and the store-only commands should not pay for.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
