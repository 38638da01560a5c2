"""Reading and writing files: datasets in, ranked query lists and labelled datasets out.

Everything is validated before anything is written; a bad file raises
:class:`~app.io.errors.DataFileError` with a one-line message naming file, row and column.
"""

from app.io.errors import DataFileError
from app.io.image_folder import ImageFolder, read_image_dataset, read_image_folder
from app.io.limits import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_UPLOAD_MB,
    MAX_DECOMPRESSED_VARIABLE,
    MAX_UPLOAD_VARIABLE,
    check_upload_size,
    max_decompressed_bytes,
    max_upload_bytes,
)
from app.io.readers import (
    AUTO_COLUMNS,
    CONTENT_ROLES,
    SUPPORTED_EXTENSIONS,
    LoadedDataset,
    parse_candidate_cell,
    read_dataset,
    sort_label_names,
)
from app.io.readers.answers import ANSWER_EXTENSIONS, AnswerRow, read_answers
from app.io.readers.votes import (
    VOTE_EXTENSIONS,
    MatchedVotes,
    Votes,
    apply_votes,
    match_votes,
    read_votes,
    vote_label_names,
)
from app.io.writers import (
    CONTENT_COLUMNS,
    EXPORT_ONLY_COLUMNS,
    LABELLED_COLUMNS,
    RANKED_COLUMNS,
    TABLE_EXTENSIONS,
    labelled_dataset_table,
    ranked_query_table,
    write_table,
)

__all__ = [
    "DataFileError",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_MAX_UPLOAD_MB",
    "MAX_DECOMPRESSED_VARIABLE",
    "MAX_UPLOAD_VARIABLE",
    "check_upload_size",
    "max_decompressed_bytes",
    "max_upload_bytes",
    "LoadedDataset",
    "AUTO_COLUMNS",
    "CONTENT_ROLES",
    "ImageFolder",
    "read_image_folder",
    "read_image_dataset",
    "SUPPORTED_EXTENSIONS",
    "read_dataset",
    "parse_candidate_cell",
    "sort_label_names",
    "RANKED_COLUMNS",
    "LABELLED_COLUMNS",
    "EXPORT_ONLY_COLUMNS",
    "CONTENT_COLUMNS",
    "TABLE_EXTENSIONS",
    "ranked_query_table",
    "labelled_dataset_table",
    "write_table",
    "ANSWER_EXTENSIONS",
    "AnswerRow",
    "read_answers",
    "VOTE_EXTENSIONS",
    "Votes",
    "MatchedVotes",
    "read_votes",
    "vote_label_names",
    "match_votes",
    "apply_votes",
]
