"""The documentation is reference, not a lab notebook: each README at most 500 lines, no commit
hashes in a README or the changelog (history goes to CHANGELOG.md, dated, without hashes), and
no reference to a file outside the repository."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_README_LINES = 500
MAX_ARCHITECTURE_LINES = 200

# The READMEs of the project's parts, with the line limit.
PART_READMES = [
    "README.md",
    "sim/README.md",
    "traces/README.md",
    "validation/README.md",
    "hw/README.md",
]

# A commit hash as prose cites one: 7 to 40 hex digits as a whole word, with at least one digit
# and one letter (so neither a plain number nor an English word). A full sha256 digest is 64
# digits and never matches; a shorter digest labelled "sha256" just before it is allowed.
HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
SHA256_LABEL = re.compile(r"sha256\W{0,3}$", re.IGNORECASE)
BINARY = (".gz", ".png", ".npz", ".gguf")


def tracked_files() -> list[str]:
    """Files under version control (relative paths); the test is skipped outside a checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [p for p in out.decode().split("\0") if p]


def readmes() -> list[str]:
    found = sorted(p for p in tracked_files() if Path(p).name == "README.md")
    return found or ["README.md"]


def commit_hashes(text: str) -> list[str]:
    """Every word of ``text`` that looks like a commit hash, with its line number."""
    hits = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in HASH.finditer(line):
            if not SHA256_LABEL.search(line[:m.start()]):
                hits.append(f"line {n}: {m.group()}")
    return hits


def test_the_hash_pattern():
    assert commit_hashes("merged in `e97403a` and c60005143a6b492d7ef83231723386478b59a506") == [
        "line 1: e97403a", "line 1: c60005143a6b492d7ef83231723386478b59a506"]
    assert commit_hashes("1234567 requests, a deadbeef, fc_slack, b128, 0.7 s, 3e8") == []
    assert commit_hashes("sha256 1a2b3c4d5e6f, trace_sha256: 9f86d08") == []
    assert commit_hashes("a" * 63 + "1") == []


@pytest.mark.parametrize("path", PART_READMES)
def test_part_readme_is_at_most_500_lines(path):
    lines = (ROOT / path).read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"{path}: {lines} lines (at most {MAX_README_LINES})"


def test_architecture_is_at_most_200_lines():
    path = ROOT / "ARCHITECTURE.md"
    if not path.exists():
        pytest.skip("ARCHITECTURE.md not written yet")
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_ARCHITECTURE_LINES, f"ARCHITECTURE.md: {lines} lines"


@pytest.mark.parametrize("path", ["CHANGELOG.md", *readmes()])
def test_no_commit_hash_in_readmes_and_changelog(path):
    hits = commit_hashes((ROOT / path).read_text(encoding="utf-8"))
    assert not hits, f"{path}: commit hashes ({', '.join(hits)}); history goes to CHANGELOG.md"


def test_changelog_is_dated_newest_first():
    dates = re.findall(r"^## (\d{4}-\d{2}-\d{2})\s*$",
                       (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert dates, "CHANGELOG.md: no dated sections (## YYYY-MM-DD)"
    assert dates == sorted(dates, reverse=True), "CHANGELOG.md: sections not newest first"


def test_no_reference_to_the_design_file_outside_the_repository():
    hits = []
    for path in tracked_files():
        if path.startswith("tests/") or path.endswith(BINARY):
            continue
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue                      # binary files (traces, figures)
        hits += [f"{path}:{n}" for n, line in enumerate(text.splitlines(), 1)
                 if "DESIGN.md" in line]
    assert not hits, "cite the paper, SADDLE (HPCA 2026), instead: " + ", ".join(hits)
