"""The examples of README.md and docs/*.md read by the convention that tests/integration/test_readme.py states: their
code blocks, the ``isorag`` lines of their shell blocks, their ``# -> TEXT`` claims and
``<!-- readme-test: skip: REASON -->``."""

from __future__ import annotations

import io
import re
import shlex
import tokenize
from dataclasses import dataclass
from pathlib import Path

from helpers import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"


def doc_files() -> list[Path]:
    """README.md first, then every page under docs/ (sorted): the order in which their examples run."""
    return [README, *sorted(DOCS.glob("**/*.md"))]
SKIP = re.compile(r"^<!--\s*readme-test:\s*skip:\s*(\S.*?)\s*-->$")
FENCE = re.compile(r"^```(\w*)")
PRINT = re.compile(r"^(\s*)print\((.*)\)$", re.S)


@dataclass
class Block:
    lang: str
    line: int  # README line of its first code line
    text: str
    skip: str | None


def readme_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        before = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
        skip = SKIP.match(before)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        blocks.append(Block(m.group(1), i + 2, "\n".join(lines[i + 1:j]) + "\n", skip.group(1) if skip else None))
        i = j + 1
    return blocks


def claim_regex(claim: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in claim.split("...")), re.S)


def split_comment(line: str) -> tuple[str, str | None]:
    """A shell line's command and its comment (a ``#`` after white space, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), None


def claim_of(comment: str | None) -> str | None:
    if comment is not None and comment.startswith("->"):
        return comment[2:].strip()
    return None


@dataclass
class Command:
    line: int
    argv: list[str]
    claim: str | None


def readme_commands(blocks: list[Block]) -> list[Command]:
    out = []
    for b in blocks:
        if b.lang not in ("bash", "sh", "shell", "console") or b.skip:
            continue
        for k, raw in enumerate(b.text.splitlines()):
            cmd, comment = split_comment(raw.strip().removeprefix("$ "))
            if cmd.startswith("isorag "):
                out.append(Command(b.line + k, shlex.split(cmd), claim_of(comment)))
    return out


def instrument_python(b: Block, where: str = "README.md") -> tuple[str, int]:
    """The block with each claimed ``print(...)`` turned into a call that checks what it prints (``where``: the
    file named in the messages)."""
    lines = b.text.splitlines()
    claims = 0
    for tok in tokenize.generate_tokens(io.StringIO(b.text).readline):
        claim = claim_of(tok.string[1:].strip()) if tok.type == tokenize.COMMENT else None
        if claim is None:
            continue
        row, col = tok.start
        m = PRINT.match(lines[row - 1][:col].rstrip())
        assert m, f"{where}:{b.line + row - 1}: a '# ->' claim ends a line that is not a print(...) call"
        lines[row - 1] = f"{m.group(1)}__claim__({b.line + row - 1}, {claim!r}, {m.group(2)})"
        claims += 1
    prelude = (
        "import re as __re\n"
        "def __claim__(line, claim, *args, sep=' '):\n"
        "    text = sep.join(str(a) for a in args)\n"
        "    print(text)\n"
        "    rx = '.*'.join(__re.escape(p) for p in claim.split('...'))\n"
        "    if not __re.fullmatch(rx, text, __re.S):\n"
        f"        raise AssertionError(f'{where}:{{line}}: printed {{text!r}}, its comment claims {{claim!r}}')\n"
    )
    return prelude + "\n".join(lines) + "\n", claims
