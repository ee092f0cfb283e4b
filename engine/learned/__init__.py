"""Patterns without an LLM (docs/learned-patterns.md): topic entities linked from plain text
(:mod:`engine.linking.text`, the engine's one linker), the learned pattern generator, a classifier over the KG's
pattern templates conditioned on the question (:mod:`.generator`), its training from question-answer pairs with or
without patterns (:mod:`.train`), the templates and the relation paths of the KG they are found from
(:mod:`.templates`), the questions about relations a KG lacks that teach it when no template answers
(:mod:`.unanswerable`), and the router that decides who writes a pattern, the generator, the LLM, or nobody
(:mod:`.router`)."""

from engine.learned.templates import Template

__all__ = ["Template"]
