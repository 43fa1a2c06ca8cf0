"""docs/compatibility.md is true, and nothing else in the tree claims more than it.

The matrix: every row has one known status; a **shares paths** row names a
test (``tests/zk/<file>.py::<test>[<param id>]``) whose file, function and
parameter id exist (read with `ast`, nothing imported); a **not supported**
row says what to use instead; every recipe of kazoo's client, and every
feature the matrix promises to cover, has a row.

The claim scanner reads the package's docstrings and comments, README.md and
every other page of docs/, one sentence at a time (a table row, a run of
comment lines, is one; headings and code blocks are left out).  A sentence
*claims interop* when it names a peer (Java, Curator, kazoo, aiozk, tooz,
ZooKeeper's own recipes; a table row also its section heading's) and says
that something is shared with it
("share", "the same layout", "compatible", "interoperate", "take part",
"together", "each other", ...), not negated ("do not share").  Such a sentence
passes only when every matrix row it names (a row's class names, counted for
the peers the sentence names) is marked **shares paths** and it names at least
one, or it names none and links the matrix (``compatibility.md``, and its row
anchor, if any, is a shared row).
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "docs" / "compatibility.md"
SHARED, OWN, NONE = "shares paths", "same meaning, own layout", "not supported"
STATUSES = (SHARED, OWN, NONE)
PEERS = ("curator", "kazoo", "aiozk", "tooz", "zookeeper")

# Every feature the matrix must cover (issues 35 and 38): per peer, names found in a row's first cell.
REQUIRED: dict[str, str] = {
    "curator": "LeaderLatch LeaderSelector InterProcessMutex InterProcessReadWriteLock "
    "InterProcessSemaphoreV2 InterProcessSemaphoreMutex InterProcessSemaphore "
    "InterProcessMultiLock SharedCount SharedValue DistributedAtomicLong "
    "DistributedAtomicInteger DistributedBarrier DistributedDoubleBarrier DistributedQueue "
    "DistributedIdQueue DistributedPriorityQueue DistributedDelayQueue SimpleDistributedQueue "
    "QueueSharder NodeCache PathChildrenCache CuratorCache TreeCache PersistentWatcher "
    "PersistentNode PersistentTtlNode GroupMember ACLProvider EnsembleTracker "
    "CompressionProvider SchemaSet ConnectionStateListener SessionConnectionStateErrorPolicy "
    "namespace transaction withProtection ServiceDiscovery ServiceProvider "
    "AsyncCuratorFramework ModeledFramework TestingServer TestingCluster KillSession",
    "kazoo": "Lock ReadLock WriteLock Semaphore Election Party ShallowParty Counter Barrier "
    "DoubleBarrier Queue LockingQueue DataWatch ChildrenWatch PatientChildrenWatch TreeCache "
    "SetPartitioner NonBlockingLease MultiNonBlockingLease KazooState add_listener KazooRetry "
    "client_id set_hosts reconfig kazoo.testing",
    "aiozk": "Lock SharedLock Lease LeaderElection Party Counter Barrier DoubleBarrier "
    "Allocator DataWatcher ChildrenWatcher TreeCache",
    "tooz": "get_lock join_group run_for_election Partitioner",
}

# --- the matrix ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One row of the matrix."""

    peer: str
    anchor: str
    first: str  # the peer's cell as written
    status: str
    notes: str
    line: int

    @property
    def names(self) -> tuple[str, ...]:
        """The class-like names of the first cell (``Revocable.makeRevocable`` gives both)."""
        found: list[str] = []
        for code in re.findall(r"`([^`]+)`", self.first):
            found += re.findall(r"\b[A-Z][A-Za-z0-9]+\b", code)
        found += re.findall(r"\b(?:curator-x-[a-z-]+|zookeeper-recipes-[a-z]+)", self.first)
        return tuple(found)

    @property
    def tests(self) -> tuple[str, ...]:
        return tuple(re.findall(r"`(tests/[^`\s]+\.py::[^`\s]+)`", self.notes))


_ANCHORED = re.compile(r'^\| <a id="([a-z0-9-]+)"></a>(.*)$')


def parse_matrix(text: str) -> list[Row]:
    """The rows of `text`, each under its ``## ... {#peer}`` heading; `AssertionError` if malformed."""
    rows: list[Row] = []
    peer = ""
    for number, line in enumerate(text.splitlines(), 1):
        heading = re.match(r"^## .*\{#([a-z]+)\}\s*$", line)
        if heading:
            peer = heading.group(1)
            assert peer in PEERS, f"compatibility.md:{number}: unknown peer section {peer!r}"
            continue
        if not line.startswith("|") or re.fullmatch(r"\|[\s|:-]+\|", line):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[2:3] == ["status"]:
            continue
        anchored = _ANCHORED.match(line)
        assert anchored, f"compatibility.md:{number}: a row without its <a id=...>: {line}"
        assert peer, f"compatibility.md:{number}: a row before any peer section"
        assert len(cells) == 4, f"compatibility.md:{number}: {len(cells)} cells, not 4: {line}"
        first = _ANCHORED.sub(r"\2", "| " + cells[0]).removeprefix("| ").strip()
        status = cells[2].strip("*").strip()
        rows.append(Row(peer, anchored.group(1), first, status, cells[3], number))
    return rows


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return parse_matrix(MATRIX.read_text())


def test_every_row_has_one_known_status_and_its_own_anchor(rows: list[Row]) -> None:
    assert len(rows) > 80
    for row in rows:
        assert row.status in STATUSES, f"compatibility.md:{row.line}: status {row.status!r}"
        assert row.anchor.startswith(f"{row.peer}-"), f"compatibility.md:{row.line}: {row.anchor}"
    anchors = [row.anchor for row in rows]
    assert len(anchors) == len(set(anchors)), sorted(a for a in anchors if anchors.count(a) > 1)


def _test_exists(reference: str) -> str | None:
    """Why `reference` (``tests/x.py::name[param]`` or ``::Class::name``) names no test, or None."""
    match = re.fullmatch(r"(tests/[\w/]+\.py)::([\w:]+)(?:\[([^\]]+)\])?", reference)
    if match is None:
        return "is not tests/<file>.py::<test>"
    file, name, param = match.groups()
    path = ROOT / file
    if not path.is_file():
        return f"{file} does not exist"
    scope: list[ast.stmt] = ast.parse(path.read_text()).body
    found: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    parts = name.split("::")
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef) if last else (ast.ClassDef,)
        node = next((n for n in scope if isinstance(n, kinds) and n.name == part), None)
        if node is None:
            return f"{file} has no {part}"
        if isinstance(node, ast.ClassDef):
            scope = node.body
        else:
            found = node
    assert found is not None
    if not found.name.startswith("test"):
        return f"{found.name} is not a test"
    if param is not None:
        values = {
            constant.value
            for decorator in found.decorator_list
            if "parametrize" in ast.unparse(decorator)
            for constant in ast.walk(decorator)
            if isinstance(constant, ast.Constant)
        }
        if not all(part in {str(v) for v in values} for part in param.split("-")):
            return f"{found.name} has no parameter id [{param}]"
    return None


def test_shared_rows_name_tests_that_exist(rows: list[Row]) -> None:
    for row in rows:
        if row.status == SHARED:
            assert row.tests, (
                f"compatibility.md:{row.line}: {row.anchor} shares paths, names no test"
            )
        for reference in row.tests:
            why = _test_exists(reference)
            assert why is None, f"compatibility.md:{row.line}: {reference} {why}"


def test_unsupported_rows_say_what_to_use_instead(rows: list[Row]) -> None:
    for row in rows:
        if row.status == NONE:
            assert len(row.notes) > 10, f"compatibility.md:{row.line}: {row.anchor}: instead?"


def test_every_promised_feature_has_a_row(rows: list[Row]) -> None:
    missing = [
        (peer, name)
        for peer, names in REQUIRED.items()
        for name in names.split()
        if not any(
            row.peer == peer and re.search(rf"\b{re.escape(name)}\b", row.first) for row in rows
        )
    ]
    assert not missing


def test_every_recipe_of_the_installed_kazoo_has_a_row(rows: list[Row]) -> None:
    """kazoo's client lends each recipe as ``self.Lock = partial(Lock, self)``: one row each."""
    spec = importlib.util.find_spec("kazoo.client")
    if spec is None or spec.origin is None:
        pytest.skip("kazoo is not installed (the dev extra)")
    recipes = {
        target.attr
        for node in ast.walk(ast.parse(Path(spec.origin).read_text()))
        if isinstance(node, ast.Assign) and "partial(" in ast.unparse(node.value)
        for target in node.targets
        if isinstance(target, ast.Attribute)
    }
    assert len(recipes) > 15
    kazoo = [name for row in rows if row.peer == "kazoo" for name in row.names]
    assert recipes <= set(kazoo), sorted(recipes - set(kazoo))


def test_the_test_checker_knows_a_missing_test() -> None:
    good = "tests/zk/test_interop_values.py::test_java_and_python_increments_lose_nothing"
    assert _test_exists(good) is None
    assert _test_exists(good + "[long]") is None
    assert _test_exists(good + "[short]") is not None
    assert _test_exists("tests/zk/test_interop_values.py::test_no_such_test") is not None
    assert _test_exists("tests/zk/test_interop_nothing.py::test_x") is not None
    planted = '| <a id="curator-x"></a>`X` | `x()` | **shares paths** | untested |'
    assert parse_matrix("## Curator {#curator}\n" + planted)[0].tests == ()
    with pytest.raises(AssertionError, match="unknown peer"):
        parse_matrix("## Somebody {#somebody}\n" + planted)


# --- the claim scanner --------------------------------------------------------------------

_PEER = {
    "curator": r"\bcurator\b|\bjava\b",
    "zookeeper": r"LeaderElectionSupport|zookeeper-recipes|ZooKeeper's own recipes|\bjava\b",
    "kazoo": r"\bkazoo\b",
    "aiozk": r"\baiozk\b",
    "tooz": r"\btooz\b",
}
# A peer named only to be set apart ("not kazoo's") is not one the sentence claims.
_SET_APART = re.compile(
    r"(?:\bnot|\bunlike|\bnor|\bthan|instead of|rather than|\bas in|\bas with)\s+(?:\w+\s+)?$", re.I
)
_SHARED_THING = (
    r"(?:paths?|parents?|locks?|trees?|layouts?|elections?|queues?|barriers?|counters?|nodes?|leases|"
    r"groups?|names|it|them)"
)
_CLAIM = re.compile(
    rf"\bshar(?:e|es|ing)\s+(?:[\w`']+\s+){{0,3}}?{_SHARED_THING}\b"
    r"|\bshared\s+with\s+(?:[\w`']+\s+){0,2}?(?:Curator|Java|kazoo|aiozk|tooz|ZooKeeper)"
    r"|\bsame\s+(?:[\w`'-]+\s+){0,2}?(?:layouts?|nodes?|names|encoding|json|election|queue|tree)\b"
    r"|\bcompatible\b|\binteroperat\w*|\btake\s+part\b|\bmixed\s+fleet|\bother\s+way\s+round\b"
    r"|\b(?:java|curator|kazoo|aiozk|tooz)\b[^.;:]{0,60}?\bon\s+(?:the\s+same|one)\s+path\b"
    r"|\b(?:see|find|list|exclude)\s+each\s+other\b"
    r"|\b(?:queue|queued|count|counted|elect|elects|wait|waits|lead|work)\b[^.;:,]{0,40}?\btogether\b"
    r"|\bon\s+(?:\w+'s\s+|their\s+|its\s+)?(?:`?[\w-]+`?\s+){0,2}?(?:node\s+)?layouts?\b",
    re.I,
)
# "do not share", "never share", "on one path do not exclude each other": what is not shared,
# negated just before the claim, or after it within its clause.
_NEGATION = r"(?:\bnot|n't|\bnever|\bno longer|\bcannot|\bboth (?:hold|lead))\b"
_NEGATED_BEFORE = re.compile(rf"{_NEGATION}\s+(?:[\w`]+\s+){{0,3}}$", re.I)
_NEGATED_AFTER = re.compile(rf"^[^;:,.]{{0,40}}?{_NEGATION}", re.I)
_LINK = re.compile(r"compatibility\.md(?:#([a-z0-9-]+))?")


@dataclass(frozen=True)
class Sentence:
    where: str  # the file, relative to the root
    line: int
    text: str
    heading: str = ""  # a table row's section heading ("From Apache Curator"): its peer too


# A sentence ends at a full stop before a capital (or a quote, a link) or at a blank line; a
# table row is one sentence, so that its first cell's name goes with every claim it makes.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(*\[])|\n\s*\n")


def _sentences(where: str, line: int, block: str, heading: str = "") -> Iterator[Sentence]:
    if block.startswith("|"):
        yield Sentence(where, line, " ".join(block.split()), heading)
        return
    start = 0
    for part in re.split(_SENTENCE_END, block):
        start = max(block.find(part, start), start)
        yield Sentence(where, line + block.count("\n", 0, start), " ".join(part.split()))


def markdown_sentences(where: str, text: str) -> Iterator[Sentence]:
    """The sentences of a page: code blocks left out, each table row and list item on its own."""
    block: list[str] = []
    first = 0
    fenced = False
    heading = ""
    for number, line in enumerate([*text.splitlines(), ""], 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            line = ""
        if fenced:
            continue
        new_unit = (
            not line.strip() or line.startswith(("|", "- ", "* ", "#")) or re.match(r"\d+\. ", line)
        )
        if new_unit and block:
            yield from _sentences(where, first, "\n".join(block), heading)
            block = []
        if line.startswith("#"):  # a heading introduces claims, it makes none
            heading, line = line.lstrip("#").strip(), ""
        if line.strip():
            if not block:
                first = number
            block.append(line)


def python_sentences(where: str, source: str) -> Iterator[Sentence]:
    """The sentences of a module's docstrings, and its comments (a run of comment lines as one)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc and node.body:
                yield from _sentences(where, node.body[0].lineno, doc)
    # A run of comment lines is one sentence: a comment is one terse thought.
    run: list[str] = []
    first = last = 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        number = token.start[0]
        if run and number != last + 1:
            yield Sentence(where, first, " ".join(run))
            run = []
        if not run:
            first = number
        run.append(token.string.lstrip("#").strip())
        last = number
    if run:
        yield Sentence(where, first, " ".join(run))


def _peers(text: str) -> set[str]:
    named = set()
    for peer, pattern in _PEER.items():
        for match in re.finditer(pattern, text, re.I):
            if not _SET_APART.search(text[: match.start()][-40:]):
                named.add(peer)
    return named


def _claims(text: str) -> bool:
    return any(
        not _NEGATED_BEFORE.search(text[: m.start()][-40:])
        and not _NEGATED_AFTER.match(text[m.end() :])
        for m in _CLAIM.finditer(text)
    )


def verdict(sentence: Sentence, rows: Iterable[Row]) -> str | None:
    """What is wrong with `sentence` as a claim, or None when it claims nothing untrue."""
    text = sentence.text
    peers = _peers(text) | _peers(sentence.heading)
    if not peers or not _claims(text):
        return None
    rows = list(rows)
    named = [
        row
        for row in rows
        if row.peer in peers
        and any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) for name in row.names)
    ]
    links = [row for a in _LINK.findall(text) if a for row in rows if row.anchor == a]
    unshared = {row.anchor for row in named + links if row.status != SHARED}
    if unshared:
        return f"claims sharing for {', '.join(sorted(unshared))}, not marked shares paths"
    if not named and not links and not _LINK.search(text):
        return "claims sharing with a peer but names no row the matrix marks shared (or link it)"
    return None


def tree_sentences() -> Iterator[Sentence]:
    for path in sorted((ROOT / "aiocoord").rglob("*.py")):
        yield from python_sentences(str(path.relative_to(ROOT)), path.read_text())
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for path in pages:
        if path != MATRIX:
            yield from markdown_sentences(str(path.relative_to(ROOT)), path.read_text())


def test_no_docstring_comment_or_page_claims_more_than_the_matrix(rows: list[Row]) -> None:
    wrong = [
        f"{s.where}:{s.line}: {why}:\n    {s.text}"
        for s in tree_sentences()
        if (why := verdict(s, rows)) is not None
    ]
    assert not wrong, "\n".join(wrong)


def test_the_scanner_fails_on_a_planted_false_claim(rows: list[Row]) -> None:
    planted = '''"""Java ``ServiceDiscovery`` clients and ours on one path share one registry."""

# kazoo's ``ShallowParty`` and `group_member()` on one path share the group, so a mixed fleet works.
def f() -> None:
    """Java services take part."""
'''
    found = {s.line: verdict(s, rows) for s in python_sentences("aiocoord/planted.py", planted)}
    assert sorted(found) == [1, 3, 5] and all(found.values()), found
    assert "curator-servicediscovery" in str(found[1]) and "kazoo-shallowparty" in str(found[3])
    page = (
        "Java `ServiceDiscovery` clients and ours on one path share one registry.\n\n"
        "| kazoo `ShallowParty` | `group_member` | the same party nodes, shared |\n"
    )
    assert all(verdict(s, rows) for s in markdown_sentences("docs/planted.md", page))


def test_the_scanner_passes_true_claims_and_denials(rows: list[Row]) -> None:
    for text in (
        "Java processes running Curator's ``InterProcessMutex`` on the same path share the lock.",
        "kazoo's `Party` names its nodes `<uuid>__party__<id>`, so it does not share a path.",
        "Curator's layout (`<path>/leases`), not kazoo's own: do not mix the two on one path.",
        "Java services take part where the [matrix](compatibility.md) says so.",
        "Java's `String.compareTo` orders the names.",
    ):
        assert verdict(Sentence("docs/x.md", 1, text), rows) is None, text
    linked = "Java services share it ([matrix](compatibility.md#curator-servicediscovery))."
    assert verdict(Sentence("docs/x.md", 1, linked), rows) is not None
