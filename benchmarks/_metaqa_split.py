"""Which MetaQA files a benchmark trains and tests on (``--split``, ``--data``), shared by the benchmarks.

``dev`` (the default): every hop's ``qa_dev.txt`` is cut in two, its first 80% to train on and its last 20% to
test on. ``test``: the whole ``qa_dev.txt`` trains and ``qa_test.txt`` (with ``qa_test_qtype.txt`` beside it) is
tested on, where the data folder holds them; a folder without them is an :class:`~engine._errors.InputError`
naming the first missing file, said before any server is started.
"""

from __future__ import annotations

from pathlib import Path

from engine import InputError

SPLITS = ("dev", "test")


def split_files(data: Path, split: str, hops: tuple[int, ...] = (1, 2, 3)) -> dict[int, dict[str, Path]]:
    """Per hop: ``{"train": qa file, "train_qtype": its qtypes, "test": ..., "test_qtype": ...}`` (for ``dev``
    the test files are the training files: the caller cuts them). Every file is checked to exist."""
    if split not in SPLITS:
        raise InputError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    out: dict[int, dict[str, Path]] = {}
    for hop in hops:
        folder = data / f"{hop}-hop"
        dev, dev_qt = folder / "qa_dev.txt", folder / "qa_dev_qtype.txt"
        files = {"train": dev, "train_qtype": dev_qt, "test": dev, "test_qtype": dev_qt}
        if split == "test":
            files["test"], files["test_qtype"] = folder / "qa_test.txt", folder / "qa_test_qtype.txt"
        for role, path in files.items():
            if not path.is_file():
                hint = (" (--split test needs qa_test.txt and qa_test_qtype.txt beside qa_dev.txt; "
                        "use --split dev to test on the last 20% of dev)") if role.startswith("test") else ""
                raise InputError(f"{path}: no such file{hint}")
        out[hop] = files
    return out
