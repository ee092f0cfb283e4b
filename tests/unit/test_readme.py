"""README.md's test convention (tests/integration/test_readme.py states it and runs the examples) is read as stated,
the main examples are not skipped, and the warning for a pattern node that names no entity reads as stated."""

from __future__ import annotations

from typing import Any

from helpers.readme import README, claim_regex, instrument_python, readme_blocks, readme_commands


def test_convention_is_parsed() -> None:
    text = ("x\n<!-- readme-test: skip: needs an LLM -->\n```bash\nisorag ask q --kg demo\n```\n\n"
            "```bash\n$ isorag match '{\"a\": \"# no\"}' --kg demo   # -> answers: X...\nmake demo\n```\n"
            "```python\nprint(1)  # -> 1\nprint(2)  # plain comment\n```\n")
    blocks = readme_blocks(text)
    assert [(b.lang, b.skip) for b in blocks] == [("bash", "needs an LLM"), ("bash", None), ("python", None)]
    [cmd] = readme_commands(blocks)
    assert cmd.argv == ["isorag", "match", '{"a": "# no"}', "--kg", "demo"] and cmd.claim == "answers: X..."
    assert cmd.line == 8
    code, claims = instrument_python(blocks[2])
    assert claims == 1 and "__claim__(12, '1', 1)" in code and "print(2)" in code
    assert claim_regex("answers: X...").fullmatch("answers: X (0.000), Y (1.0)")
    assert not claim_regex("answers: X").fullmatch("answers: XY")


def test_readme_has_the_main_examples_unskipped() -> None:
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    python = [b for b in blocks if b.lang == "python" and not b.skip]
    assert python and all(instrument_python(b)[1] for b in python), "a Python example without a '# ->' claim"
    cmds = readme_commands(blocks)
    ran = {c.argv[1] for c in cmds}
    assert {"load", "stats", "match", "ask"} <= ran
    assert any(c.argv[1] == "ask" and "--pattern" in c.argv for c in cmds)
    assert all(c.claim for c in cmds), [c.line for c in cmds if not c.claim]


def test_unmatched_warning_text() -> None:
    from engine.retrieval.results import unmatched_warning
    from engine.retrieval.retriever import normalize_name

    assert unmatched_warning("X", [("Y", 1.0304), ("Z", 1.1)]) == (
        "no KG entity is named 'X': the match used the nearest entities instead (closest: 'Y' (1.030), 'Z' (1.100))")
    assert unmatched_warning("X", []).endswith("(closest: none)")
    assert normalize_name("  Ｋｌｕｔｅ\u00a0 II ") == normalize_name("klute ii") == "klute ii"


def test_docs_links_resolve() -> None:
    """Every relative link of README.md and docs/ names a file of the repository (and an anchor of it, if given)."""
    import re

    from helpers.readme import doc_files

    def anchors(path: Any) -> set[str]:
        heads = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)
        return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in heads}

    for path in doc_files():
        for target in re.findall(r"\]\(([^)#\s]+\.md|[^)#\s]*)(#[^)\s]+)?\)", path.read_text(encoding="utf-8")):
            file, anchor = target
            if file.startswith(("http://", "https://")):
                continue
            dest = (path.parent / file).resolve() if file else path
            assert dest.exists(), f"{path.name}: a link to {file!r}, which does not exist"
            if anchor and dest.suffix == ".md":
                assert anchor[1:] in anchors(dest), f"{path.name}: no heading {anchor!r} in {file or path.name}"
