"""Build winnow's crowd sample: 80 songs, each voted on by a few of 10 crowd annotators.

Run ``python sample_data/make_crowd_sample.py`` from the repository root; it rewrites
``sample_data/crowd_items.csv`` (``id,text,tempo,energy,acoustic,distortion``: a short
description shown to the expert and four numeric features the k-NN measures) and
``sample_data/crowd_votes.csv`` (``id,annotator,label,time``: one row per vote). Nothing is
downloaded; a seeded ``numpy.random.default_rng`` makes the same files on every machine.

How it is made
--------------
1. Each song gets a genre (``GENRES``, equally likely) and features drawn around its genre's
   centre (``CENTRES``, standard deviation ``SPREAD``), rounded to 2 decimals.
2. Each of the ``N_ANNOTATORS`` annotators has an accuracy drawn uniformly in ``ACCURACY``.
3. Every song but the last ``N_UNVOTED`` gets 3 to 5 votes from distinct annotators. A vote is
   the true genre with the annotator's accuracy, else a genre that sounds alike
   (``CONFUSABLE``) with probability ``P_CONFUSABLE``, else any other genre. So the union of a
   song's votes sometimes misses its genre, as with a real crowd.
4. Vote times are spread over one afternoon (UTC).

The true genres are not written: winnow is to find them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20261125
N_SONGS = 80
N_UNVOTED = 4
N_ANNOTATORS = 10
ACCURACY = (0.55, 0.9)
P_CONFUSABLE = 0.8
SPREAD = 0.12
GENRES = ("blues", "jazz", "pop", "rock")
#: tempo, energy, acoustic, distortion (scaled to about 0..1)
CENTRES = {
    "blues": (0.35, 0.45, 0.6, 0.3),
    "jazz": (0.5, 0.4, 0.75, 0.1),
    "pop": (0.65, 0.7, 0.3, 0.15),
    "rock": (0.7, 0.85, 0.2, 0.7),
}
CONFUSABLE = {"blues": ("jazz", "rock"), "jazz": ("blues",), "pop": ("rock",), "rock": ("pop", "blues")}
WORDS = {
    "blues": ["slide guitar", "a twelve-bar shuffle", "a harmonica solo", "a slow lament"],
    "jazz": ["a walking bass", "brushed drums", "a muted trumpet", "swinging piano chords"],
    "pop": ["a catchy chorus", "bright synths", "a dance beat", "layered vocals"],
    "rock": ["distorted guitars", "pounding drums", "a shouted refrain", "a power-chord riff"],
}
START = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)

HERE = Path(__file__).resolve().parent
ITEMS_PATH = HERE / "crowd_items.csv"
VOTES_PATH = HERE / "crowd_votes.csv"


def build() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The items and the votes tables, deterministic for :data:`SEED`."""
    rng = np.random.default_rng(SEED)
    genres = rng.choice(GENRES, size=N_SONGS)
    items = []
    for i, genre in enumerate(genres):
        features = np.clip(rng.normal(CENTRES[genre], SPREAD), 0, 1).round(2)
        # The description mixes in a word of a genre that sounds alike now and then.
        other = CONFUSABLE[genre][rng.integers(len(CONFUSABLE[genre]))]
        words = rng.choice(WORDS[genre], size=2, replace=False).tolist()
        if rng.random() < 0.3:
            words[1] = WORDS[other][rng.integers(len(WORDS[other]))]
        items.append(
            {
                "id": f"song{i:03d}",
                "text": f"A track with {words[0]} and {words[1]}.",
                "tempo": features[0],
                "energy": features[1],
                "acoustic": features[2],
                "distortion": features[3],
            }
        )
    accuracy = rng.uniform(*ACCURACY, size=N_ANNOTATORS)
    votes = []
    for i, genre in enumerate(genres[: N_SONGS - N_UNVOTED]):
        voters = rng.choice(N_ANNOTATORS, size=int(rng.integers(3, 6)), replace=False)
        for a in voters:
            if rng.random() < accuracy[a]:
                label = genre
            elif rng.random() < P_CONFUSABLE:
                label = CONFUSABLE[genre][rng.integers(len(CONFUSABLE[genre]))]
            else:
                others = [g for g in GENRES if g != genre]
                label = others[rng.integers(len(others))]
            when = START + timedelta(minutes=int(rng.integers(0, 240)))
            votes.append(
                {
                    "id": f"song{i:03d}",
                    "annotator": f"crowd{int(a):02d}",
                    "label": str(label),
                    "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            )
    return pd.DataFrame(items), pd.DataFrame(votes)


if __name__ == "__main__":
    items_table, votes_table = build()
    items_table.to_csv(ITEMS_PATH, index=False, lineterminator="\n")
    votes_table.to_csv(VOTES_PATH, index=False, lineterminator="\n")
    print(f"wrote {len(items_table)} songs to {ITEMS_PATH.name} and {len(votes_table)} votes to {VOTES_PATH.name}")
