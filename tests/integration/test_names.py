"""Names as people write them, on the real servers: misspelled, re-cased and aliased names reach their entity in
patterns (the candidate stage, exact against the oracle) and in text (the one linker); aliases load, embed and
resolve; vector searches past Milvus' limit are split."""

from __future__ import annotations

import random
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine._config import MatchSettings
from engine.linking.names import SPELLING_SCALE, spelling_distance
from engine.linking.text import candidates
from engine.retrieval.matcher import Matcher
from engine.retrieval.oracle import oracle_matches
from engine.retrieval.pattern import Pattern

from helpers.kg import unique_kg

TTL = """@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
@prefix ex: <http://ex.org/> .
@prefix r: <http://ex.org/rel/> .
ex:heat rdfs:label "Heat"@en, "Hitze"@de ; r:directed_by ex:mann ; r:starred_actors ex:pacino ;
    r:release_year "1995" .
ex:collateral rdfs:label "Collateral"@en ; r:directed_by ex:mann ; r:release_year "2004" .
ex:jaws rdfs:label "Jaws"@en ; skos:altLabel "Les Dents de la mer"@fr ; r:directed_by ex:spielberg ;
    r:release_year "1975" .
ex:rocky rdfs:label "Rocky"@en ; r:directed_by ex:avildsen ; r:release_year "1976" .
ex:amelie rdfs:label "Amélie"@en ; r:directed_by ex:jeunet .
ex:matrix rdfs:label "The Matrix"@en ; r:directed_by ex:wachowski .
ex:mann rdfs:label "Michael Mann"@en ; skos:altLabel "Mann" .
ex:pacino rdfs:label "Al Pacino"@en .
ex:spielberg rdfs:label "Steven Spielberg"@en ; skos:altLabel "The Beard" .
ex:avildsen rdfs:label "John G. Avildsen"@en .
ex:jeunet rdfs:label "Jean-Pierre Jeunet"@en .
ex:wachowski rdfs:label "Lana Wachowski"@en .
ex:ibm rdfs:label "International Business Machines"@en ; skos:altLabel "IBM", "Big Blue" ;
    r:founded_in "1911" .
ex:thomas rdfs:label "Joe Thomas"@en ; r:starred_actors_of ex:rocky .
ex:rob rdfs:label "Rob Thomas"@en ; r:directed_by_of ex:collateral .
"""


@pytest.fixture(scope="module")
def names_kg(neo4j_uri: str, milvus_uri: str, embedder: Any, tmp_path_factory: Any) -> Any:
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine

    path = tmp_path_factory.mktemp("names") / "kg.ttl"
    path.write_text(TTL, encoding="utf-8")
    eng = Engine(EngineConfig(kg=unique_kg("names"), neo4j=Neo4jSettings(uri=neo4j_uri),
                              milvus=MilvusSettings(uri=milvus_uri)), embedder=embedder)
    summary = eng.load(str(path), progress=False)
    assert summary.embedded_aliases == 6  # Hitze, Les Dents de la mer, Mann, The Beard, IBM, Big Blue
    yield eng
    eng.drop()
    eng.close()


def answer(eng: Any, name: str, relation: str = "directed_by") -> Any:
    return eng.retrieve(Pattern.from_triples([(name, relation, "UNKNOWN person 1")]), k=1)


@pytest.mark.parametrize("written, kg_name, how", [
    ("Heat", "Heat", "exact"),
    ("heat", "Heat", "normalized"),
    ("Haet", "Heat", "spelling"),
    ("Colateral", "Collateral", "spelling"),
    ("Amelie", "Amélie", "normalized"),
    ("Matrix", "The Matrix", "spelling"),
])
def test_a_misspelled_or_recased_name_reaches_its_entity(names_kg: Any, written: str, kg_name: str, how: str) -> None:
    res = answer(names_kg, written)
    m = res.names[written]
    assert m.name == kg_name and m.how == how and not m.alias, m
    assert res.subgraphs and res.subgraphs[0].mapping[written].name == kg_name
    # a name that is no entity's (case aside) is still reported, with the entity the match used nearest
    if written.casefold() == kg_name.casefold():
        assert written not in res.unmatched
    else:
        assert res.unmatched[written][0][0] == kg_name
    assert res.to_dict()["names"][written]["name"] == kg_name


@pytest.mark.parametrize("alias, kg_name", [("Les Dents de la mer", "Jaws"), ("Mann", "Michael Mann"),
                                           ("Hitze", "Heat"), ("the beard", "Steven Spielberg")])
def test_an_alias_reaches_its_entity_and_the_result_says_so(names_kg: Any, alias: str, kg_name: str) -> None:
    rel = "directed_by"
    pat = (Pattern.from_triples([("UNKNOWN film 1", rel, alias)]) if kg_name in ("Michael Mann", "Steven Spielberg")
           else Pattern.from_triples([(alias, rel, "UNKNOWN person 1")]))
    res = names_kg.retrieve(pat, k=1)
    m = res.names[alias]
    assert m.name == kg_name and m.alias and m.matched.casefold() == alias.casefold(), m
    assert alias not in res.unmatched  # an alias is a name of the entity


def test_alias_vectors_are_searched_with_the_names(names_kg: Any, embedder: Any) -> None:
    # "Big Blue company" shares no exact word sequence with a name: its nearest by meaning is the alias's vector
    vecs = embedder.encode(["Big Blue"])
    hits = names_kg.vectors.search_aliases(vecs, 3)[0]
    ibm = names_kg.graph.entities_by_name(["International Business Machines"])[0]["eid"]
    assert hits[0][0] == ibm and hits[0][1] == "Big Blue" and hits[0][2] < 1e-3
    near = names_kg.retriever.nearest_by_meaning(vecs, 4)[0]
    assert near[ibm] < 1e-3


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(name="Big Blue", seed=9099, k_node=2)  # "Bgi Blue": IBM's name vector returned, its alias's not
@example(name="Joe Thomas", seed=357, k_node=2)  # "JoeThomas": a space dropped, no word in common
@given(name=st.sampled_from(["Heat", "Collateral", "Michael Mann", "Steven Spielberg", "Jean-Pierre Jeunet",
                             "International Business Machines", "Big Blue", "Joe Thomas"]),
       seed=st.integers(0, 10_000), k_node=st.sampled_from([2, 4, 8]))
def test_every_candidate_distance_is_the_node_distance(names_kg: Any, embedder: Any, name: str, seed: int,
                                                       k_node: int) -> None:
    """node distance = min(Euclidean distance to the name's or an alias's vector, SPELLING_SCALE x spelling distance
    to the name or an alias), for every candidate of a (possibly misspelled) written name."""
    rng = random.Random(seed)
    i = rng.randrange(1, len(name) - 1)
    written = rng.choice([name, name.lower(), name[:i] + name[i + 1:], name[:i] + name[i + 1] + name[i] + name[i + 2:]])
    cands = names_kg.retriever.candidates(Pattern.from_triples([(written, "directed_by", "UNKNOWN 1")]),
                                          MatchSettings(k_node=k_node, k_rel=2), {})
    node = cands.nodes[written]
    assert node and len(node) >= min(k_node, 1)
    rows = names_kg.graph.read("MATCH (n:IsoragEntity) WHERE n.isorag_eid IN $eids RETURN n.isorag_eid AS eid, "
                               "n.isorag_name AS name, coalesce(n.isorag_aliases, []) AS aliases", eids=list(node))
    q = embedder.encode([written])[0]
    euclid_all = {}
    each: dict[int, list[float]] = {}
    for r in rows:
        texts = [r["name"], *r["aliases"]]
        e = np.linalg.norm(embedder.encode(texts) - q[None, :], axis=1)
        euclid_all[r["eid"]] = (float(e.min()), min(spelling_distance(written, t) for t in texts))
        each[r["eid"]] = [float(x) for x in e]
    for eid, d in node.items():
        emb, sp = euclid_all[eid]
        m = cands.names[written][eid]
        assert m.distance == d
        if m.spelling is None:  # not found by the spelling search: its embedding distance (its spelling is far),
            # that of its name's vector or of an alias's, whichever the k-nearest searches returned (an alias
            # vector that was not among the k nearest aliases is not looked at: found by hypothesis, below)
            # (its spelling is not measured: "JoeThomas" shares no word, within one edit, with "Joe Thomas", so
            # the index does not find it, near as it is letter by letter: found by hypothesis, below)
            assert any(d == pytest.approx(x, abs=2e-4) for x in each[eid]) and d >= emb - 2e-4, (written, eid, d, emb)
            continue
        assert m.spelling == pytest.approx(sp, abs=1e-9)
        if m.embedding is None:  # found by spelling alone: farther by meaning than the k nearest
            assert d == pytest.approx(SPELLING_SCALE * sp, abs=1e-9) and emb >= d - 2e-4, (written, eid, d, emb, sp)
        else:
            assert d == pytest.approx(min(emb, SPELLING_SCALE * sp), abs=2e-4), (written, eid, d, emb, sp)


def test_only_a_text_that_is_no_name_asks_the_fulltext_index(names_kg: Any) -> None:
    """A name written as the KG writes it is read exactly (no full-text query: the exact path costs what it did
    before spellings were searched); a typo, another case or an alias goes to the full-text index."""
    from engine.linking.search import lookup_written

    texts = ["Heat", "Haet", "heat", "Big Blue"]
    by_text, by_name, names = lookup_written(names_kg.graph, texts)
    heat = by_name[0]
    assert len(heat) == 1 and names[heat[0]].name == "Heat"
    assert by_text[0] == []  # found exactly: the index is not asked
    assert heat[0] in by_text[1] and by_name[1] == []
    # another case names it: the index was asked, and its entity counts as found by name (no near spellings)
    assert by_name[2] == heat and by_text[2] == []
    # so does an alias written as it is
    assert [names[e].name for e in by_name[3]] == ["International Business Machines"] and by_text[3] == []


@pytest.mark.parametrize("written, kg_name", [("joe thomas", "Joe Thomas"), ("JOE  THOMAS", "Joe Thomas"),
                                              ("Amelie", "Amélie"), ("Matrix", "The Matrix")])
def test_a_name_written_otherwise_has_the_candidates_of_the_name(names_kg: Any, written: str, kg_name: str) -> None:
    """A name written but for case, width, diacritics, punctuation or a leading article has its own entity as its
    only candidate by spelling, as the name written exactly has (at 0, or the article's cost); no near spelling of
    another name joins them ("joe thomas" once gave "Rob Thomas" a spelling distance that "Joe Thomas" does not, as
    "street mobster" did "The Monster" on MetaQA and lost its 3-hop question). Where the embedding is the same (case,
    width, diacritics: MiniLM folds them), so are all the candidates and their distances."""
    from engine.linking.names import ARTICLE_COST, SPELLING_SCALE

    ms = MatchSettings(k_node=6, k_rel=2)
    got = {}
    for text in (written, kg_name):
        pat = Pattern.from_triples([(text, "directed_by", "UNKNOWN 1")])
        got[text] = names_kg.retriever.candidates(pat, ms, {}).names[text]
    [own] = [m for m in got[kg_name].values() if m.name == kg_name]
    assert own.distance == 0.0 and [m.eid for m in got[written].values() if m.spelling is not None] == [own.eid]
    article = kg_name == "The Matrix"
    assert got[written][own.eid].distance == pytest.approx(SPELLING_SCALE * ARTICLE_COST if article else 0.0)
    if not article:
        assert {e: m.distance for e, m in got[written].items()} == {e: m.distance for e, m in got[kg_name].items()}


@pytest.mark.parametrize("written", ["Heat", "Haet", "heat", "Big Blue", "Michael Man"])
def test_the_replica_path_gives_the_same_candidates_and_names(names_kg: Any, written: str) -> None:
    """Names as written are read from the graph read replica where a query has one (no Neo4j read): the candidates,
    their distances and how each name matched are those of the path without it."""
    pat = Pattern.from_triples([(written, "directed_by", "UNKNOWN 1")])
    ms = MatchSettings(k_node=6, k_rel=2)
    names_kg.retrieve(pat, k=1, graph="replica")  # built and fresh
    path = names_kg.retriever.graph_path(MatchSettings(graph="replica"))
    assert path.replica is not None
    with_replica = names_kg.retriever.candidates(pat, ms, {}, path)
    without = names_kg.retriever.candidates(pat, ms, {})
    assert with_replica.nodes == without.nodes
    assert {e: (m.how, m.matched, m.distance) for e, m in with_replica.names[written].items()} == \
        {e: (m.how, m.matched, m.distance) for e, m in without.names[written].items()}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["Heat", "Haet", "heat", "Colateral", "Jaws", "Michael Man", "Big Blue", "Matrix"]),
       rel=st.sampled_from(["directed_by", "release year", "UNKNOWN relation 1"]), k=st.integers(1, 4),
       k_node=st.sampled_from([2, 6]), injective=st.sampled_from([True, "edges", False]))
def test_the_matcher_equals_the_oracle_on_misspelled_names(names_kg: Any, name: str, rel: str, k: int, k_node: int,
                                                            injective: Any) -> None:
    pat = Pattern.from_triples([(name, rel, "UNKNOWN 1"), ("UNKNOWN 1", "directed by", "UNKNOWN 2")])
    ms = MatchSettings(k_node=k_node, k_rel=3, k=k, injective=injective)
    cands = names_kg.retriever.candidates(pat, ms, {})
    got, _ = Matcher(names_kg.graph, ms).top_k(pat, cands, k)
    want = oracle_matches(names_kg.graph, pat, cands, limit=10_000, injective=injective)
    assert [round(m.gsd, 6) for m in got] == [round(m.gsd, 6) for m in want[:k]]


@pytest.mark.parametrize("text, mentions", [
    ("who directed heat", {"Heat"}),                    # lower case
    ("who directed Haet", {"Heat"}),                    # a typo: no exact name stops the search
    ("who directed Les Dents de la mer", {"Jaws"}),     # an alias
    ("which film of 1975 did Steven Spielberg direct", {"1975", "Steven Spielberg"}),  # a year, two entities
    ("Jaws was directed by steven spielberg", {"Jaws", "Steven Spielberg"}),
])
def test_the_linker_finds_every_mention(names_kg: Any, text: str, mentions: set[str]) -> None:
    found = candidates(text, names_kg.graph, vectors=names_kg.vectors, embedder=names_kg.embedder)
    names = {c.name for c in found}
    assert mentions <= names, [(c.mention, c.name, c.how, c.distance) for c in found]
    for c in found:
        if c.name in mentions and c.how == "spelling":
            assert 0 < c.distance <= SPELLING_SCALE * 0.25


def test_the_scorer_links_through_the_same_linker(names_kg: Any) -> None:
    from engine.scoring.service import ScoringService

    class Settings:
        link_threshold, link_max_ngram, max_anchors = 0.6, 5, 3

    svc = ScoringService.__new__(ScoringService)  # only the linking part: no checkpoint needed
    svc.graph, svc.vectors, svc.embedder, svc.settings = (names_kg.graph, names_kg.vectors, names_kg.embedder,
                                                          Settings())
    from engine.scoring.service import STOPWORDS

    svc.stopwords = STOPWORDS
    got = svc.link("who directed haet")
    assert [x.name for x in got] == ["Heat"] and 0 < got[0].distance <= 0.5
    got = svc.link("what did [big blue] make")
    assert [x.name for x in got] == ["International Business Machines"] and got[0].distance == 0.0


def test_a_search_past_milvus_limit_is_split(names_kg: Any) -> None:
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(16_500, names_kg.embedder.dim)).astype("float32")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    res = names_kg.vectors.search("entities", vecs, 1)
    assert len(res) == 16_500 and all(len(r) == 1 for r in res)


def test_an_adopted_graph_keeps_its_aliases_property(make_engine: Callable[..., Any]) -> None:
    eng = make_engine()
    label = "NamesAdopt" + eng.config.kg.replace("_", "")
    eng.graph.write(f"CREATE (:{label} {{code: 'a1', title: 'International Business Machines', "
                    "other: ['IBM', 'Big Blue']})-[:FOUNDED_IN]->(:" + label + " {code: 'y', title: '1911'})")
    try:
        eng.load_existing(label, "code", "title", progress=False, aliases="other")
        res = eng.retrieve(Pattern.from_triples([("ibm", "FOUNDED_IN", "UNKNOWN 1")]), k=1)
        assert res.names["ibm"].name == "International Business Machines" and res.names["ibm"].alias
        assert [a.entity.name for a in res.answers] == ["1911"]
        eng.drop()
        left = eng.graph.read(f"MATCH (n:{label}) RETURN keys(n) AS keys")
        assert all(set(r["keys"]) <= {"code", "title", "other"} for r in left)
    finally:
        eng.graph.write(f"MATCH (n:{label}) DETACH DELETE n")


@pytest.mark.parametrize("text", ["who directed Heat", "which film of 1975 did Steven Spielberg direct",
                                  "Jaws was directed by Steven Spielberg", "who directed heat", "who directed Haet",
                                  "who directed Les Dents de la mer", "what did Big Blue make",
                                  "what did Amelie win"])
def test_the_linker_reads_names_from_the_replica_where_it_can(names_kg: Any, text: str) -> None:
    """With a fresh replica the linker finds a text's exact and folded names in process, the same as Neo4j finds
    them; a text that leaves a name unknown (a typo, an alias, no capitals) is read from Neo4j as without it."""
    from engine.linking.local import local_names
    from engine.linking.text import link_candidates, local_candidates, needs_fulltext

    names_kg.retrieve(Pattern.from_triples([("Heat", "directed_by", "UNKNOWN 1")]), k=1, graph="replica")
    rep = names_kg.retriever.replica_now()
    assert rep is not None
    local = local_names(rep)
    here = link_candidates([text], names_kg.graph, local=local)[0]
    there = link_candidates([text], names_kg.graph)[0]

    def key(c: Any) -> tuple[Any, ...]:
        return c.start, c.end, c.name, c.eids, round(c.distance, 6), c.how

    if needs_fulltext(text, local_candidates(text, local)):
        assert sorted(map(key, here)) == sorted(map(key, there))
    else:
        assert sorted(key(c) for c in here if c.distance == 0) == sorted(key(c) for c in there if c.distance == 0)
    assert needs_fulltext(text, local_candidates(text, local)) is (text in (
        "who directed heat", "who directed Haet", "who directed Les Dents de la mer", "what did Big Blue make"))


@pytest.mark.parametrize("text, mention, name", [
    ("who directed Jas", "Jas", "Jaws"),  # three letters: linked only as a capitalized run no name covers
    ("which film did Jo Thomas star in", "Jo Thomas", "Joe Thomas"),
    ("who directed jas", None, None),  # a three-letter word in lower case is not a name
])
def test_a_capitalized_run_no_name_covers_is_looked_up_alone(names_kg: Any, text: str, mention: str | None,
                                                            name: str | None) -> None:
    """A run of capitalized words that no candidate covers is asked of the full-text index again, alone, and a span
    inside it links by spelling from three letters; the same through Neo4j and through the replica."""
    from engine.linking.local import local_names
    from engine.linking.text import link_candidates

    names_kg.retrieve(Pattern.from_triples([("Heat", "directed_by", "UNKNOWN 1")]), k=1, graph="replica")
    rep = names_kg.retriever.replica_now()
    assert rep is not None
    for got in (link_candidates([text], names_kg.graph)[0],
                link_candidates([text], names_kg.graph, local=local_names(rep))[0]):
        by_mention = {c.mention: c for c in got}
        if mention is None:
            assert not any(c.how == "spelling" for c in got), got
        else:
            assert by_mention[mention].name == name and by_mention[mention].how == "spelling", got
