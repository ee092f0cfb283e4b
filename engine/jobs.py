"""Fact-verification jobs: claims from a file, one verdict per line in a JSON Lines file.

    isorag verify claims.jsonl --out verdicts.jsonl [--concurrency 4] [--shard 0/8] [--threshold 0.5]

Input: JSON Lines (one object a line) or CSV with a header; fields ``id`` (required, unique), ``claim``
(required), ``label`` (optional gold label: SUPPORTED / REFUTED / NOT_ENOUGH_INFO, FEVER's SUPPORTS / REFUTES /
NOT ENOUGH INFO, or True / False) and ``pattern`` (optional: ``{"triples": [[h, r, t], ...]}``, as an object
or as JSON text in a CSV cell). A malformed row is reported as ``file:line: reason`` and counted, never dropped
silently.

Output: one JSON object a line, ``{"id", "claim", "label", "gold", "correct", "reason", "evidence", "gsd",
"subgraphs", "timings", "failed_stage", "error", ...}``, written and flushed whole by one ``write`` on an
``O_APPEND`` descriptor, so a job killed midway leaves at most one partial last line.

* **Resumable.** A rerun reads the output first, repairs a partial last line (cuts it off), and skips every id
  already there: no id is ever written twice. ``retry_failed=True`` (``--retry-failed``) first removes the lines of
  claims whose verification failed (LLM down...) and verifies them again (with a shard, that shard's only).
* **Shardable.** ``shard=(i, n)`` (``--shard i/n``, ``i`` from 0) takes the rows whose id hashes (BLAKE2b,
  stable across runs and machines) to ``i`` mod ``n``; malformed rows without an id are sharded by line number.
  Give each shard its own output file.
* **Summary.** Counts per label, failures, and with gold labels the accuracy and the confusion matrix, over
  every line of the output (a resumed job reports the whole job). With True/False gold labels a claim counts as
  correct when it is SUPPORTED exactly when the label is True (SimGRAG's FactKG accuracy: NOT_ENOUGH_INFO and
  REFUTED both mean "not supported"); a failed claim is never correct.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine._errors import ConfigError, InputError, MalformedInputError, PatternError
from engine.answering import LABELS, NOT_ENOUGH_INFO, REFUTED, SUPPORTED, Verdict
from engine.retrieval.pattern import Pattern

if TYPE_CHECKING:  # pragma: no cover
    from engine._engine import Engine

__all__ = [
    "BadRow",
    "ClaimRow",
    "FAILED",
    "format_summary",
    "is_correct",
    "normalize_label",
    "parse_shard",
    "read_claims",
    "read_verdicts",
    "run_verify_job",
    "shard_of",
]

#: the column of the confusion matrix for claims whose verification failed
FAILED = "FAILED"
_LABEL_ALIASES = {
    "supported": SUPPORTED, "supports": SUPPORTED, "support": SUPPORTED,
    "refuted": REFUTED, "refutes": REFUTED, "refute": REFUTED,
    "not_enough_info": NOT_ENOUGH_INFO, "not enough info": NOT_ENOUGH_INFO, "nei": NOT_ENOUGH_INFO,
    "not_enough_information": NOT_ENOUGH_INFO, "not enough information": NOT_ENOUGH_INFO,
    "true": "True", "false": "False",
}
_MAX_ECHO = 20  # malformed rows printed one by one; the rest are counted


# ---------------------------------------------------------------------------------------------------------
# Reading claims
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimRow:
    id: str
    claim: str
    gold: str | None  # normalized: SUPPORTED / REFUTED / NOT_ENOUGH_INFO, or "True" / "False"
    pattern: dict[str, Any] | None
    line: int


@dataclass(frozen=True)
class BadRow:
    path: str
    line: int
    reason: str
    id: str | None = None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"

    def error(self) -> MalformedInputError:
        return MalformedInputError(self.path, self.line, self.reason)


def normalize_label(value: Any) -> str:
    """A gold label as SUPPORTED / REFUTED / NOT_ENOUGH_INFO, or "True" / "False" for binary labels."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        key = " ".join(value.strip().replace("-", " ").split()).lower()
        got = _LABEL_ALIASES.get(key) or _LABEL_ALIASES.get(key.replace(" ", "_"))
        if got:
            return got
    raise ValueError(f"unknown label {value!r} (use {', '.join(LABELS)}, or True / False)")


def is_correct(pred: str | None, gold: str) -> bool:
    if pred is None or pred == FAILED:
        return False
    if gold in ("True", "False"):
        return (pred == SUPPORTED) == (gold == "True")
    return pred == gold


def _pattern_of(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        return Pattern.from_json(value).to_json()  # strict JSON; PatternParseError says what is wrong
    if isinstance(value, Mapping):
        return Pattern.from_json(value).to_json()
    if isinstance(value, list):
        return Pattern.from_triples(value).to_json()
    raise PatternError(f'expected {{"triples": [[h, r, t], ...]}}, got {type(value).__name__}')


def _row(path: str, line: int, obj: Any, seen: dict[str, int]) -> ClaimRow | BadRow:
    if not isinstance(obj, Mapping):
        return BadRow(path, line, f"expected an object with id and claim, got {type(obj).__name__}")
    raw_id = obj.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or not str(raw_id).strip():
        return BadRow(path, line, f"missing or empty id (got {raw_id!r})")
    cid = str(raw_id).strip()
    claim = obj.get("claim")
    if not isinstance(claim, str) or not claim.strip():
        return BadRow(path, line, f"missing or empty claim for id {cid!r}", cid)
    if cid in seen:
        return BadRow(path, line, f"duplicate id {cid!r} (first at line {seen[cid]})", cid)
    gold = None
    label = obj.get("label")
    if label is not None and not (isinstance(label, str) and not label.strip()):
        try:
            gold = normalize_label(label)
        except ValueError as e:
            return BadRow(path, line, f"id {cid!r}: {e}", cid)
    try:
        pattern = _pattern_of(obj.get("pattern"))
    except PatternError as e:
        return BadRow(path, line, f"id {cid!r}: bad pattern: {e}", cid)
    seen[cid] = line
    return ClaimRow(cid, claim.strip(), gold, pattern, line)


def _detect(path: Path, fmt: str | None) -> str:
    if fmt:
        if fmt not in ("jsonl", "csv"):
            raise ConfigError(f"unknown claims format {fmt!r}: use jsonl or csv")
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".csv",):
        return "csv"
    raise ConfigError(f"cannot tell the format of {path} from its suffix: pass fmt='jsonl' or 'csv' (--format)")


def _undecodable(text: str) -> str | None:
    """The reason a line read with ``surrogateescape`` is not UTF-8, or None."""
    for col, ch in enumerate(text, start=1):
        if "\udc80" <= ch <= "\udcff":
            return f"not valid UTF-8: byte 0x{ord(ch) - 0xDC00:02x} at character {col}"
    return None


def read_claims(path: str | os.PathLike[str], fmt: str | None = None) -> Iterator[ClaimRow | BadRow]:
    """The rows of a claims file, in order: a :class:`ClaimRow` for each good one, a :class:`BadRow`
    (``file:line: reason``) for each malformed one."""
    p = Path(path)
    kind = _detect(p, fmt)
    seen: dict[str, int] = {}
    name = str(p)
    # undecodable bytes are kept as surrogates (one bad byte spoils its row, not the job) and reported per row
    try:
        fh = open(p, encoding="utf-8", errors="surrogateescape", newline="")
    except OSError as e:
        raise InputError(f"cannot read claims file {p}: {e.strerror or e}") from e
    with fh:
        if kind == "jsonl":
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                bad = _undecodable(line)
                if bad:
                    yield BadRow(name, line_no, bad)
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as e:
                    yield BadRow(name, line_no, f"not valid JSON: {e}")
                    continue
                yield _row(name, line_no, obj, seen)
            return
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            yield BadRow(name, 1, f"bad CSV header: {e}")
            return
        cols = [h.strip().lower() for h in header]
        if "id" not in cols or "claim" not in cols:
            raise InputError(f"{name}:1: the CSV header needs 'id' and 'claim' columns (got {header})")
        while True:
            start = reader.line_num + 1
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                yield BadRow(name, start, f"bad CSV row: {e}")
                continue
            if not any(c.strip() for c in cells):
                continue
            bad = _undecodable("".join(cells))
            if bad:
                yield BadRow(name, start, bad)
                continue
            if len(cells) != len(cols):
                yield BadRow(name, start, f"expected {len(cols)} cells ({', '.join(cols)}), got {len(cells)}")
                continue
            yield _row(name, start, dict(zip(cols, cells)), seen)


# ---------------------------------------------------------------------------------------------------------
# Shards
# ---------------------------------------------------------------------------------------------------------


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"i/n"`` -> ``(i, n)`` with ``0 <= i < n``."""
    if text is None:
        return None
    try:
        i_text, n_text = text.split("/")
        i, n = int(i_text), int(n_text)
    except ValueError:
        raise ConfigError(f"--shard takes i/n (e.g. 0/4), got {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise ConfigError(f"--shard {text}: need 0 <= i < n (shards are numbered from 0)")
    return i, n


def shard_of(key: str, n: int) -> int:
    """The shard of an id: stable across processes and machines (not Python's salted ``hash``)."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n


@dataclass(frozen=True)
class _Id:
    """A verdict's id, sharded as its claim's row is."""

    id: str
    line: int = 0


def _in_shard(row: ClaimRow | BadRow | _Id, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    key = row.id if row.id is not None else f"line:{row.line}"
    return shard_of(key, shard[1]) == shard[0]


# ---------------------------------------------------------------------------------------------------------
# The output file
# ---------------------------------------------------------------------------------------------------------


def read_verdicts(path: str | os.PathLike[str], *, repair: bool = False) -> tuple[list[dict[str, Any]], bool]:
    """The records of an output file, and whether its last line was partial. A partial last line (no final
    newline: a write cut short) is ignored, or cut off when ``repair``; any other bad line is an error."""
    p = Path(path)
    if not p.exists():
        return [], False
    data = p.read_bytes()
    partial = bool(data) and not data.endswith(b"\n")
    if partial:
        keep = data.rfind(b"\n") + 1
        if repair:
            with open(p, "r+b") as fh:
                fh.truncate(keep)
                fh.flush()
                os.fsync(fh.fileno())
        data = data[:keep]
    records = []
    for line_no, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise MalformedInputError(p, line_no, f"not a verdict line ({e}); fix or remove it, then resume") from e
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
            raise MalformedInputError(p, line_no, "not a verdict line (no string id); fix or remove it, then resume")
        records.append(rec)
    return records, partial


def _rewrite(path: Path, records: list[dict[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        for rec in records:
            fh.write(_line(rec))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")


class _Appender:
    """One ``os.write`` per line on an ``O_APPEND`` descriptor: a kill leaves at most one partial last line."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, record: dict[str, Any]) -> None:
        data = _line(record)
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    def close(self) -> None:
        try:
            os.fsync(self.fd)
        finally:
            os.close(self.fd)


# ---------------------------------------------------------------------------------------------------------
# The job
# ---------------------------------------------------------------------------------------------------------


def _record(row: ClaimRow, verdict: Verdict) -> dict[str, Any]:
    rec: dict[str, Any] = {"id": row.id, **verdict.to_dict()}
    if row.gold is not None:
        rec["gold"] = row.gold
        rec["correct"] = verdict.ok and is_correct(verdict.label, row.gold)
    return rec


def _verify_one(engine: Engine, row: ClaimRow, kw: dict[str, Any]) -> Verdict:
    try:
        return engine.verify(row.claim, pattern=row.pattern, raise_errors=False, **kw)
    except Exception as e:  # noqa: BLE001 - one claim's bug must not end a job of a million claims
        return Verdict(row.claim, reason=f"verification failed: {type(e).__name__}: {e}", failed_stage="unexpected",
                       error=str(e), error_type=type(e).__name__)


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    counts: Counter[str | None] = Counter()  # (a record without a label counts under None)
    methods: Counter[str] = Counter()
    confusion: dict[str, Counter[str | None]] = {}
    labeled = correct = 0
    for rec in records:
        pred = FAILED if rec.get("failed_stage") else rec.get("label")
        counts[pred] += 1
        if rec.get("method"):
            methods[rec["method"]] += 1
        gold = rec.get("gold")
        if gold is not None:
            labeled += 1
            correct += int(is_correct(pred, gold))
            confusion.setdefault(gold, Counter())[pred] += 1
    return {
        "verdicts": len(records),
        "counts": {name: counts.get(name, 0) for name in (*LABELS, FAILED)},
        "methods": dict(methods),
        "labeled": labeled,
        "correct": correct,
        "accuracy": round(correct / labeled, 4) if labeled else None,
        "confusion": {g: {name: c.get(name, 0) for name in (*LABELS, FAILED)} for g, c in sorted(confusion.items())},
    }


def run_verify_job(
    engine: Engine,
    claims: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    concurrency: int = 4,
    shard: tuple[int, int] | None = None,
    fmt: str | None = None,
    retry_failed: bool = False,
    progress: bool = True,
    echo: Callable[[str], None] | None = None,
    **verify_kw: Any,
) -> dict[str, Any]:
    """Verify the claims of ``claims`` (this shard's, those not yet in ``out``) into ``out``; the summary.

    ``verify_kw`` goes to :meth:`Engine.verify` (``k``, ``threshold``, match settings). ``echo`` receives the
    ``file:line: reason`` of malformed rows (default: stderr).

    Kept whole: one resumable run over one output file: ``records`` (read back, pruned of this shard's failed
    verdicts, appended to per verdict) and the counters of every phase (rows, malformed, already done, retried,
    verified, failed) all end in the one summary, and the pool, bar and appender are closed in one try/finally.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a positive int, got {concurrency!r}")
    echo = echo or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out_path = Path(out)
    t_start = time.perf_counter()

    records, repaired = read_verdicts(out_path, repair=True)
    if repaired:
        echo(f"{out_path}: cut off a partial last line left by an interrupted run")
    dropped_failed = 0
    if retry_failed:  # this shard's failed verdicts only: another shard's are its own run's to retry
        kept = [r for r in records if not r.get("failed_stage") or not _in_shard(_Id(r["id"]), shard)]
        dropped_failed = len(records) - len(kept)
        if dropped_failed:
            _rewrite(out_path, kept)
            records = kept
    done = {r["id"] for r in records}

    rows = bad = in_shard = skipped = 0
    bad_rows: list[str] = []
    todo: list[ClaimRow] = []
    for row in read_claims(claims, fmt):
        if isinstance(row, BadRow):
            if not _in_shard(row, shard):
                continue
            bad += 1
            if len(bad_rows) < 100:
                bad_rows.append(str(row))
            continue
        rows += 1
        if not _in_shard(row, shard):
            continue
        in_shard += 1
        if row.id in done:
            skipped += 1
            continue
        todo.append(row)
    if not rows:
        # nothing to verify is an error of the input, said once (not a job that "succeeds" with no verdict)
        why = f": every row is malformed ({bad:,}); first: {bad_rows[0]}" if bad else ": the file has no rows"
        raise InputError(f"{claims}: no claim to verify{why}")
    for text in bad_rows[:_MAX_ECHO]:
        echo(text)
    if bad > _MAX_ECHO:
        echo(f"... and {bad - _MAX_ECHO} more malformed row(s)")
    if todo and hasattr(engine, "require_kg"):
        engine.require_kg()  # a missing KG is one error, not a failed verdict per claim

    from tqdm import tqdm

    bar = tqdm(total=len(todo), desc="verify", unit="claim", disable=not progress, file=sys.stderr,
               dynamic_ncols=True)
    writer = _Appender(out_path)
    verified = failed_now = 0
    t_work = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="isorag-job")
    try:
        pending: dict[Future[Verdict], ClaimRow] = {}
        queue = iter(todo)
        window = concurrency * 2

        def fill() -> None:
            for row in queue:
                pending[pool.submit(_verify_one, engine, row, verify_kw)] = row
                if len(pending) >= window:
                    return

        fill()
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                row = pending.pop(fut)
                verdict = fut.result()
                rec = _record(row, verdict)
                writer.write(rec)
                records.append(rec)
                verified += 1
                failed_now += int(not verdict.ok)
                bar.update(1)
            fill()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        bar.close()
        writer.close()
    pool.shutdown(wait=True)
    work_s = time.perf_counter() - t_work

    summary: dict[str, Any] = {
        "claims": str(claims),
        "out": str(out_path),
        "shard": f"{shard[0]}/{shard[1]}" if shard else None,
        "rows": rows,
        "in_shard": in_shard,
        "malformed": bad,
        "malformed_rows": bad_rows,
        "already_done": skipped,
        "retried_failed": dropped_failed,
        "repaired_partial_line": repaired,
        "verified": verified,
        "failed": failed_now,
        "wall_s": round(time.perf_counter() - t_start, 3),
        "claims_per_s": round(verified / work_s, 3) if verified and work_s > 0 else None,
    }
    summary.update(summarize(records))
    return summary


def format_summary(summary: Mapping[str, Any]) -> str:
    """The summary as text: counts, accuracy and the confusion matrix (gold rows, verdict columns)."""
    buf = io.StringIO()
    shard = f" (shard {summary['shard']})" if summary.get("shard") else ""
    print(f"claims {summary['claims']}{shard} -> {summary['out']}", file=buf)
    print(f"  rows {summary['rows']:,}  in shard {summary['in_shard']:,}  malformed {summary['malformed']:,}  "
          f"already done {summary['already_done']:,}  verified now {summary['verified']:,}"
          + (f" ({summary['claims_per_s']:.2f} claims/s)" if summary.get("claims_per_s") else ""), file=buf)
    counts = summary["counts"]
    print("  verdicts " + "  ".join(f"{k} {v:,}" for k, v in counts.items()) + f"  (total {summary['verdicts']:,})",
          file=buf)
    if summary.get("labeled"):
        print(f"  accuracy {summary['accuracy']:.4f} ({summary['correct']:,} of {summary['labeled']:,} labeled)",
              file=buf)
        cols = [*LABELS, FAILED]
        width = max(len(c) for c in cols) + 2
        print("  gold \\ verdict".ljust(22) + "".join(c.rjust(width) for c in cols), file=buf)
        for gold, row in summary["confusion"].items():
            print(f"  {gold}".ljust(22) + "".join(f"{row.get(c, 0):,}".rjust(width) for c in cols), file=buf)
    return buf.getvalue().rstrip("\n")
