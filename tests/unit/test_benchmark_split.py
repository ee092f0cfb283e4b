"""The benchmarks' MetaQA splits (benchmarks/_metaqa_split.py): ``--split test`` reads qa_test.txt beside
qa_dev.txt, and a data folder without it is refused in one line, exit 2, before any server is started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine._errors import InputError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _metaqa_split import split_files  # noqa: E402 - benchmarks/ goes on sys.path first


def metaqa_folder(root: Path, *, test: bool) -> Path:
    for hop in (1, 2, 3):
        d = root / f"{hop}-hop"
        d.mkdir(parents=True)
        names = ["qa_dev.txt", "qa_dev_qtype.txt"] + (["qa_test.txt", "qa_test_qtype.txt"] if test else [])
        for name in names:
            (d / name).write_text("what films did [Ava Lind] direct\tFilm 00\n", encoding="utf-8")
    return root


def test_split_files(tmp_path: Path) -> None:
    data = metaqa_folder(tmp_path / "both", test=True)
    test = split_files(data, "test")
    assert test[3]["train"] == data / "3-hop" / "qa_dev.txt" and test[3]["test"] == data / "3-hop" / "qa_test.txt"
    assert test[1]["test_qtype"] == data / "1-hop" / "qa_test_qtype.txt"
    dev = split_files(data, "dev")
    assert dev[2]["train"] == dev[2]["test"] == data / "2-hop" / "qa_dev.txt"
    only_dev = metaqa_folder(tmp_path / "dev", test=False)
    assert split_files(only_dev, "dev")[1]["train"].is_file()
    with pytest.raises(InputError, match=r"1-hop/qa_test\.txt: no such file .*--split dev"):
        split_files(only_dev, "test")
    with pytest.raises(InputError, match="--split must be one of"):
        split_files(data, "train")


@pytest.mark.parametrize("script", ["scorer.py"])
def test_missing_test_files_are_one_line_exit_2(tmp_path: Path, script: str) -> None:
    data = metaqa_folder(tmp_path, test=False)
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--split", "test", "--data", str(data)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "qa_test.txt: no such file" in lines[0] and "Traceback" not in proc.stderr
    assert proc.stdout == ""
