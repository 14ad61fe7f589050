"""Benchmark results on disk and on screen: the CSV of results (with the environment) beside the list of what
did not run, and the printed tables."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torchtrt_plugins.benchmarks.environment import Environment
from torchtrt_plugins.benchmarks.timing import Timing, gbps, pct_of_copy

#: Columns of a results CSV, in order: the record format (docs/benchmarks.md) of both the run's own
#: ``<out>/results.csv`` and the record that ``bench --record PATH`` appends to. Columns are only ever added at the end.
COLUMNS = (
    "op",
    "provider",
    "shape",
    "dtype",
    "median_ms",
    "p20_ms",
    "p80_ms",
    "gbps",
    "pct_of_copy",
    "gpu",
    "torch",
    "cuda",
    "tensorrt",
    "timestamp",
    "timer",
    "repeats",
    "placements",
    "commit",
)
#: What a file written before a column was added reads as in that column.
ADDED_COLUMN_DEFAULTS = {"timer": "do_bench", "repeats": "1", "placements": "1", "commit": ""}
#: Results CSVs written before the timer and repeats columns.
LEGACY_COLUMNS = COLUMNS[:-4]
#: Results CSVs written before the placements column.
REPEATS_COLUMNS = COLUMNS[:-2]
#: Results CSVs written before the commit column.
PLACEMENTS_COLUMNS = COLUMNS[:-1]
#: Columns of the file listing what did not run (next to the results CSV).
NOT_RUN_COLUMNS = ("op", "provider", "shape", "dtype", "device", "status", "reason", "timestamp")
NOT_RUN_FILE = "skipped.csv"
DEFAULT_CSV = Path("bench_results") / "results.csv"
#: The source checkout's record of measured runs, relative to its root (``bench --record`` appends to it).
RECORD_CSV = Path("benchmarks") / "data" / "results.csv"


@dataclass
class Result:
    op: str
    provider: str
    shape: str
    dtype: str
    device: str
    status: str  # ok | mismatch | skipped | error
    reason: str = ""
    timing: Timing | None = None
    nbytes: int | None = None
    copy_ms: float | None = None
    timer: str = "do_bench"
    repeats: int = 1  # timings a placement
    placements: int = 1  # placements of the buffers (the timing is over repeats x placements timings)

    @property
    def timed(self) -> bool:
        return self.timing is not None

    @property
    def gbps(self) -> float | None:
        if self.timer == "host":  # host time says nothing of bandwidth
            return None
        return gbps(self.nbytes, self.timing.median_ms if self.timing else None)

    @property
    def pct_of_copy(self) -> float | None:
        if self.timer == "host":
            return None
        return pct_of_copy(self.timing.median_ms if self.timing else None, self.copy_ms)

    def row(self, env: Environment) -> dict[str, str]:
        timing = self.timing
        return {
            "op": self.op,
            "provider": self.provider,
            "shape": self.shape,
            "dtype": self.dtype,
            "median_ms": _fmt(timing.median_ms if timing else None, ".6g"),
            "p20_ms": _fmt(timing.p20_ms if timing else None, ".6g"),
            "p80_ms": _fmt(timing.p80_ms if timing else None, ".6g"),
            "gbps": _fmt(self.gbps, ".2f"),
            "pct_of_copy": _fmt(self.pct_of_copy, ".1f"),
            "gpu": env.gpu,
            "torch": env.torch,
            "cuda": env.cuda,
            "tensorrt": env.tensorrt,
            "timestamp": env.timestamp,
            "timer": self.timer,
            "repeats": str(self.repeats),
            "placements": str(self.placements),
            "commit": env.commit,
        }


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def format_shape(shape: Sequence[int]) -> str:
    return "x".join(str(int(d)) for d in shape)


def format_bytes(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


# ------------------------------------------------------------------------------------------ CSV


def write_results(
    results: Sequence[Result], env: Environment, path: os.PathLike | None = None, record: os.PathLike | None = None
) -> Path:
    """Append the timed results to the CSV (header written once) and what did not run to skipped.csv beside it; with
    ``record``, append the timed results to that CSV too (the record of runs kept across them)."""
    path = Path(path) if path else DEFAULT_CSV
    timed = [r.row(env) for r in results if r.timed]
    for target in (path, Path(record)) if record else (path,):
        _upgrade(target)
        _append(target, COLUMNS, timed)
    not_run = [
        {
            "op": r.op,
            "provider": r.provider,
            "shape": r.shape,
            "dtype": r.dtype,
            "device": r.device,
            "status": r.status,
            "reason": r.reason,
            "timestamp": env.timestamp,
        }
        for r in results
        if r.status != "ok"
    ]
    _append(path.with_name(NOT_RUN_FILE), NOT_RUN_COLUMNS, not_run)
    return path


def _older_columns(columns: Sequence[str]) -> bool:
    """Whether ``columns`` are a results CSV's of an earlier version: today's, less columns added since."""
    columns = tuple(columns)
    missing = COLUMNS[len(columns) :]
    return columns == COLUMNS[: len(columns)] and bool(missing) and set(missing) <= set(ADDED_COLUMN_DEFAULTS)


def _upgrade(path: Path) -> None:
    """A results CSV written by an earlier version (fewer columns) rewritten with today's, its rows kept."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, newline="") as handle:
        header = tuple(next(csv.reader(handle), []))
    if _older_columns(header):
        rows = read_results(path)
        upgraded = path.with_name(path.name + ".upgrading")
        with open(upgraded, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(COLUMNS))
            writer.writeheader()
            writer.writerows(rows)
        os.replace(upgraded, path)  # an interrupted upgrade leaves the old file whole


def _append(path: Path, columns: Sequence[str], rows: Sequence[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = not path.is_file() or path.stat().st_size == 0
    if not fresh:
        with open(path, newline="") as handle:
            header = next(csv.reader(handle), [])
        if tuple(header) != tuple(columns):
            raise ValueError(
                f"{path} has columns {header}, expected {list(columns)}; write to another file or move it away"
            )
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        if fresh:
            writer.writeheader()
        writer.writerows(rows)


def read_results(path: os.PathLike) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        columns = tuple(reader.fieldnames or ())
        if _older_columns(columns):
            added = {name: ADDED_COLUMN_DEFAULTS[name] for name in COLUMNS[len(columns) :]}
            return [dict(row, **added) for row in reader]
        if columns != COLUMNS:
            raise ValueError(f"{path} is not a results CSV: columns {reader.fieldnames}, expected {list(COLUMNS)}")
        return list(reader)


# ------------------------------------------------------------------------------------------ report


def format_table(results: Sequence[Result]) -> str:
    """One block per case: the copy first, then each provider's time, GB/s and % of copy."""
    lines = []
    cases: dict[tuple[str, str, str, str, str], list[Result]] = {}
    for r in results:
        cases.setdefault((r.op, r.dtype, r.shape, r.device, r.timer), []).append(r)
    header = f"    {'provider':<30} {'median ms':>11} {'p20-p80 ms':>21} {'GB/s':>9} {'% copy':>7}  status"
    # With repeats, p20-p80 is the spread of the repeats' medians.
    for (op, dtype, shape, device, _timer), rows in cases.items():
        timed = [r for r in rows if r.timed]
        if not timed:
            continue
        nbytes = next((r.nbytes for r in timed if r.nbytes), None)
        moved = f"  {format_bytes(nbytes)} moved" if nbytes else ""
        how = f"  timer={timed[0].timer}" + (f" x{timed[0].repeats} repeats" if timed[0].repeats > 1 else "")
        how += f" on {timed[0].placements} placements" if timed[0].placements > 1 else ""
        lines.append(f"{op}  {dtype}  {shape}  device={device}{moved}{how}")
        lines.append(header)
        for r in timed:
            t = r.timing
            spread = f"{t.p20_ms:.4g}-{t.p80_ms:.4g}"
            status = "" if r.status == "ok" else f"{r.status.upper()}: {r.reason}"
            lines.append(
                f"    {r.provider:<30} {t.median_ms:>11.4g} {spread:>21} {_fmt(r.gbps, '.1f'):>9} "
                f"{_fmt(r.pct_of_copy, '.0f'):>7}  {status}".rstrip()
            )
        lines.append("")
    return "\n".join(lines)


def format_not_run(results: Sequence[Result]) -> str:
    """What did not run, one line per (op, provider, status, reason), with how many cases it covers."""
    groups: dict[tuple[str, str, str, str], int] = {}
    for r in results:
        if r.status in ("skipped", "error"):
            key = (r.op, r.provider, r.status, r.reason)
            groups[key] = groups.get(key, 0) + 1
    if not groups:
        return ""
    lines = ["Not run:"]
    for (op, provider, status, reason), count in groups.items():
        cases = f"{count} case{'s' if count > 1 else ''}"
        lines.append(f"  {op:<14} {provider:<30} {status:<8} ({cases}): {reason}")
    return "\n".join(lines)
