"""docs/results/ holds the logs docs/results.md cites and nothing else (git history keeps the rest): every file there
is named by a citation, a backticked path relative to docs/results/ (``2026-12-02d/gpu_tier.log``), a name after
such a path on the same line (its folder), a shell pattern (``san_*.log``), a brace list (``rms_{bf16,fp32}.log``) or
a placeholder (``decoder_ab_<shape>.log``); and every citation names a file."""

import fnmatch
import itertools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"


def _expand(token: str) -> list[str]:
    parts = re.split(r"(\{[^{}]*\})", re.sub(r"<[^<>]*>", "*", token))
    choices = [p[1:-1].split(",") if p.startswith("{") else [p] for p in parts]
    return ["".join(c) for c in itertools.product(*choices)]


def _citations() -> list[tuple[int, str]]:
    """(line, pattern relative to docs/results) for every citation in docs/results.md."""
    found = []
    for number, line in enumerate((ROOT / "docs" / "results.md").read_text().splitlines(), 1):
        folder = None
        for token in re.findall(r"`([^`\s]+)`", line):
            token = token.removeprefix("docs/results/")
            if "/" in token and re.match(r"\d{4}-\d\d-\d\d", token):
                folder = token.split("/")[0]
                found += [(number, p) for p in _expand(token)]
            elif folder is not None and re.search(r"\.(log|txt|patch|csv|json|md)$", token):
                found += [(number, f"{folder}/{p}") for p in _expand(token)]
    return found


def _files() -> set[str]:
    return {str(f.relative_to(RESULTS)) for f in RESULTS.rglob("*") if f.is_file()}


def test_every_file_in_docs_results_is_cited():
    files = _files()
    cited = {f for _, pattern in _citations() for f in fnmatch.filter(files, pattern)}
    assert sorted(files - cited) == [], "docs/results.md cites none of these: remove them (git history keeps them)"


def test_every_citation_names_a_file():
    files = _files()
    dangling = [f"line {n}: {p}" for n, p in _citations() if not fnmatch.filter(files, p)]
    assert dangling == [], "docs/results.md cites files docs/results/ does not hold"
