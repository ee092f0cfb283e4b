"""``isorag demo``: start the local servers, load the bundled demo KG, print its stats and answer a demo question
three ways (its pattern given, the learned generator's pattern, the LLM's when one is configured)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from engine.cli.arguments import kg_type
from engine.cli.common import done, open_engine
from engine.cli.output import print_answer

if TYPE_CHECKING:  # pragma: no cover
    from engine._engine import Engine

__all__ = ["DEMO_DIR", "add_commands", "cmd_demo"]

DEMO_DIR = Path(__file__).resolve().parents[1] / "data" / "demo"


def _demo_generator(eng: Engine, quiet: bool) -> None:
    """Train the demo KG's pattern generator on the demo's questions and ``generator_questions.jsonl`` (MetaQA dev
    questions about its films, CC BY 3.0), well under a minute, so that a plain question is answered with no LLM."""
    from engine.learned.train import GeneratorSettings

    print("\n== training the demo's pattern generator on MetaQA questions about its films (plain text, no LLM)",
          flush=True)
    res = eng.train_generator([DEMO_DIR / "questions.jsonl", DEMO_DIR / "generator_questions.jsonl"],
                              settings=GeneratorSettings(), progress=not quiet)
    print(f"generator: {res.checkpoint} ({res.questions} questions, {res.templates} templates, {res.train_s:.1f} s)")


def _demo_questions(eng: Engine, quiet: bool) -> None:
    """The last demo question with its pattern given, then in plain text by the learned generator and the LLM."""
    q = json.loads((DEMO_DIR / "questions.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    print(f"\n== question with its pattern given: {q['question']}")
    print_answer(eng.ask(q["question"], pattern=q["pattern"], raise_errors=False))
    print(f"   expected: {', '.join(q['answers'][:5])}")
    _demo_generator(eng, quiet)
    plain = q["question"].replace("[", "").replace("]", "")
    print(f"\n== the same question in plain text, pattern by the learned generator (no LLM): {plain}")
    print_answer(eng.ask(plain, raise_errors=False, route="learned"))
    if eng.llm is not None:
        print(f"\n== the same question, pattern and answer by the LLM ({eng.llm!r})")
        print_answer(eng.ask(q["question"], raise_errors=False, route="llm"))
    else:
        print("\n(no LLM configured: set ISORAG_LLM_BASE_URL and ISORAG_LLM_MODEL to have it write the "
              "pattern and the answer)")


def cmd_demo(args: argparse.Namespace) -> int:
    """Start the local servers, load the bundled demo KG, print its stats and answer a demo question."""
    from engine.cli.kgs import print_stats

    args.kg = args.kg or "demo"
    with open_engine(args) as eng:
        print(f"== loading the demo KG ({DEMO_DIR / 'kb.txt'}) into KG {eng.kg!r}", flush=True)
        summary = eng.load(DEMO_DIR / "kb.txt", progress=not args.quiet)
        print("\n".join(summary.lines()))
    print()
    with open_engine(args) as eng:
        print_stats(eng.stats())
        if (DEMO_DIR / "questions.jsonl").exists():
            _demo_questions(eng, args.quiet)
    return done()


def add_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    s = command("demo", help="load the bundled demo KG and answer a demo question")
    s.add_argument("--kg", type=kg_type, default=None, help="the KG (default $ISORAG_KG or 'default')")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=cmd_demo)
