"""The h-hop neighbourhood of anchor entities, fetched from Neo4j for the triple scorers (docs/triple-scorer.md).

One batched Cypher query per hop (``cypher/neighbourhood_hop.cypher``: ``UNWIND`` the frontier) returns every
KG relationship of the frontier entities, either way, with its direction kept; only the KG's own relation
types are followed (never ``ISORAG_IS_A``). The number of triples is capped (``max_edges``). Past the cap the fetch
prunes in the manner of personalized PageRank (PPR, as RoG's and SubgraphRAG's candidate pools):

* the anchors start with mass ``1 / |anchors|``; expanding an entity ``u`` pushes ``mass(u) / deg(u)`` to each
  neighbour, ``deg`` read from Neo4j's degree store before the expansion;
* a hop expands its frontier in decreasing order of ``mass(u) / deg(u)`` (the mass each of its triples
  carries: the push criterion of Andersen, Chung and Lang's local PPR), while the triples it may add fit in
  the hop's budget; an entity that does not fit is skipped and a smaller one may still be expanded;
* hop ``i`` of ``h`` may spend ``1 / (h - i)`` of the budget left, so early hubs (a genre, a language) cannot
  starve the last hop, where the answers of multi-hop questions are; budget a hop leaves goes to the next.

What was left out is counted in :class:`NeighbourhoodReport` (entities not expanded, the triples they would
have added at most), and :meth:`NeighbourhoodReport.warning` says it in a sentence.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from engine._cypher import render, rel_types
from engine._timing import ms_since

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import GraphReader

__all__ = [
    "DEFAULT_HOPS",
    "DEFAULT_MAX_EDGES",
    "NAMELESS_PATTERN",
    "Neighbourhood",
    "NeighbourhoodReport",
    "fetch_neighbourhood",
]

#: SubgraphRAG's pools are 2-hop neighbourhoods; MetaQA's 3-hop questions need 3.
DEFAULT_HOPS = 2
#: The issue's scoring target is set for neighbourhoods of up to 10,000 triples.
DEFAULT_MAX_EDGES = 10_000
#: Names that carry no text (Freebase CVT mids, blank nodes): such entities get the model's shared vector.
NAMELESS_PATTERN = r"^(?:[mg]\.[0-9a-z_]+|_:.*)$"


@dataclass
class NeighbourhoodReport:
    """What a fetch did and what it left out."""

    hops: int
    max_edges: int
    anchors: int = 0
    edges: int = 0
    nodes: int = 0
    #: entities reached but not expanded because their triples did not fit the budget
    pruned_nodes: int = 0
    #: at most this many triples were left out (sum of the degrees of the entities not expanded, less the
    #: triples of theirs already fetched)
    pruned_edges: int = 0
    #: an entity expanded only in part (its first triples) because even it alone did not fit
    partial_nodes: int = 0
    queries: int = 0
    ms: float = 0.0
    per_hop: list[dict[str, int]] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return self.pruned_nodes > 0 or self.partial_nodes > 0

    def warning(self) -> str | None:
        if not self.truncated:
            return None
        part = f", {self.partial_nodes} only in part" if self.partial_nodes else ""
        return (f"neighbourhood capped at {self.max_edges:,} triples: {self.pruned_nodes:,} entities not expanded"
                f"{part} (up to {self.pruned_edges:,} triples left out, lowest personalized-PageRank mass first)")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "truncated": self.truncated}


@dataclass
class Neighbourhood:
    """Directed triples around the anchors, over local node indices.

    Shapes: **nodes** ``[N]`` eids (the anchors first); **heads**, **tails** ``[E]`` local indices (a triple
    keeps its direction in the KG); **rels** ``[E]`` indices into **relation_types**; **distance** ``[N]`` hops
    from the nearest anchor; **nameless** ``[N]`` bool; **anchors** ``[A]`` local indices.
    """

    kg: str
    nodes: np.ndarray
    heads: np.ndarray
    tails: np.ndarray
    rels: np.ndarray
    relation_types: tuple[str, ...]
    anchors: np.ndarray
    distance: np.ndarray
    nameless: np.ndarray
    report: NeighbourhoodReport

    @property
    def num_nodes(self) -> int:
        return int(self.nodes.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.heads.shape[0])

    def local(self, eids: Sequence[int]) -> np.ndarray:
        """Local indices of those ``eids`` that are in the neighbourhood (others are dropped)."""
        index = {int(e): i for i, e in enumerate(self.nodes.tolist())}
        return np.asarray([index[int(e)] for e in eids if int(e) in index], dtype=np.int64)

    def edge_index(self) -> Any:
        import torch

        return torch.from_numpy(np.stack([self.heads, self.tails]).astype(np.int64))

    def triple_eids(self, idx: Sequence[int] | np.ndarray) -> list[tuple[int, str, int]]:
        """``(head eid, relationship type, tail eid)`` of the triples at ``idx``."""
        idx = np.asarray(idx, dtype=np.int64)
        return [(int(self.nodes[self.heads[i]]), self.relation_types[int(self.rels[i])], int(self.nodes[self.tails[i]]))
                for i in idx.tolist()]

    def to_arrays(self) -> dict[str, Any]:
        """Plain arrays (compact dtypes) for a cache file; :meth:`from_arrays` reads them back."""
        small = np.int32 if self.num_nodes < 2**31 else np.int64
        return {"kg": self.kg, "nodes": self.nodes.astype(np.int64), "heads": self.heads.astype(small),
                "tails": self.tails.astype(small), "rels": self.rels.astype(np.int16),
                "relation_types": list(self.relation_types), "anchors": self.anchors.astype(np.int32),
                "distance": self.distance.astype(np.int8), "nameless": self.nameless.astype(bool),
                "report": self.report.to_dict()}

    @classmethod
    def from_arrays(cls, d: dict[str, Any]) -> Neighbourhood:
        rep = dict(d["report"])
        rep.pop("truncated", None)
        return cls(d["kg"], np.asarray(d["nodes"], np.int64), np.asarray(d["heads"], np.int64),
                   np.asarray(d["tails"], np.int64), np.asarray(d["rels"], np.int64), tuple(d["relation_types"]),
                   np.asarray(d["anchors"], np.int64), np.asarray(d["distance"], np.int64),
                   np.asarray(d["nameless"], bool), NeighbourhoodReport(**rep))


def _empty(kg: str, types: tuple[str, ...], report: NeighbourhoodReport) -> Neighbourhood:
    z = np.zeros(0, dtype=np.int64)
    return Neighbourhood(kg, z, z, z.copy(), z.copy(), types, z.copy(), z.copy(), np.zeros(0, bool), report)


def fetch_neighbourhood(
    graph: GraphReader,
    anchors: Sequence[int],
    hops: int = DEFAULT_HOPS,
    max_edges: int = DEFAULT_MAX_EDGES,
    *,
    nameless_pattern: str = NAMELESS_PATTERN,
) -> Neighbourhood:
    """The ``hops``-hop neighbourhood of the ``anchors`` (eids) in ``graph`` (a
    :class:`~engine.stores.graph.GraphStore`), at most ``max_edges`` triples (see the module docstring for what is
    pruned past the cap).

    Anchors not in the KG are ignored; none left gives an empty neighbourhood. Queries: one for the anchors,
    one per hop (plus one per entity expanded in part, which happens only when an entity alone has more
    triples than the budget left).

    Kept whole: each hop's budget choice reads, and its merge of the results writes, the same per-node lists
    (``index``, ``degree``, ``mass``, ``incident``, ...), the triple lists, ``seen`` and ``report``; a hop split
    out would have to pass all of them back and forth.
    """
    if hops < 0:
        raise ValueError("hops must be >= 0")
    if max_edges < 1:
        raise ValueError("max_edges must be >= 1")
    t_start = time.perf_counter()
    catalog = graph.relation_catalog()
    types = tuple(sorted({ri.type for ri in catalog.values()}))
    report = NeighbourhoodReport(hops=hops, max_edges=max_edges)
    code = {t: i for i, t in enumerate(types)}
    wanted = list(dict.fromkeys(int(a) for a in anchors))
    if not wanted or not types:
        report.ms = ms_since(t_start)
        return _empty(graph.kg, types, report)
    alternation = rel_types(types, set(types))
    hop_query = render("neighbourhood_hop", rel_types=alternation)
    partial_query = render("neighbourhood_partial", rel_types=alternation)

    rows = graph.read(render("neighbourhood_anchors"), eids=wanted, kg=graph.kg, nameless=nameless_pattern)
    report.queries += 1
    found = {int(r["eid"]): r for r in rows}
    start = [a for a in wanted if a in found]
    if not start:
        report.ms = ms_since(t_start)
        return _empty(graph.kg, types, report)

    index: dict[int, int] = {}
    node_eids: list[int] = []
    distance: list[int] = []
    nameless: list[bool] = []
    degree: list[int] = []
    mass: list[float] = []
    incident: list[int] = []  # triples fetched so far that touch the node

    def add_node(eid: int, dist: int, deg: int, is_nameless: bool) -> int:
        i = len(node_eids)
        index[eid] = i
        node_eids.append(eid)
        distance.append(dist)
        degree.append(deg)
        nameless.append(bool(is_nameless))
        mass.append(0.0)
        incident.append(0)
        return i

    for a in start:
        add_node(a, 0, int(found[a]["degree"]), found[a]["nameless"])
        mass[index[a]] = 1.0 / len(start)
    report.anchors = len(start)

    heads: list[int] = []
    tails: list[int] = []
    rels: list[int] = []
    seen: set[tuple[int, int, int]] = set()
    frontier = list(range(len(start)))

    for hop in range(hops):
        if not frontier:
            break
        left = max_edges - len(heads)
        budget = left // (hops - hop) if hop < hops - 1 else left
        # cost of expanding u: its triples not fetched yet (an upper bound: the degree counts every relationship)
        order = sorted(frontier, key=lambda u: (-mass[u] / max(degree[u] - incident[u], 1), node_eids[u]))
        chosen: list[int] = []
        spent = 0
        pruned_nodes = pruned_edges = 0
        for u in order:
            cost = max(degree[u] - incident[u], 0)
            if spent + cost <= budget:
                chosen.append(u)
                spent += cost
            else:
                pruned_nodes += 1
                pruned_edges += cost
        partial: int | None = None
        if not chosen and order and left > 0:
            # not even the best entity fits: take the first triples it has, rather than nothing
            partial = order[0]
            pruned_nodes -= 1
            pruned_edges -= max(degree[partial] - incident[partial], 0)
        next_degrees = hop < hops - 1
        results: list[dict[str, Any]] = []
        if chosen:
            results = graph.read(hop_query, frontier=[node_eids[u] for u in chosen], code=code,
                                 degrees=next_degrees, nameless=nameless_pattern)
            report.queries += 1
        if partial is not None:
            results += graph.read(partial_query, eid=node_eids[partial], limit=min(left, budget) or left, code=code,
                                  degrees=next_degrees, nameless=nameless_pattern)
            report.queries += 1
            report.partial_nodes += 1
        expanding = len(chosen) + (partial is not None)
        new_nodes: list[int] = []
        added = 0
        pushes: list[tuple[int, int]] = []
        for row in results:
            for m_eid, deg, is_nameless in zip(row["nodes"], row["degree"], row["nameless"]):
                if m_eid not in index:
                    new_nodes.append(add_node(m_eid, hop + 1, deg, is_nameless))
            for src_eid, c, m_eid in zip(row["src"], row["code"], row["dst"]):
                u, m = index[src_eid], index[m_eid]
                key = (u, c, m) if c >= 0 else (m, -1 - c, u)
                if key in seen:
                    continue  # fetched from its other end (this hop or an earlier one)
                seen.add(key)
                heads.append(key[0])
                rels.append(key[1])
                tails.append(key[2])
                incident[u] += 1
                if m != u:
                    incident[m] += 1
                pushes.append((u, m))
                added += 1
        for u, m in pushes:
            mass[m] += mass[u] / max(degree[u], 1)
        report.pruned_nodes += pruned_nodes
        report.pruned_edges += pruned_edges
        report.per_hop.append({"hop": hop + 1, "frontier": len(frontier), "expanded": expanding,
                               "edges": added, "new_nodes": len(new_nodes), "pruned_nodes": pruned_nodes,
                               "pruned_edges": pruned_edges})
        frontier = new_nodes

    report.edges = len(heads)
    report.nodes = len(node_eids)
    report.ms = ms_since(t_start)
    return Neighbourhood(
        kg=graph.kg,
        nodes=np.asarray(node_eids, dtype=np.int64),
        heads=np.asarray(heads, dtype=np.int64),
        tails=np.asarray(tails, dtype=np.int64),
        rels=np.asarray(rels, dtype=np.int64),
        relation_types=types,
        anchors=np.arange(len(start), dtype=np.int64),
        distance=np.asarray(distance, dtype=np.int64),
        nameless=np.asarray(nameless, dtype=bool),
        report=report,
    )
