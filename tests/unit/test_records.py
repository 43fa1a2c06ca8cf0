"""The record codec and every recipe's record decoders, fed hostile bytes: only NodeDataError.

Pure tables (no server): each decoder gets huge integers, deep nesting,
out-of-range numbers and times, NaN and Infinity, lone surrogates, bytes that
are not UTF-8, oversized data, wrong types, missing and extra fields and
valid JSON of the wrong shape, and must raise `NodeDataError` carrying the
node's path -- never a builtin exception.  Then every record a recipe's
encoder writes reads back to the same value, in the same bytes as before the
codec existed (Java services and earlier versions read these nodes).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiocoord
from aiocoord import ConfigError, NodeDataError, Worker
from aiocoord import _records as records
from aiocoord._records import MAX_DEPTH, RecordEncodeError, dump, load, load_record
from aiocoord.recipes.cas_lock import _record as cas
from aiocoord.recipes.leader_latch._nodes import _decode as decode_participant
from aiocoord.recipes.task_leadership import _records as tasks
from aiocoord.recipes.task_leadership import maven_version_key
from aiocoord.scheduler import _records as sched
from aiocoord.zk.client import MAX_DATA

PATH = "/app/node"
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)

Decoder = Callable[[str, bytes], object]

DECODERS: dict[str, Decoder] = {
    "load": load,
    "load_record": load_record,
    "load_text": lambda path, data: records.load_text(path, data, "id"),
    "task worker": lambda path, data: tasks.decode_worker(path, "w", data, maven_version_key),
    "task leader": tasks.decode_leader,
    "cas lock": cas.decode,
    "scheduler job": sched.decode_job,
    "scheduler result": sched.decode_result,
    "scheduler worker": sched.decode_worker,
    "latch participant": lambda path, data: decode_participant("/app", "node", data),
}

# A valid record of each JSON format, as a dict of field -> JSON text (so a field can be
# replaced by text that json.dumps would never write, such as NaN or a lone surrogate).
SHELLS: dict[str, dict[str, str]] = {
    "task worker": {
        "id": '"w"',
        "version": '"1.0"',
        "host": '"h"',
        "pid": "1",
        "started": "1700000000.5",
    },
    "task leader": {"id": '"w"', "version": '"1.0"'},
    "cas lock": {
        "format": '"aiocoord.cas-lock/1"',
        "state": '"held"',
        "owner": '"pod"',
        "holder": '"h"',
        "lease_expires": "1700000000.0",
        "token": "7",
        "last_run": '{"window":1699999200.0,"at":1699999300.0,"owner":"pod","token":5}',
        "last_failure": "null",
    },
    "scheduler job": {"v": "1", "name": '"job"', "payload": '{"n":1}', "submitted": "1.5"},
    "scheduler result": {
        "v": "1",
        "name": '"job"',
        "worker": '"w"',
        "finished": "2.5",
        "status": '"done"',
        "value": "1",
    },
    "scheduler worker": {
        "v": "1",
        "id": '"w"',
        "capacity": "2",
        "jobs": '["a"]',
        "draining": "false",
        "host": '"h"',
        "pid": "3",
    },
}

# What no field of any record may hold (each also poisons an ignored extra field).
HOSTILE_VALUES = [
    "1" * 5000,  # past Python's 4300-digit int/str limit
    "-" + "9" * 4001,
    "1e400",
    "-1e400",
    "NaN",
    "Infinity",
    "-Infinity",
    "[" * 100_000 + "]" * 100_000,  # RecursionError in json.loads
    '{"a":' * 5000 + "1" + "}" * 5000,
    '"\\ud800"',  # a lone surrogate
    '"x\\udfff"',
    '{"\\udc80":1}',
    '["ok","\\ude00"]',
]


def _shell(kind: str, **fields: str) -> bytes:
    shell = {**SHELLS[kind], **fields}
    body = ",".join(f"{json.dumps(k)}:{v}" for k, v in shell.items() if v != "<missing>")
    return ("{" + body + "}").encode()


def _decoded_or_refused(decoder: Decoder, data: bytes) -> object | None:
    """What `decoder` makes of `data`, or None if it refused with a NodeDataError for PATH."""
    try:
        return decoder(PATH, data)
    except NodeDataError as exc:
        error = exc
    assert error.path == PATH
    return None


def _refused(decoder: Decoder, data: bytes, path: str = PATH) -> NodeDataError:
    with pytest.raises(NodeDataError) as info:
        decoder(path, data)
    return info.value


# --- the codec -------------------------------------------------------------------------------

RAW_HOSTILE = [
    b"\xff\xfe\xfa",  # not UTF-8
    b"\xc3",  # truncated sequence
    b"\xed\xa0\x80",  # an encoded surrogate
    b'"caf\xe9"',  # Latin-1
    b"\xef\xbb\xbf{}",  # a byte-order mark
    b"",
    b"   ",
    b"not json",
    b"{",
    b'{"a":1} trailing',
    b'"\x00"',  # a raw control character in a string
    b"\x00" * 64,
    b" " * (MAX_DATA + 1),  # over the record size bound
    b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
    b"[" * MAX_DATA,
    *(v.encode() for v in HOSTILE_VALUES),
]


@pytest.mark.parametrize("data", RAW_HOSTILE, ids=lambda d: repr(d[:24]))
@pytest.mark.parametrize("kind", list(DECODERS))
def test_hostile_bytes_are_node_data_errors(kind: str, data: bytes) -> None:
    decoder = DECODERS[kind]
    if kind == "cas lock" and not data:
        assert decoder(PATH, data) is None  # an empty lock node is a free lock
        return
    if kind in ("load_text", "latch participant") and len(data) <= MAX_DATA:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            assert decoder(PATH, data) == text  # an id is any UTF-8 text, not JSON
            return
    error = _refused(decoder, data)
    assert error.path == PATH
    assert "\ud800" not in str(error) and str(error).isprintable()


@pytest.mark.parametrize(
    ("data", "value"),
    [
        (b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, None),
        (b'"' + b"[" * 500 + b'"', "[" * 500),  # brackets inside a string are not nesting
        (b'"\\ud83d\\ude00"', "\U0001f600"),  # a surrogate pair is one character
        (b'"\\\\ud800"', "\\ud800"),  # an escaped backslash, then letters
        (b"1" * 4000, int("1" * 4000)),
        (b"1e308", 1e308),
        (b"-0", 0),
        (b'{"a":1,"a":2}', {"a": 2}),
    ],
)
def test_load_accepts_what_is_within_bounds(data: bytes, value: object) -> None:
    loaded = load(PATH, data)
    if value is not None:
        assert loaded == value


def test_load_record_wants_an_object_and_names_nested_fields() -> None:
    for data in (b"[]", b"1", b'"x"', b"null", b"true"):
        assert "not a record" in _refused(load_record, data).reason
    record = load_record(PATH, b'{"a":{"b":"x"},"n":null}')
    with pytest.raises(NodeDataError, match=r"field 'a\.b' must be an integer, not a string"):
        record.record("a").get("b", records.integer(0, 1))
    assert record.maybe_record("n") is None and record.maybe_record("gone") is None
    assert record.get("gone", records.TEXT, "dflt") == "dflt"
    with pytest.raises(NodeDataError, match="field 'gone' is missing"):
        record.value("gone")


@pytest.mark.parametrize(
    ("reader", "value"),
    [
        (records.TEXT, 1),
        (records.FLAG, 1),
        (records.FLAG, "true"),
        (records.INT64, True),
        (records.INT64, 1.0),
        (records.INT64, 2**63),
        (records.integer(1, 5), 0),
        (records.number(0, 1), 10**400),
        (records.number(0, 1), True),
        (records.TIMESTAMP, 1e20),
        (records.TIMESTAMP, -1e20),
        (records.TIMESTAMP, 10**400),
        (records.one_of("a", "b"), "c"),
        (records.one_of("a", "b"), ["a"]),
        (records.list_of(records.TEXT), "abc"),
        (records.list_of(records.TEXT), ["a", 1]),
    ],
)
def test_readers_refuse_wrong_types_and_ranges(reader: records.Reader[Any], value: object) -> None:
    record = records.Record(PATH, {"f": value})
    error = _refused(lambda path, data: record.get("f", reader), b"")
    assert error.path == PATH and error.reason.startswith("field 'f' ")


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, "\udc80", {"k": "a\ud800"}, {"\udfff": 1}, 10**4000],
    ids=repr,
)
def test_dump_refuses_what_load_would_refuse(value: object) -> None:
    with pytest.raises(RecordEncodeError):
        dump(value)
    assert issubclass(RecordEncodeError, ValueError)


def test_dump_refuses_deep_and_circular_values() -> None:
    deep: list[Any] = []
    for _ in range(MAX_DEPTH):
        deep = [deep]
    with pytest.raises(RecordEncodeError, match="deep"):
        dump(deep)
    assert load(PATH, dump(deep[0])) == deep[0]
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(RecordEncodeError, match="deep"):
        dump(loop)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=12,
)


@FUZZ
@given(JSON_VALUES, st.booleans(), st.booleans())
def test_dump_then_load_round_trips_in_json_dumps_bytes(
    value: object, sort_keys: bool, ensure_ascii: bool
) -> None:
    data = dump(value, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
    expected = json.dumps(
        value, separators=(",", ":"), sort_keys=sort_keys, ensure_ascii=ensure_ascii
    )
    assert data == expected.encode()
    assert load(PATH, data) == value


@FUZZ
@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_node_data_error(data: bytes) -> None:
    for decoder in DECODERS.values():
        _decoded_or_refused(decoder, data)


# --- each recipe's records: hostile fields ---------------------------------------------------

WRONG: dict[str, list[dict[str, str]]] = {
    "task worker": [
        {"id": '"other"'},
        {"id": "<missing>"},
        {"id": "1"},
        {"version": '""'},
        {"version": '"9 9"'},  # cannot be ordered
        {"version": "1.0"},
        {"host": "<missing>"},
        {"host": "null"},
        {"pid": "true"},
        {"pid": "1.5"},
        {"pid": str(2**63)},
        {"started": '"now"'},
        {"started": "1e20"},  # out of datetime's range
        {"started": "-1e20"},
        {"started": str(10**400)},
    ],
    "task leader": [{"id": "<missing>"}, {"id": "null"}, {"version": "2"}],
    "cas lock": [
        {"format": "<missing>"},
        {"format": "1"},
        {"format": '"other-lock/1"'},
        {"format": '"aiocoord.cas-lock/2"'},
        {"format": '"aiocoord.cas-lock/x"'},
        {"format": '"aiocoord.cas-lock/\u00b2"'},  # isdigit() but not int()
        {"format": '"aiocoord.cas-lock/' + "9" * 5000 + '"'},
        {"state": '"maybe"'},
        {"state": "<missing>"},
        {"holder": "null"},
        {"lease_expires": "<missing>"},
        {"lease_expires": "1e20"},
        {"lease_expires": str(10**400)},
        {"token": '"7"'},
        {"token": "-1"},
        {"token": str(2**64)},
        {"owner": "[]"},
        {"last_run": "[]"},
        {"last_run": '{"at":1}'},
        {"last_run": '{"window":1,"at":1e20,"owner":"p"}'},
        {"last_run": '{"window":1,"at":' + "9" * 400 + ',"owner":"p"}'},
        {"last_run": '{"window":1,"at":1,"owner":"p","token":true}'},
        {"last_failure": '{"window":1,"at":1,"owner":"p","error":5}'},
    ],
    "scheduler job": [
        {"v": "2"},
        {"v": "true"},
        {"v": "1.0"},
        {"v": "<missing>"},
        {"name": "5"},
        {"payload": "<missing>"},
        {"submitted": "<missing>"},
        {"submitted": "1e20"},
        {"submitted": str(10**400)},
    ],
    "scheduler result": [
        {"status": '"?"'},
        {"status": "<missing>"},
        {"value": "<missing>"},
        {"status": '"failed"'},  # no type nor message
        {"finished": "1e300"},
        {"worker": "null"},
    ],
    "scheduler worker": [
        {"capacity": "0"},
        {"capacity": "true"},
        {"capacity": str(2**31)},
        {"capacity": "<missing>"},
        {"jobs": '"a"'},
        {"jobs": "[1]"},
        {"draining": "null"},
        {"draining": "1"},
        {"host": "1"},
        {"pid": '"3"'},
        {"pid": str(10**30)},
    ],
}


@pytest.mark.parametrize(
    ("kind", "fields"),
    [(kind, fields) for kind, cases in WRONG.items() for fields in cases],
    ids=lambda v: str(v)[:40],
)
def test_wrong_fields_are_node_data_errors(kind: str, fields: dict[str, str]) -> None:
    _refused(DECODERS[kind], _shell(kind, **fields))


@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=lambda v: v[:16])
@pytest.mark.parametrize("kind", list(SHELLS))
def test_hostile_values_in_any_field_are_node_data_errors(kind: str, value: str) -> None:
    for field in [*SHELLS[kind], "extra"]:  # an ignored extra field poisons the record too
        error = _refused(DECODERS[kind], _shell(kind, **{field: value}))
        assert error.path == PATH


@pytest.mark.parametrize("kind", list(SHELLS))
def test_shells_are_valid_and_extra_fields_are_ignored(kind: str) -> None:
    decoder = DECODERS[kind]
    plain = decoder(PATH, _shell(kind))
    assert decoder(PATH, _shell(kind, extra='{"newer":[1,2.5,"x",null]}')) == plain


def test_messages_tests_rely_on() -> None:
    assert (
        "status" in _refused(sched.decode_result, _shell("scheduler result", status='"?"')).reason
    )
    worker = _shell("scheduler worker", capacity="0")
    assert "capacity" in _refused(sched.decode_worker, worker).reason
    assert "UTF-8" in _refused(DECODERS["latch participant"], b"\xff").reason
    assert (
        "newer" in _refused(cas.decode, _shell("cas lock", format='"aiocoord.cas-lock/2"')).reason
    )


HOSTILE_FRAGMENTS = st.sampled_from(
    [*HOSTILE_VALUES[:8], '"\\ud800"', "[[[[]]]]", "{}", "[]", '""', "true", "null", "-0", "0.5"]
)


@FUZZ
@given(st.sampled_from(list(SHELLS)), st.data())
def test_mutated_records_decode_or_raise_node_data_error(kind: str, data: st.DataObject) -> None:
    fields = list(SHELLS[kind])
    chosen = data.draw(st.lists(st.sampled_from([*fields, "extra"]), min_size=1, max_size=3))
    mutation = {name: data.draw(HOSTILE_FRAGMENTS | st.just("<missing>")) for name in chosen}
    decoded = _decoded_or_refused(DECODERS[kind], _shell(kind, **mutation))
    if decoded is not None:
        _usable(decoded)


def _usable(decoded: object) -> None:
    """What a recipe does with a decoded record cannot fail: its times convert, and so on."""
    if isinstance(decoded, Worker):
        datetime.fromtimestamp(decoded.started, UTC)
        datetime.fromtimestamp(decoded.started)
    elif isinstance(decoded, cas.LockRecord):
        cas.status_of(decoded, 5, now=1.7e9, skew=1.0)
        cas.assess(decoded, now=1.7e9, skew=1.0, holder="me", window=1.7e9)
    elif isinstance(decoded, sched.JobRecord | sched.ResultRecord):
        when = decoded.submitted if isinstance(decoded, sched.JobRecord) else decoded.finished
        datetime.fromtimestamp(when, UTC)
        sched.dumps(decoded.payload if isinstance(decoded, sched.JobRecord) else decoded.value)


# --- each recipe's encoders: round trips in the bytes of old ---------------------------------

NAMES = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=12)
TEXTS = st.text(max_size=20)
TIMES = st.floats(min_value=0, max_value=4e9, allow_nan=False)
TOKENS = st.integers(min_value=0, max_value=2**63 - 1)


@FUZZ
@given(NAMES, st.sampled_from(["1.0", "2.4.1-SNAPSHOT", "10"]), TEXTS)
def test_task_records_round_trip(worker_id: str, version: str, host: str) -> None:
    worker = Worker(version, id=worker_id, host=host)
    data = tasks.encode_worker(worker)
    old = {"id": worker.id, "version": version, "host": host, "pid": worker.pid}
    old["started"] = worker.started
    assert data == json.dumps(old, sort_keys=True, separators=(",", ":")).encode()
    assert tasks.decode_worker(PATH, worker_id, data, maven_version_key) == worker
    leader = tasks.encode_leader(worker)
    assert (
        leader
        == json.dumps(
            {"id": worker_id, "version": version}, sort_keys=True, separators=(",", ":")
        ).encode()
    )
    assert tasks.decode_leader(PATH, leader) == (worker_id, version)


RUNS = st.builds(cas.RunInfo, TIMES, TIMES, TEXTS, st.none() | TOKENS, st.none() | TEXTS)


@FUZZ
@given(
    st.booleans(),
    st.none() | TEXTS,
    TEXTS,
    TIMES,
    st.none() | TOKENS,
    st.none() | RUNS,
    st.none() | RUNS,
)
def test_cas_records_round_trip(
    held: bool,
    owner: str | None,
    holder: str,
    expires: float,
    token: int | None,
    run: cas.RunInfo | None,
    failure: cas.RunInfo | None,
) -> None:
    record = cas.LockRecord(False, owner, None, None, token, run, failure)
    if held:
        record = record.acquired(owner=owner or "o", holder=holder, expires=expires)
    data = cas.encode(record)
    old = json.loads(data)  # same keys, order and spelling as the encoder of old
    assert data == json.dumps(old, separators=(",", ":"), allow_nan=False).encode()
    assert list(old) == [
        "format", "state", "owner", "holder", "lease_expires", "token", "last_run", "last_failure"
    ]  # fmt: skip
    assert cas.decode(PATH, data) == record
    _usable(record)


@FUZZ
@given(NAMES, JSON_VALUES, st.booleans(), TEXTS, TEXTS)
def test_scheduler_records_round_trip(
    name: str, payload: Any, ok: bool, kind: str, message: str
) -> None:
    job = sched.decode_job(PATH, sched.encode_job(name, payload))
    assert (job.name, job.payload) == (name, payload)
    result = sched.ResultRecord(
        name, ok, payload if ok else None, "" if ok else kind, "" if ok else message, "w", 5.0
    )
    data = sched.encode_result(result)
    assert data == json.dumps(json.loads(data), separators=(",", ":"), ensure_ascii=False).encode()
    assert sched.decode_result(PATH, data) == result
    worker = sched.WorkerRecord(name, 3, frozenset({name, "x"}), True, "h", 42)
    assert sched.decode_worker(PATH, sched.encode_worker(worker)) == worker


def test_golden_bytes() -> None:
    """The exact bytes of each format, as earlier versions and the Java services read them."""
    lock = cas.LockRecord(True, "pod-3", "h1", 1718000000.123, None, cas.RunInfo(1.0, 2.0, "é", 4))
    assert cas.encode(lock) == (
        b'{"format":"aiocoord.cas-lock/1","state":"held","owner":"pod-3","holder":"h1",'
        b'"lease_expires":1718000000.123,"token":null,"last_run":{"window":1.0,"at":2.0,'
        b'"owner":"\\u00e9","token":4},"last_failure":null}'
    )
    worker = sched.WorkerRecord("w", 2, frozenset({"b", "a"}), host="hé", pid=7)
    assert (
        sched.encode_worker(worker)
        == (
            '{"v":1,"id":"w","capacity":2,"jobs":["a","b"],"draining":false,"host":"hé","pid":7}'
        ).encode()
    )
    me = Worker("1.0", id="w", host="hé")
    assert tasks.encode_leader(me) == b'{"id":"w","version":"1.0"}'
    assert tasks.encode_worker(me).startswith(b'{"host":"h\\u00e9","id":"w","pid":')


# --- what the encoders refuse, named at the call ---------------------------------------------


def test_encoders_refuse_what_decoders_would_refuse() -> None:
    with pytest.raises(ConfigError, match="host"):
        Worker("1.0", host="bad\udc80")
    with pytest.raises(ConfigError, match="owner"):
        cas.check_owner("pod\udc80")
    for lease in (10**400, 1e300, cas.MAX_LEASE * 2):
        with pytest.raises(ConfigError, match="lease"):
            cas.check_lease(lease)
    with pytest.raises(ConfigError, match="interval"):
        cas.check_interval(10**400)
    with pytest.raises(ConfigError, match="skew"):
        cas.check_skew(10**400, 10.0)
    for payload in ({"f": "\udc80"}, {"f": math.nan}, [10**4500]):
        with pytest.raises(ValueError, match="payload"):
            sched.encode_job("job", payload)
    error = cas.error_text(OSError("no file b'\udcff'"))
    assert cas.decode(
        PATH, cas.encode(cas.LockRecord(last_failure=cas.RunInfo(1, 2, "p", 3, error)))
    )


def test_only_the_codec_parses_json() -> None:
    """No module but the codec parses JSON: node data has one strict decoder.

    The command line (``aiocoord/cli``) and the embedded server's record
    (``aiocoord/server``, ``aiocoord/_embedded_record.py``) read files and their own processes' output as well;
    they read recipe nodes through the recipes' decoders.
    """
    package = Path(aiocoord.__file__).parent
    codec = package / "_records.py"
    parsing = re.compile(r"\bjson\.(loads?|JSONDecoder)\b|\bfrom json import\b")
    offenders = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path not in (codec, package / "_embedded_record.py")
        and not {"cli", "server"} & set(path.relative_to(package).parts)
        and parsing.search(path.read_text())
    ]
    assert offenders == []
