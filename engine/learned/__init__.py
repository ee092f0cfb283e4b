"""Patterns without an LLM (docs/learned-patterns.md): topic entities linked from plain text
(:mod:`engine.linking.text`), the learned pattern generator, a classifier over the KG's pattern templates conditioned
on the question (:mod:`.generator`),
its training from question-answer pairs (:mod:`.train`), the templates and their derivation from the KG
(:mod:`.templates`) and the router that asks an LLM only when the learned pattern is unsure (:mod:`.router`)."""

from engine.learned.templates import Template

__all__ = ["Template"]
