"""Plots from a results CSV: time vs size per provider, and % of copy bandwidth per provider, one
figure pair per (op, dtype, device). Where a row was measured more than once, the latest wins.

    python -m torchtrt_plugins.benchmarks.plot [bench_results/results.csv] [--out bench_results/]

Needs matplotlib (pip install matplotlib, or pip install -e '.[bench]').
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from torchtrt_plugins.benchmarks.common import COPY_PROVIDER, DEFAULT_CSV, parse_shape, read_results

MISSING_MATPLOTLIB = "matplotlib is not installed, so no plots were drawn (pip install matplotlib)"
#: The target for memory-bound ops (DESIGN.md): within 5% of the copy rate.
TARGET_PCT = 95.0


def latest(rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """One row per (op, provider, shape, dtype, gpu): the most recent."""
    chosen: dict[tuple[str, ...], dict[str, str]] = {}
    for row in rows:
        key = (row["op"], row["provider"], row["shape"], row["dtype"], row["gpu"])
        if key not in chosen or row["timestamp"] >= chosen[key]["timestamp"]:
            chosen[key] = row
    return list(chosen.values())


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", text).strip("_")


def _size(shape: str) -> int:
    return math.prod(parse_shape(shape))


def _series(rows: Sequence[dict[str, str]], column: str) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        if row[column]:
            series.setdefault(row["provider"], []).append((_size(row["shape"]), float(row[column])))
    return {provider: sorted(points) for provider, points in series.items()}


def _draw(plt, series, ticks: dict[int, str], title: str, ylabel: str, path: Path, log_y: bool, target=None) -> Path:
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for provider, points in series.items():
        style = dict(linestyle="--", color="black") if provider == COPY_PROVIDER else {}
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=provider, **style)
    if target is not None:
        ax.axhline(target, color="grey", linewidth=0.8, linestyle=":", label=f"target {target:g}%")
    ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.set_xticks(list(ticks), [ticks[t] for t in ticks], rotation=30, ha="right")
    ax.minorticks_off()
    ax.set_xlabel("shape (log of element count)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot(csv_path: Path | str = DEFAULT_CSV, out_dir: Path | str | None = None) -> list[Path]:
    """Draw the PNGs next to the CSV (or into ``out_dir``); returns their paths. ImportError without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError(MISSING_MATPLOTLIB) from err
    csv_path = Path(csv_path)
    out = Path(out_dir) if out_dir is not None else csv_path.parent
    out.mkdir(parents=True, exist_ok=True)
    rows = latest(read_results(csv_path))
    groups: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault((row["op"], row["dtype"], row["gpu"]), []).append(row)
    several_devices = len({gpu for _, _, gpu in groups}) > 1
    written = []
    for (op, dtype, gpu), group in sorted(groups.items()):
        shapes: dict[int, dict[str, None]] = {}
        for row in group:
            shapes.setdefault(_size(row["shape"]), {})[row["shape"]] = None
        ticks = {size: "/".join(names) for size, names in sorted(shapes.items())}
        stem = "_".join([_slug(op), dtype] + ([_slug(gpu)] if several_devices else []))
        title = f"{op} {dtype} on {gpu} ({max(row['timestamp'] for row in group)})"
        written.append(
            _draw(
                plt,
                _series(group, "median_ms"),
                ticks,
                f"{title}\nmedian time, lower is better",
                "ms",
                out / f"{stem}_time.png",
                log_y=True,
            )
        )
        pct = _series(group, "pct_of_copy")
        if pct:
            written.append(
                _draw(
                    plt,
                    pct,
                    ticks,
                    f"{title}\nbandwidth as % of a same-size device copy, higher is better",
                    "% of copy",
                    out / f"{stem}_pct_of_copy.png",
                    log_y=False,
                    target=TARGET_PCT,
                )
            )
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Draw PNG plots from a benchmark results CSV.")
    parser.add_argument("csv", nargs="?", default=str(DEFAULT_CSV), help=f"results CSV (default {DEFAULT_CSV})")
    parser.add_argument("--out", help="folder for the PNGs (default: the CSV's folder)")
    args = parser.parse_args(argv)
    try:
        paths = plot(args.csv, args.out)
    except ImportError as err:
        print(err, file=sys.stderr)
        return 1
    except (OSError, ValueError) as err:
        print(f"cannot plot {args.csv}: {err}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
