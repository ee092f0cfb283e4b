"""A langchain-core retriever over an :class:`~engine.Engine`: the verbalized subgraphs as Documents.

    from engine.integrations.langchain import IsoragRetriever
    retriever = IsoragRetriever(engine=eng, k=3)          # or eng.as_retriever(k=3)
    docs = retriever.invoke("who directed Heat")          # the learned generator or the LLM writes the pattern
    docs = retriever.invoke("who directed Heat", k=1)     # k per call
    docs = retriever.invoke('{"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]}')

A query that is a pattern (JSON ``{"triples": [...]}``) is used as it is; plain text is turned into a pattern by the
engine's router (:mod:`engine.learned.router`): the learned generator (``isorag train-generator``) when there is no
LLM or its pattern is sure enough, else the LLM (with neither: a ConfigError that says how to get one). A learned
beam is tried in order until a pattern matches. One Document per subgraph,
best GSD first: ``page_content`` is the subgraph in SimGRAG's format, ``("h", "r", "t"), ...``; ``metadata``
has ``gsd``, ``rank``, ``triples`` (``[[h, r, t], ...]``), ``mapping`` (pattern node -> entity name), ``pattern``
and ``kg``.

langchain-core is an optional dependency: ``pip install 'langchain-core==1.7.2'`` (or ``isorag[langchain]``).
"""

from __future__ import annotations

from typing import Any

from engine._errors import ConfigError, PatternParseError
from engine.retrieval.pattern import Pattern

_HINT = "pip install 'langchain-core==1.7.2'  (or: pip install 'isorag[langchain]')"

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ModuleNotFoundError as e:  # pragma: no cover - exercised only without langchain-core
    raise ImportError(f"engine.integrations.langchain needs langchain-core: {_HINT}") from e

__all__ = ["IsoragRetriever"]


def _check_k(k: Any, default: int) -> int:
    """The number of Documents a call returns: ``k`` given to ``invoke``, else the retriever's own."""
    k = default if k is None else k
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"retriever k must be a positive integer, got {k!r}")
    return k


def _as_pattern(query: str) -> Pattern | None:
    """The pattern when ``query`` is one written as JSON, else None (plain text)."""
    text = query.strip()
    if not text.startswith("{"):
        return None
    try:
        return Pattern.from_json(text)
    except PatternParseError:
        return None


class IsoragRetriever(BaseRetriever):
    """Retrieves the top-``k`` KG subgraphs of a question (SimGRAG) as Documents."""

    engine: Any
    k: int = 3
    #: MatchSettings overrides for every query (``k_node``, ``k_rel``, ``deadline_s``...)
    match: dict[str, Any] = {}

    def _learned(self, query: str) -> list[Pattern] | None:
        """The learned beam for plain text when the router keeps it, None when the LLM writes the pattern, an empty
        list when nobody should (no documents: :func:`engine.learned.router.decide`)."""
        from engine.learned.router import LEARNED, LLM, decide
        from engine.llm import NO_LLM_HELP

        route = self.engine.config.route
        gen = None if route == "llm" else self.engine.generator
        has_llm = route != "learned" and self.engine.llm is not None
        if gen is None:
            if route == "learned":
                from engine.learned.router import NO_GENERATOR_HELP

                raise ConfigError(NO_GENERATOR_HELP)
            if not has_llm:
                raise ConfigError(NO_LLM_HELP)
            return None
        prop = gen.propose(query)
        who, _ = decide(route, prop, gen.threshold, has_llm)
        if who == LLM:
            return None
        return [p for p, _ in prop.beam] if who == LEARNED else []

    def _retrieve(self, query: str, k: int) -> tuple[Any, str | None] | None:
        """The result of the query's pattern (a JSON pattern, or the learned beam's first that matches); None when
        the LLM must write it."""
        pat = _as_pattern(query)
        beam = [pat] if pat is not None else self._learned(query)
        if beam is None:
            return None
        res = None
        for p in beam:
            res = self.engine.retrieve(p, k=k, **self.match)
            if res.subgraphs:
                break
        return res, None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None) -> list[Document]:
        k = _check_k(k, self.k)
        got: tuple[Any, str | None] | None = self._retrieve(query, k)
        if got is None:
            from engine.answering.prompting import generate_pattern

            pattern, raw = generate_pattern(self.engine.llm, query, self.engine.fewshot("pattern"))
            got = self.engine.retrieve(pattern, k=k, **self.match), raw
        res, text = got
        return [] if res is None else self._documents(res, text)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        import asyncio

        k = _check_k(k, self.k)
        got: tuple[Any, str | None] | None = await asyncio.to_thread(self._retrieve, query, k)
        if got is None:
            from engine.answering.prompting import agenerate_pattern

            pattern, raw = await agenerate_pattern(self.engine.llm, query, self.engine.fewshot("pattern"))
            got = await asyncio.to_thread(self.engine.retrieve, pattern, k, **self.match), raw
        res, text = got
        return [] if res is None else self._documents(res, text)

    def _documents(self, res: Any, pattern_text: str | None) -> list[Document]:
        from engine.retrieval.verbalize import verbalize_triple

        docs = []
        pattern = res.pattern.to_json()
        for rank, sg in enumerate(res.subgraphs, start=1):
            triples = [list(t.as_tuple()) for t in sg.triples]
            docs.append(Document(
                page_content=", ".join(verbalize_triple(t) for t in triples),
                metadata={
                    "gsd": sg.gsd,
                    "rank": rank,
                    "triples": triples,
                    "mapping": {node: e.name for node, e in sg.mapping.items()},
                    "pattern": pattern,
                    "pattern_text": pattern_text,
                    "kg": self.engine.kg,
                },
            ))
        return docs
