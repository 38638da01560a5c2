"""Build winnow's text sample: 300 short news snippets on 5 topics with partial labels.

Run ``python sample_data/make_text_sample.py`` from the repository root; it rewrites
``sample_data/texts.csv`` (columns ``id,text,candidates,true_label``). Nothing is downloaded:
the snippets are written by this script from the topic vocabularies below, with a seeded
``numpy.random.default_rng``, so the output is the same on every machine.

How a snippet is written (documented in ``sample_data/README.md``)
------------------------------------------------------------------
1. Each of the 5 topics gets ``N_DOCS / 5`` snippets, then the order is shuffled.
2. A snippet has 2 or 3 sentences. The first is about the snippet's topic; each later one is
   too, except with probability ``OFF_TOPIC`` it is about one of the topic's confusable
   neighbours (``CONFUSABLE``): a sports story that mentions an injury, a travel story about
   prices.
3. A sentence is one of the ``TEMPLATES`` filled with words of its topic.

How a candidate set is made
---------------------------
With probability ``P_PARTIAL`` the snippet is partial and gets 1 or 2 false labels (equally
likely), drawn without replacement from the other topics with weight ``MENTIONED_WEIGHT`` for a
topic one of its sentences is about, ``CONFUSABLE_WEIGHT`` for a confusable topic and 1
otherwise: an annotator hesitates between what the text talks about.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20240613
N_DOCS = 300
OFF_TOPIC = 0.25
P_PARTIAL = 0.6
FALSE_LABEL_COUNTS = (1, 2)
MENTIONED_WEIGHT = 8.0
CONFUSABLE_WEIGHT = 3.0

OUT_PATH = Path(__file__).resolve().parent / "texts.csv"

TOPICS: dict[str, dict[str, list[str]]] = {
    "sport": {
        "who": [
            "the coach",
            "the striker",
            "the goalkeeper",
            "the captain",
            "the referee",
            "the young sprinter",
            "the home team",
            "the visiting side",
            "the club",
            "the champion",
        ],
        "did": ["won", "lost", "drew", "scored in", "dominated", "trained for", "qualified for", "was sent off in"],
        "what": [
            "the final",
            "the derby",
            "the league match",
            "the cup tie",
            "the relay",
            "the semi-final",
            "the second half",
            "the penalty shootout",
            "the marathon",
            "the season opener",
        ],
        "how": [
            "after a late goal",
            "in front of a full stadium",
            "despite a muddy pitch",
            "with ten players",
            "in extra time",
            "on the away ground",
        ],
        "thing": ["tactics", "league table", "transfer window", "training camp", "lineup", "stadium"],
        "quality": ["decisive", "disappointing", "thrilling", "defensive", "physical"],
    },
    "cooking": {
        "who": [
            "the chef",
            "the baker",
            "our food writer",
            "the pastry cook",
            "the home cook",
            "the kitchen team",
            "the restaurant",
            "the cookery school",
        ],
        "did": ["roasted", "baked", "simmered", "seasoned", "grilled", "whisked", "braised", "plated"],
        "what": [
            "the lamb shoulder",
            "a sourdough loaf",
            "the tomato sauce",
            "a lemon tart",
            "the vegetables",
            "a mushroom risotto",
            "the chicken stock",
            "a chocolate cake",
            "the pastry dough",
            "a spicy curry",
        ],
        "how": [
            "with fresh herbs",
            "over a low flame",
            "in a cast iron pan",
            "with a pinch of salt",
            "for two slow hours",
            "with garlic and butter",
        ],
        "thing": ["recipe", "oven", "flavour", "ingredients", "kitchen", "menu"],
        "quality": ["crisp", "tender", "savoury", "creamy", "aromatic"],
    },
    "finance": {
        "who": [
            "the central bank",
            "investors",
            "the analyst",
            "the fund manager",
            "the treasury",
            "shareholders",
            "the lender",
            "the stock exchange",
            "traders",
        ],
        "did": ["raised", "cut", "sold", "bought", "reported", "hedged", "priced", "downgraded"],
        "what": [
            "interest rates",
            "the quarterly earnings",
            "government bonds",
            "the share price",
            "the dividend",
            "the mortgage rate",
            "the bond yield",
            "the currency",
            "the annual budget",
            "the loan book",
        ],
        "how": [
            "as inflation eased",
            "after a weak quarter",
            "ahead of the results",
            "amid market volatility",
            "on heavy trading volume",
            "before the markets closed",
        ],
        "thing": ["portfolio", "inflation", "equity market", "balance sheet", "credit rating", "profit"],
        "quality": ["bearish", "bullish", "volatile", "profitable", "cautious"],
    },
    "health": {
        "who": [
            "the doctor",
            "the nurse",
            "patients",
            "the hospital",
            "researchers",
            "the clinic",
            "the surgeon",
            "health officials",
            "the physiotherapist",
        ],
        "did": ["treated", "diagnosed", "vaccinated", "monitored", "prescribed", "studied", "screened", "operated on"],
        "what": [
            "the infection",
            "a knee injury",
            "high blood pressure",
            "the flu outbreak",
            "chronic back pain",
            "the diabetes cases",
            "a sleep disorder",
            "the allergy symptoms",
            "the heart condition",
            "a broken wrist",
        ],
        "how": [
            "with a new medicine",
            "after a long recovery",
            "during the clinical trial",
            "in the emergency ward",
            "with regular exercise",
            "following a healthy diet",
        ],
        "thing": ["therapy", "symptoms", "vaccine", "nutrition", "recovery", "diagnosis"],
        "quality": ["chronic", "mild", "severe", "contagious", "healthy"],
    },
    "travel": {
        "who": [
            "the tourists",
            "the airline",
            "the tour guide",
            "backpackers",
            "the hotel",
            "the pilot",
            "the ferry company",
            "holidaymakers",
            "the travel agent",
        ],
        "did": ["booked", "visited", "explored", "cancelled", "delayed", "reached", "crossed", "recommended"],
        "what": [
            "the island resort",
            "the mountain village",
            "a night train",
            "the old harbour",
            "the museum tour",
            "a budget flight",
            "the coastal road",
            "the national park",
            "a beach hostel",
            "the border crossing",
        ],
        "how": [
            "with a rented car",
            "during the peak season",
            "after a long flight",
            "on a rainy weekend",
            "with a local guide",
            "by overnight ferry",
        ],
        "thing": ["itinerary", "passport", "luggage", "destination", "sightseeing", "journey"],
        "quality": ["scenic", "crowded", "remote", "relaxing", "affordable"],
    },
}

# Topics a reader easily mixes up, in both directions.
_PAIRS = [
    ("sport", "health"),
    ("cooking", "health"),
    ("finance", "travel"),
    ("cooking", "travel"),
    ("finance", "sport"),
]
CONFUSABLE: dict[str, tuple[str, ...]] = {
    topic: tuple(sorted({b for a, b in _PAIRS if a == topic} | {a for a, b in _PAIRS if b == topic}))
    for topic in TOPICS
}

TEMPLATES = [
    "{who} {did} {what} {how}.",
    "{Who} {did} {what}, a {quality} result for the {thing}.",
    "Reports say {who} {did} {what} {how}.",
    "The {thing} looked {quality} after {who} {did} {what}.",
    "{How}, {who} {did} {what}.",
    "Many asked why {who} {did} {what}.",
]


def _pick(words: list[str], rng: np.random.Generator) -> str:
    return words[int(rng.integers(len(words)))]


def sentence(topic: str, rng: np.random.Generator) -> str:
    """One sentence about ``topic``: a template filled with the topic's words."""
    vocab = TOPICS[topic]
    template = _pick(TEMPLATES, rng)
    words = {slot: _pick(vocab[slot], rng) for slot in ("who", "did", "what", "how", "thing", "quality")}
    text = template.format(
        who=words["who"],
        Who=words["who"][0].upper() + words["who"][1:],
        did=words["did"],
        what=words["what"],
        how=words["how"],
        How=words["how"][0].upper() + words["how"][1:],
        thing=words["thing"],
        quality=words["quality"],
    )
    return text[0].upper() + text[1:]


def candidate_set(topic: str, mentioned: set[str], rng: np.random.Generator) -> list[str]:
    """The true topic plus, for a partial item, 1 or 2 false topics (see the module docstring)."""
    labels = [topic]
    if rng.random() < P_PARTIAL:
        others = [t for t in TOPICS if t != topic]
        weights = np.array(
            [
                MENTIONED_WEIGHT if t in mentioned else CONFUSABLE_WEIGHT if t in CONFUSABLE[topic] else 1.0
                for t in others
            ]
        )
        n_false = int(rng.choice(FALSE_LABEL_COUNTS))
        false = rng.choice(len(others), size=n_false, replace=False, p=weights / weights.sum())
        labels += [others[int(j)] for j in false]
    order = list(TOPICS)
    return sorted(labels, key=order.index)


def build(n_docs: int = N_DOCS, *, off_topic: float = OFF_TOPIC, seed: int = SEED) -> pd.DataFrame:
    """The sample as a table: id, text, candidates, true_label.

    ``n_docs`` and ``off_topic`` let the benchmark build larger or harder variants with the same
    generator; the committed file uses the defaults.
    """
    rng = np.random.default_rng(seed)
    topics = np.repeat(np.array(list(TOPICS)), int(np.ceil(n_docs / len(TOPICS))))[:n_docs]
    rng.shuffle(topics)
    rows = []
    for i, topic in enumerate(topics):
        topic = str(topic)
        about = [topic] + [
            _pick(list(CONFUSABLE[topic]), rng) if rng.random() < off_topic else topic
            for _ in range(int(rng.integers(1, 3)))
        ]
        text = " ".join(sentence(t, rng) for t in about)
        rows.append(
            {
                "id": f"t{i + 1:03d}",
                "text": text,
                "candidates": "|".join(candidate_set(topic, set(about) - {topic}, rng)),
                "true_label": topic,
            }
        )
    return pd.DataFrame(rows, columns=["id", "text", "candidates", "true_label"])


def main() -> None:
    build().to_csv(OUT_PATH, index=False, lineterminator="\n")
    print(f"wrote {OUT_PATH.name}: {N_DOCS} snippets")


if __name__ == "__main__":
    main()
