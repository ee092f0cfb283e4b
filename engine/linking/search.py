"""Candidates of written names: the union of the nearest by meaning (the vector search the caller ran) and the
nearest by spelling (a Neo4j full-text index over names and aliases, queried with fuzzy words), each with its node
distance (:func:`engine.linking.names.node_distance`), read without waiting (``cypher/names_lookup.cypher``).

The candidates of a text ``v`` with ``k`` wanted:

* ``V``: the ``k`` entities nearest by embedding (over names, and over aliases where the KG has any), as the
  caller's vector search found them; ``D`` the largest of their distances (infinite when fewer than ``k`` came
  back: the KG has no more);
* ``S``: the entities the spelling search finds for ``v``: those whose name is ``v`` exactly and, where no
  entity's name is (:func:`lookup_written`), those the full-text index returns (a word within one edit of a word
  of ``v``; at most :data:`FULLTEXT_LIMIT`, by the index's ranking). Their spelling distance is measured over
  their name and aliases; at most ``k`` of those not in ``V`` are kept, nearest by spelling, where
  ``SPELLING_SCALE * spelling <= D``. A text written as the KG writes a name thus costs one indexed look-up beside
  the vector search, as it did before spellings were searched; only a text that is no entity's name asks the
  full-text index (its fuzzy terms cost the index milliseconds, and Neo4j's CPU while the text is embedded).

A candidate's distance is ``min(embedding, SPELLING_SCALE * spelling)`` where the spelling search found it, and its
embedding distance where it did not (an entity that shares no word, within one edit, with the text: the spelling
term of such names, doubled, is above their embedding distance anyway, measured in :mod:`engine.linking.names`).
For one of ``S`` that is not in ``V`` the embedding distance is at least ``D`` (it was not among the ``k``
nearest), so the spelling term is the minimum: no vector needs fetching. The spelling search needs no vector
either, so it runs in Neo4j while the text is embedded and searched in Milvus.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine._errors import StoreError
from engine.linking.names import (NameMatch, SPELLING_SCALE, fold_name, fulltext_query, how_matched, same_name,
                                  spelling_distances)
from engine.stores.graph import name_key

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import CypherReader

__all__ = ["FULLTEXT_INDEX", "FULLTEXT_LIMIT", "EntityNames", "best_matches", "lookup_names", "lookup_written",
           "name_candidates"]

#: the full-text index over entity names and aliases (created with the KG's schema, ``cypher/schema.cypher``)
FULLTEXT_INDEX = "isoragentity_names"
#: entities the full-text index returns per text, before they are ranked by spelling distance
FULLTEXT_LIMIT = 32


@dataclass(frozen=True)
class EntityNames:
    """What an entity is called: its display name, source key and aliases."""

    eid: int
    name: str
    key: str
    aliases: tuple[str, ...] = ()

    def texts(self) -> list[str]:
        """Its name, then its aliases (the key when it has no name)."""
        return [self.name or self.key, *self.aliases]


def lookup_names(graph: CypherReader, fulltext: Sequence[str], exact: Sequence[str], *,
                 limit: int = FULLTEXT_LIMIT) -> tuple[list[list[int]], list[list[int]], dict[int, EntityNames]]:
    """One read: the entities the full-text index finds for each text of ``fulltext`` (its words with fuzzy
    edits), the entities named exactly as each text of ``exact``, and the names and aliases of those. Returns (per
    fulltext text the eids found, per exact name the eids, eid -> :class:`EntityNames`).

    A KG whose schema predates the full-text index (the next load, or any write, creates it) is read without it:
    exact names only."""
    queries = []
    for i, t in enumerate(fulltext):
        q = fulltext_query(t, graph.kg)
        if q is not None:
            queries.append({"id": i, "text": q})
    n = len(fulltext)
    rows_exact = [{"id": n + i, "name": t, "name_key": name_key(t)} for i, t in enumerate(exact)]
    params = {"exact": rows_exact, "kg": graph.kg, "limit": int(limit)}
    try:
        rows = graph.read_named("names_lookup", queries=queries, **params)
    except StoreError as e:
        if not queries or FULLTEXT_INDEX not in str(e):
            raise
        rows = graph.read_named("names_lookup", queries=[], **params)
    by_text: list[list[int]] = [[] for _ in fulltext]
    by_name: list[list[int]] = [[] for _ in exact]
    names: dict[int, EntityNames] = {}
    for r in rows:
        eid = int(r["eid"])
        if eid not in names:
            names[eid] = EntityNames(eid, r["name"] or "", r["key"] or "", tuple(r["aliases"] or ()))
        i = int(r["id"])
        got = by_text[i] if i < n else by_name[i - n]
        if eid not in got:
            got.append(eid)
    return by_text, by_name, names


def lookup_written(graph: CypherReader, texts: Sequence[str], *, limit: int = FULLTEXT_LIMIT,
                   exact: Callable[[Sequence[str]], Sequence[Mapping[str, Any]]] | None = None
                   ) -> tuple[list[list[int]], list[list[int]], dict[int, EntityNames]]:
    """The spelling search of written names (a pattern's named nodes): each text looked up as a name exactly, then
    the texts that are no entity's name looked up in the full-text index (a second read, only for those). Returns
    what :func:`lookup_names` returns with ``texts`` as both lists (no full-text hits for a text found exactly).

    A text that the index finds written as an entity's name or alias but for case, width, diacritics, punctuation or
    a leading article (:func:`engine.linking.names.same_name`: "street mobster", "Amelie", "Matrix") counts as
    found by name: those entities are its spelling candidates and the index's other hits are dropped, as they are
    for a name written exactly. (Kept, near spellings of other names entered the match with a spelling distance,
    where the exact name gives them none, and could win it: "street mobster" matched "The Monster".)

    ``exact``: where the names are looked up exactly instead of Neo4j (the graph read replica's
    ``entities_by_name``: rows ``{name, eid, key}`` of every entity with one of these names); an entity found so is
    described by its name and key alone (found by its name, its aliases change nothing of its distance, 0)."""
    if exact is None:
        _, by_name, names = lookup_names(graph, [], texts, limit=limit)
    else:
        at = {t: i for i, t in enumerate(texts)}
        by_name = [[] for _ in texts]
        names = {}
        for r in exact(texts):
            eid = int(r["eid"])
            names.setdefault(eid, EntityNames(eid, r["name"] or "", r["key"] or ""))
            if r["name"] in at and eid not in by_name[at[r["name"]]]:
                by_name[at[r["name"]]].append(eid)
    rest = [i for i, hits in enumerate(by_name) if not hits]
    by_text: list[list[int]] = [[] for _ in texts]
    if rest:
        fuzzy, _, more = lookup_names(graph, [texts[i] for i in rest], [], limit=limit)
        for i, hits in zip(rest, fuzzy):
            same = [e for e in hits if any(same_name(texts[i], t) for t in more[e].texts())]
            # names folded alike go before those with an article more or less ("outlaw": "Outlaw", not "The Outlaw")
            folded = [e for e in same if any(fold_name(texts[i]) == fold_name(t) for t in more[e].texts())]
            same = folded or same
            if same:
                by_name[i] = same
            else:
                by_text[i] = hits
        names.update((e, n) for e, n in more.items() if e not in names)
    return by_text, by_name, names


def best_matches(text: str, ents: Sequence[EntityNames]) -> list[tuple[float, str, bool]]:
    """Per entity: (spelling distance, the name or alias it is nearest, whether that is an alias)."""
    flat: list[str] = []
    owner: list[tuple[int, bool]] = []
    for j, e in enumerate(ents):
        for a, t in enumerate(e.texts()):
            flat.append(t)
            owner.append((j, a > 0))
    d = spelling_distances([text], flat)[0] if flat else []
    best: list[tuple[float, str, bool]] = [(1.0, e.name, False) for e in ents]
    for x, (j, alias), t in zip(d, owner, flat):
        # the name wins ties with an alias; an exact text wins ties among equals
        cur = best[j]
        if float(x) < cur[0] or (float(x) == cur[0] and t == text and cur[1] != text):
            best[j] = (float(x), t, alias)
    return best


def name_candidates(texts: Sequence[str], vector_hits: Sequence[Mapping[int, float]], k: int,
                    found: Sequence[Sequence[int]], names: Mapping[int, EntityNames]) -> list[dict[int, NameMatch]]:
    """For each text: eid -> :class:`NameMatch` of its candidates (module docstring). ``vector_hits[i]``: the
    ``k`` nearest by embedding of ``texts[i]`` (eid -> distance); ``found[i]``: the eids the spelling search found
    for it, whose names and aliases ``names`` holds (:func:`lookup_names`; it may hold other entities' names too,
    which are shown, not measured)."""
    out: list[dict[int, NameMatch]] = []
    for text, vec, by_spelling in zip(texts, vector_hits, found):
        bound = max(vec.values()) if len(vec) >= k and vec else math.inf
        spelt = [e for e in dict.fromkeys(by_spelling) if e in names]
        best = dict(zip(spelt, best_matches(text, [names[e] for e in spelt])))
        cands: dict[int, NameMatch] = {}
        for e, emb in vec.items():  # by meaning; by spelling too where the search found it
            ent = names.get(e)
            shown = (ent.name or ent.key) if ent is not None else ""
            if e in best:
                sp, matched, alias = best[e]
                cands[e] = NameMatch(e, shown, matched, alias, how_matched(text, matched, sp, emb),
                                     min(float(emb), SPELLING_SCALE * sp), sp, float(emb))
            else:
                cands[e] = NameMatch(e, shown, shown, False, "exact" if shown == text else "meaning", float(emb),
                                     None, float(emb))
        spelled = sorted((best[e][0], e) for e in spelt if e not in vec and SPELLING_SCALE * best[e][0] <= bound)
        for sp, e in spelled[:k]:  # by spelling alone: farther by meaning than every one above
            ent = names[e]
            _, matched, alias = best[e]
            cands[e] = NameMatch(e, ent.name or ent.key, matched, alias, how_matched(text, matched, sp, None),
                                 SPELLING_SCALE * sp, sp, None)
        out.append(cands)
    return out
