"""Claims for verification jobs: a small movie KG, claims with the label a file gives and the label the rule gives,
malformed rows, and a claims file mixing them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MOVIES = [
    ("Heat", "directed_by", "Michael Mann"),
    ("Heat", "starred_actors", "Al Pacino"),
    ("Heat", "release_year", "1995"),
    ("Collateral", "directed_by", "Michael Mann"),
    ("Collateral", "starred_actors", "Tom Cruise"),
    ("Alien", "directed_by", "Ridley Scott"),
    ("Alien", "release_year", "1979"),
    ("Gladiator", "starred_actors", "Russell Crowe"),
    ("Top Gun", "starred_actors", "Tom Cruise"),
]

# (claim triple, gold label as a file would give it, the label the rule gives)
CLAIMS = [
    *[((h, r, t), "SUPPORTED", "SUPPORTED") for h, r, t in MOVIES],
    (("Heat", "directed_by", "Ridley Scott"), "REFUTED", "REFUTED"),             # swapped tail
    (("Alien", "directed_by", "Michael Mann"), "refutes", "REFUTED"),
    (("Alien", "release_year", "1995"), False, "REFUTED"),
    (("Heat", "release_year", "Michael Mann"), "False", "REFUTED"),            # wrong relation
    (("Top Gun", "directed_by", "Tom Cruise"), "REFUTED", "REFUTED"),
    (("Heat", "directed_by", "Steven Spielberg"), "NOT ENOUGH INFO", "NOT_ENOUGH_INFO"),  # unknown entity
    (("Jaws", "directed_by", "Steven Spielberg"), "nei", "NOT_ENOUGH_INFO"),
    (("Heat", "starred_actors", "Al Pacino"), True, "SUPPORTED"),
]


def claim_rows(copies: int = 1) -> list[dict[str, Any]]:
    rows = []
    for c in range(copies):
        for i, ((h, r, t), gold, _) in enumerate(CLAIMS):
            rows.append({"id": f"c{c}-{i}", "claim": f"{h} {r.replace('_', ' ')} {t}.", "label": gold,
                         "pattern": {"triples": [[h, r, t]]}})
    return rows


MALFORMED = [
    "{not json",
    json.dumps({"claim": "no id here"}),
    json.dumps({"id": "c0-0", "claim": "a duplicate id"}),
    json.dumps({"id": "m1", "claim": "a bad label", "label": "maybe"}),
    json.dumps({"id": "m2", "claim": "a bad pattern", "pattern": {"triples": [["only", "two"]]}}),
    json.dumps({"id": "m3", "claim": "   "}),
    json.dumps(["a", "list"]),
]


def write_claims(path: Path, copies: int = 1, malformed: bool = True) -> Path:
    lines = [json.dumps(r) for r in claim_rows(copies)]
    if malformed:
        # spread the bad rows among the good ones; a blank line is not a row
        for j, bad in enumerate(MALFORMED):
            lines.insert(3 + 2 * j, bad)
        lines.insert(1, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
