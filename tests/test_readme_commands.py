"""Every `saddle ...` command the READMEs and docs show still parses, and every experiment they
run still loads (every check a run makes before it simulates: names, values, trace files, splits,
request counts, sequence lengths), so a renamed option or a workload a trace cannot serve fails
here, not in a user's terminal. Synopses (``[--json]``, ``FILE``, ``...``) are checked for their
option names; concrete commands are parsed whole."""
from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from sim.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted(ROOT.glob("*/README.md")),
        *sorted(ROOT.glob("*/*/README.md")), *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"`(saddle(?: [^`]*)?)`")
# A synopsis: optional or alternative parts, placeholders in capitals, elisions.
SYNOPSIS = re.compile(r"[\[\](|]|\.\.\.| / |\b[A-Z][A-Z_]+\b")


def _commands() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for text in COMMAND.findall(line):
                found.append((f"{doc.relative_to(ROOT)}:{number}", text.replace("\\|", "|")))
    return found


COMMANDS = _commands()


class _ParseError(Exception):
    pass


def _strict(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` and its subparsers raise instead of printing and exiting."""
    def error(message: str):
        raise _ParseError(message)
    parser.error = error    # type: ignore[method-assign]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _strict(sub)


def _subparser(parser: argparse.ArgumentParser, words: list[str]):
    """The deepest subcommand parser ``words`` name, and the words after it."""
    while words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or words[0] not in subs[0].choices:
            break
        parser, words = subs[0].choices[words[0]], words[1:]
    return parser, words


def test_the_docs_show_commands():
    assert len(COMMANDS) > 40
    assert any(text.startswith("saddle run real-trace") for _, text in COMMANDS)


@pytest.mark.parametrize("where, text", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_documented_command_parses(where, text):
    parser = build_parser()
    _strict(parser)
    words = shlex.split(text)[1:]
    sub, rest = _subparser(parser, words)
    options = {o for a in sub._actions for o in a.option_strings}
    for word in rest:
        if word.startswith("-") and word.split("=")[0] not in options:
            pytest.fail(f"{where}: `{text}`: {word} is not an option of "
                        f"`{sub.prog}` (it has {sorted(options)})")
    if SYNOPSIS.search(" ".join(words)) or words in (["--help"], ["--version"]) \
            or (rest and rest[-1] == "--help"):
        return
    try:
        args = parser.parse_args(words)
    except _ParseError as exc:
        if "the following arguments are required" in str(exc):
            return      # prose naming a command ("run `saddle sweep` on ..."), not a command line
        pytest.fail(f"{where}: `{text}`: {exc}")
    if getattr(args, "command", None) == "run":
        from sim.experiments.grid import load_experiment, resolve_path
        load_experiment(resolve_path(args.file), trace=args.trace, requests=args.requests)
