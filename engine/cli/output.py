"""What the commands print: JSON, reports, tables, retrieval results and answers (stdout), one-line errors (stderr)."""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

__all__ = ["one_line", "print_answer", "print_json", "print_report", "print_retrieval", "table"]


def one_line(text: str) -> str:
    """A message as one line: driver errors may span several."""
    return re.sub(r"\s*[\r\n]+\s*", " ", str(text)).strip()


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def print_report(report: Any, as_json: bool) -> None:
    """A command's report (load, sync, apply, check): its ``to_dict()`` as JSON, or its ``lines()``."""
    if as_json:
        print_json(report.to_dict())
    else:
        print("\n".join(report.lines()))


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _triple_table(subgraph: Any) -> str:
    return table([[t.head.name, t.relation, t.tail.name] for t in subgraph.triples], ["head", "relation", "tail"])


def _print_unmatched(result: Any) -> list[str]:
    """Named pattern nodes that are no entity's name, first (the tables below hold stand-ins); the other warnings."""
    from engine.retrieval.results import unmatched_warning

    first = [unmatched_warning(text, closest) for text, closest in getattr(result, "unmatched", {}).items()]
    for w in first:
        print(f"warning: {w}")
    return [w for w in result.warnings if w not in first]


def _print_timings(timings: dict[str, float]) -> None:
    print("timings (ms): " + "  ".join(f"{k} {v:.1f}" for k, v in timings.items()))


def print_retrieval(res: Any) -> None:
    """A :class:`~engine.retrieval.results.RetrievalResult` as text: a table per subgraph, the answers, timings."""
    warnings = _print_unmatched(res)
    if not res.subgraphs:
        print("no subgraph matches the pattern")
    for i, sg in enumerate(res.subgraphs, 1):
        print(f"graph [{i}]  GSD {sg.gsd:.4f}")
        print(_triple_table(sg))
        print()
    if res.answers:
        print("answers: " + ", ".join(f"{a.entity.name} ({a.gsd:.3f})" for a in res.answers))
    _print_timings(res.timings)
    for w in warnings:
        print(f"warning: {w}")


def _print_scored(sc: Any) -> None:
    print(f"scored triples ({sc.model}, {len(sc.triples)} of the {sc.report.edges:,}-triple neighbourhood"
          f"{', linked: ' + ', '.join(x.name for x in sc.linked) if sc.linked else ''}):")
    print(table([[t.head.name, t.relation, t.tail.name, f"{t.score:.4f}"] for t in sc.triples[:10]],
                ["head", "relation", "tail", "confidence"]))
    if len(sc.triples) > 10:
        print(f"... and {len(sc.triples) - 10} more")
    print()


def print_answer(ans: Any) -> None:
    """An Answer as text: the answer, its evidence as a table per subgraph, the timings."""
    print(f"question: {ans.query}")
    if ans.pattern is not None:
        origin = "LLM" if ans.pattern_text is not None else "given"
        if getattr(ans, "pattern_source", None) == "learned":
            origin = f"learned, probability {ans.pattern_probability:.3f}"
        print(f"pattern ({origin}): {json.dumps(ans.pattern.to_json(), ensure_ascii=False)}")
    warnings = _print_unmatched(ans)
    if ans.failed_stage:
        print(f"FAILED at stage {ans.failed_stage}: {ans.error}")
    else:
        print(f"answer: {ans.text.strip()}")
    if ans.answers:
        print("answer entities: " + ", ".join(f"{a.entity.name} (GSD {a.gsd:.3f})" for a in ans.answers))
    print()
    if not ans.subgraphs and not ans.failed_stage:
        print("evidence: " + ("no subgraph of the KG matches the pattern" if ans.pattern is not None
                              else "none: no pattern was run"))
    for i, sg in enumerate(ans.subgraphs, 1):
        print(f"evidence graph [{i}]  GSD {sg.gsd:.4f}")
        print(_triple_table(sg))
        print()
    sc = getattr(ans, "scored", None)
    if sc is not None and sc.triples:
        _print_scored(sc)
    if getattr(ans, "answer_source", None):
        print(f"answer source: {ans.answer_source}")
    _print_timings(ans.timings)
    if ans.usage.get("calls"):
        u = ans.usage
        print(f"LLM: {u['calls']} call(s), {u['prompt_tokens']} prompt + {u['completion_tokens']} completion tokens, "
              f"{u['retries']} retries")
    for w in warnings:
        print(f"warning: {w}")
