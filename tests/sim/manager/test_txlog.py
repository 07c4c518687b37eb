import json

import pytest

from common.errors import SaddleError
from common.paths import CONFIGS
from hw.flow.manager_random import generate_with_events
from sim.cli import main
from sim.manager import ManagerConfig
from sim.manager.transactions import Drafted
from sim.manager.txlog import read_txlog, replay, write_txlog
from tests.sim.manager.helpers import config

SMALL = config(shared_entries=6, eager_entries=4)


def test_config_survives_the_header():
    for cfg in (SMALL, ManagerConfig.load(), ManagerConfig.load(CONFIGS / "manager_small.yaml")):
        assert ManagerConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_write_read_replay_round_trip(tmp_path):
    pairs, _ = generate_with_events(SMALL, 4, 1500)
    path = tmp_path / "run.jsonl"
    write_txlog(path, SMALL, pairs)
    log = read_txlog(path)
    assert log.config == SMALL and log.entries == pairs
    assert replay(log) is None
    first = path.read_bytes()
    write_txlog(path, SMALL, generate_with_events(SMALL, 4, 1500)[0])
    assert path.read_bytes() == first                       # same seed, same bytes


def test_replay_reports_the_first_differing_line(tmp_path):
    pairs, _ = generate_with_events(SMALL, 4, 400)
    index = next(i for i, (_, ev) in enumerate(pairs) if isinstance(ev[0], Drafted))
    txn, events = pairs[index]
    d = events[0]
    pairs[index] = (txn, [Drafted(d.request, d.position, d.pool, d.h + 1, d.stop)] + events[1:])
    path = tmp_path / "bad.jsonl"
    write_txlog(path, SMALL, pairs)
    mismatch = replay(read_txlog(path))
    assert mismatch is not None and mismatch.line == index + 2 and mismatch.actual == events
    assert f"line {index + 2}" in mismatch.describe()


def test_inputs_only_log_replays_without_comparison(tmp_path):
    pairs, _ = generate_with_events(SMALL, 5, 300)
    path = tmp_path / "in.jsonl"
    write_txlog(path, SMALL, ((txn, None) for txn, _ in pairs))
    log = read_txlog(path)
    assert all(out is None for _, out in log.entries)
    assert replay(log) is None


@pytest.mark.parametrize("lines, match", [
    (['{"format":"other","version":1,"config":{}}'], ":1: expected a header"),
    (['not json'], ":1: invalid JSON"),
    (["HEADER", '{"in":{"type":"Unlock"},"x":1}'], ":2: expected an object with 'in'"),
    (["HEADER", '{"in":{"type":"Admit","request":0}}'], ":2: in: Admit: missing key 'microbatch'"),
    (["HEADER", '{"in":{"type":"Retired","request":0}}'], ":2: in: Retired is an output"),
    (["HEADER", '{"in":{"type":"Unlock"},"out":[{"type":"Unlock"}]}'], ":2: out: holds an input"),
    ([], "empty transaction log"),
])
def test_bad_logs_name_file_and_line(tmp_path, lines, match):
    header = json.dumps({"format": "saddle-manager-txlog", "version": 1, "config": SMALL.to_dict()})
    path = tmp_path / "log.jsonl"
    path.write_text("".join(line.replace("HEADER", header) + "\n" for line in lines))
    with pytest.raises(SaddleError, match=match):
        read_txlog(path)


def test_cli_random_then_replay(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert main(["hw", "random", "--seed", "2", "--length", "800", "--config",
                 str(CONFIGS / "manager_small.yaml"), "--out", str(out)]) == 0
    assert "pending': 0" in capsys.readouterr().out
    assert main(["manager", "replay", str(out)]) == 0
    assert "all identical" in capsys.readouterr().out
    lines = out.read_text().splitlines()
    entry = json.loads(lines[5])
    entry["out"] = []                                   # every input has at least one event
    lines[5] = json.dumps(entry)
    out.write_text("\n".join(lines) + "\n")
    assert main(["manager", "replay", str(out)]) == 1
    assert "outputs differ at line 6" in capsys.readouterr().out
    assert main(["manager", "replay", str(tmp_path / "missing.jsonl")]) == 2


def _header(tmp_path):
    path = tmp_path / "good.jsonl"
    assert main(["hw", "random", "--length", "5", "--out", str(path)]) == 0
    return path.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("body,message", [
    (b"\x89PNG\r\n\x1a\n\x00\xff", "{p}:1: not UTF-8 text (byte 0x89 at column 1): a transaction log "
                                   "is JSON Lines, one JSON object per line"),
    (b"hello world\n", "{p}:1: invalid JSON: Expecting value (column 1)"),
    ("HEADER" + '{"in": 1, "in": 2}\n', "{p}:2: key 'in' given twice"),
    ("HEADER" + 'ok\n', "{p}:2: invalid JSON: Expecting value (column 1)"),
    (b"HEADER{\"in\": \"\xe9\"}\n", "{p}:2: not UTF-8 text (byte 0xe9 at column 9): a transaction "
                                    "log is JSON Lines, one JSON object per line"),
], ids=["binary", "text", "duplicate-key", "bad-second-line", "latin-1"])
def test_replay_of_a_file_that_is_not_a_log_is_one_line(tmp_path, capsys, body, message):
    header = _header(tmp_path)[0]
    if isinstance(body, str):
        body = body.encode()
    path = tmp_path / "bad.jsonl"
    path.write_bytes(body.replace(b"HEADER", header))
    capsys.readouterr()
    assert main(["manager", "replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"saddle: error: {message.format(p=path)}\n"


def test_replay_of_a_directory_says_so(tmp_path, capsys):
    assert main(["manager", "replay", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"saddle: error: {tmp_path}: is a directory, expected a "
                                       "transaction log (.jsonl)\n")
