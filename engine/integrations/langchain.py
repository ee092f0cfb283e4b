"""A langchain-core retriever over an :class:`~engine.Engine`: the verbalized subgraphs as Documents.

    from engine.integrations.langchain import IsoragRetriever
    retriever = IsoragRetriever(engine=eng, k=3)          # or eng.as_retriever(k=3)
    docs = retriever.invoke("who directed Heat")          # the LLM writes the pattern
    docs = retriever.invoke('{"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]}')

A query that is a pattern (JSON ``{"triples": [...]}``) is used as it is; plain text needs the engine's LLM to
turn it into a pattern (without one: a ConfigError that says how to configure one). One Document per subgraph,
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

    def _pattern(self, query: str) -> tuple[Pattern, str | None]:
        pat = _as_pattern(query)
        if pat is not None:
            return pat, None
        from engine.llm import NO_LLM_HELP
        from engine.answering.prompting import generate_pattern

        llm = self.engine.llm
        if llm is None:
            raise ConfigError(NO_LLM_HELP)
        return generate_pattern(llm, query, self.engine.fewshot("pattern"))

    async def _apattern(self, query: str) -> tuple[Pattern, str | None]:
        pat = _as_pattern(query)
        if pat is not None:
            return pat, None
        from engine.llm import NO_LLM_HELP
        from engine.answering.prompting import agenerate_pattern

        llm = self.engine.llm
        if llm is None:
            raise ConfigError(NO_LLM_HELP)
        return await agenerate_pattern(llm, query, self.engine.fewshot("pattern"))

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

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        pattern, text = self._pattern(query)
        res = self.engine.retrieve(pattern, k=self.k, **self.match)
        return self._documents(res, text)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        import asyncio

        pattern, text = await self._apattern(query)
        res = await asyncio.to_thread(self.engine.retrieve, pattern, self.k, **self.match)
        return self._documents(res, text)
