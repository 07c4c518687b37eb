"""``common.paths.write_whole``: a file written whole or not at all, each writer through a
temporary file of its own, so writers of the same file at once all finish (the last rename
wins) and leave nothing behind; and the build traces made that way (``trace_for_context``),
which two test workers once made at once, one failing to rename the other's temporary file."""
import stat

import pytest

from common.paths import write_whole
from tests.traces.helpers import TINY
from traces import synth
from traces.io import read_trace


def test_text_and_writer_functions(tmp_path):
    write_whole(tmp_path / "a.txt", "text")
    write_whole(tmp_path / "b.txt", lambda tmp: tmp.write_text("by a function"), suffix=".tmp.txt")
    assert (tmp_path / "a.txt").read_text() == "text"
    assert (tmp_path / "b.txt").read_text() == "by a function"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]
    # The mode open() gives a new file (the temporary file is made 0600).
    (tmp_path / "plain.txt").write_text("")
    want = stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode)
    assert {stat.S_IMODE((tmp_path / n).stat().st_mode) for n in ("a.txt", "b.txt")} == {want}


def test_a_writer_finishing_first_does_not_break_the_other(tmp_path):
    path = tmp_path / "same.txt"
    write_whole(path, lambda tmp: (write_whole(path, "inner"), tmp.write_text("outer")))
    assert path.read_text() == "outer"
    assert [p.name for p in tmp_path.iterdir()] == ["same.txt"]


def test_a_failed_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "kept.txt"
    path.write_text("old")

    def fail(tmp):
        tmp.write_text("half")
        raise OSError("disk full")
    with pytest.raises(OSError, match="disk full"):
        write_whole(path, fail)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["kept.txt"]


def test_two_makers_of_one_build_trace_both_finish(tmp_path, monkeypatch):
    tiny = read_trace(TINY)
    monkeypatch.setattr(synth, "BUILD", tmp_path)
    monkeypatch.setattr(synth, "synthesize", lambda *args, **kwargs: tiny)
    made_meanwhile, write_trace = [], synth.write_trace

    def racing(path, *made):
        write_trace(path, *made)
        if not made_meanwhile:      # another process makes the same trace before this renames
            made_meanwhile.append(None)
            made_meanwhile[0] = synth.trace_for_context("opt-66b+opt-1.3b", 10 ** 6)
    monkeypatch.setattr(synth, "write_trace", racing)
    path = synth.trace_for_context("opt-66b+opt-1.3b", 10 ** 6)
    assert path == made_meanwhile[0] and path.name == "opt-66b+opt-1.3b.synth.context1000000.jsonl.gz"
    assert read_trace(path)[1] == tiny[1]
    assert [p.name for p in (tmp_path / "traces").iterdir()] == [path.name]
