"""Elasticsearch's bulk API (``POST /_bulk``, ``POST /{index}/_bulk``): NDJSON action and
source lines in, shipper messages out (router/protocols/shipped.py), and the answers in
Elasticsearch's own forms: the per-item ``items``, request-level errors, the ``GET /``
greeting. Pure: no I/O.

Each ``index`` or ``create`` action and its source line is one item: ``@timestamp`` is the
ts, ``message`` the content, the rest of the document the attrs, and the owner comes from
the owner rule (router/protocols/es_owner.py). ``delete`` and ``update`` are refused item by
item (shardlog keeps logs; it neither changes nor removes one). A line that is not an action
where one is due refuses the whole request, as Elasticsearch does."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import orjson

from router.errors import ShardlogError, excerpt
from router.protocols.es_owner import OwnerRule
from router.protocols.shipped import Message
from router.timestamps import EARLIEST, LATEST

WRITES = ("index", "create")
OPERATIONS = ("create", "delete", "index", "update")
# Action parameters that change nothing about a log row: accepted and ignored. (`_type` is
# what rsyslog's omelasticsearch sends unless told esVersion.major="8".)
IGNORED_PARAMETERS = frozenset(
    {
        "routing",
        "pipeline",
        "require_alias",
        "require_data_stream",
        "dynamic_templates",
        "list_executed_pipelines",
        "_type",
    }
)
# Parameters Elasticsearch knows that only make sense for versioned documents: that item fails.
VERSIONING_PARAMETERS = frozenset(
    {"version", "version_type", "if_seq_no", "if_primary_term", "retry_on_conflict", "_source"}
)
KNOWN_PARAMETERS = IGNORED_PARAMETERS | VERSIONING_PARAMETERS | {"_index", "_id"}
# Elasticsearch's strict_date_optional_time: a date, an optional time, an optional zone.
_ISO_DATE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[Tt][0-9]{2}(?::[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]{1,9})?)?)?)?"
    r"(?:[Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)?"
)
_EPOCH_MILLIS = re.compile(r"-?[0-9]{1,16}(?:\.[0-9]{1,6})?")
# Distinct action lines remembered per request: shippers repeat one action line per index.
_ACTION_CACHE = 256
ES_VERSION_PATTERN = r"^8\.[0-9]{1,3}\.[0-9]{1,3}$"
LUCENE_VERSION = "9.12.0"


class BulkError(Exception):
    """The whole request is refused (nothing of it written), in Elasticsearch's error form."""

    def __init__(self, status: int, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.kind = kind
        self.reason = reason


class Item:
    """One action of the request and, once decided, its outcome (``status`` 0: none yet)."""

    __slots__ = ("error", "id", "index", "operation", "status")

    def __init__(self, operation: str, index: str | None, id_: str | None) -> None:
        self.operation = operation
        self.index = index
        self.id = id_
        self.status = 0
        self.error: dict[str, str] | None = None

    def fail(self, status: int, kind: str, reason: str) -> None:
        self.status = status
        self.error = {"type": kind, "reason": reason}


class TimeError(ValueError):
    pass


def parse_time(value: Any, now: datetime) -> datetime:
    """``@timestamp`` as Elasticsearch's default date mapping reads it
    (strict_date_optional_time||epoch_millis): an ISO 8601 date with an optional time and zone
    (none: UTC), or milliseconds since the epoch as a number or a string of digits."""
    if value is None:
        return now
    if isinstance(value, str):
        if len(value) <= 40 and _ISO_DATE.fullmatch(value):
            text = value.upper().replace(",", ".") if not value.isupper() or "," in value else value
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError as exc:
                raise TimeError(f"{excerpt(value)}: {exc}") from None
            return _in_range(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC), value)
        if _EPOCH_MILLIS.fullmatch(value):
            return _from_millis(float(value))
        raise TimeError(f"{excerpt(value)} is not an ISO 8601 date-time or epoch millis")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _from_millis(value)
    raise TimeError("must be a date string or a number of epoch milliseconds")


def _from_millis(millis: float) -> datetime:
    try:
        parsed = datetime.fromtimestamp(millis / 1000, UTC)
    except (ValueError, OverflowError, OSError):
        raise TimeError(f"{millis!r} epoch milliseconds is out of range") from None
    return _in_range(parsed, millis)


def _in_range(parsed: datetime, value: Any) -> datetime:
    if 1 < parsed.year < 9999:  # within range whatever its offset
        return parsed
    try:
        if EARLIEST <= parsed.astimezone(UTC) < LATEST:
            return parsed
    except (ValueError, OverflowError):
        pass
    raise TimeError(f"{excerpt(value)} is not between 0001-01-02 and 9999-12-30 UTC")


class Bulk:
    """A bulk body read line by line (``feed`` as lines arrive, then ``finish``): its items,
    and the messages of those still good with their item positions."""

    def __init__(
        self, path_index: str | None, rule: OwnerRule, now: datetime, max_items: int
    ) -> None:
        self.path_index = path_index
        self.rule = rule
        self.now = now
        self.max_items = max_items
        self.items: list[Item] = []
        self.messages: list[Message] = []
        self.positions: list[int] = []
        self._pending: Item | None = None  # an action waiting for its source line
        self.line = 0
        self._actions: dict[bytes, tuple[str, str | None, str | None, str | None]] = {}

    def feed(self, lines: list[bytes]) -> None:
        for line in lines:
            self.line += 1
            pending = self._pending
            if pending is not None:
                self._pending = None
                if pending.status == 0:
                    self._source(pending, line)
            elif line.strip():
                self._action(line)
        if self.line > 2 * self.max_items + 1:
            raise BulkError(
                413,
                "content_too_long_exception",
                f"more than {2 * self.max_items + 1} lines (items of at most "
                f"{self.max_items} actions)",
            )

    def finish(self) -> None:
        if self._pending is not None:
            raise BulkError(
                400,
                "illegal_argument_exception",
                f"the {self._pending.operation} action of line [{self.line}] has no source line",
            )
        if not self.items:
            raise BulkError(
                400,
                "action_request_validation_exception",
                "Validation Failed: 1: no requests added;",
            )

    def _action(self, line: bytes) -> None:
        parsed = self._actions.get(line)
        if parsed is None:
            parsed = self._parse_action(line)
            if len(self._actions) < _ACTION_CACHE:
                self._actions[line] = parsed
        operation, index, id_, refusal = parsed
        if len(self.items) >= self.max_items:
            raise BulkError(
                413, "content_too_long_exception", f"more than {self.max_items} actions"
            )
        item = Item(operation, index or self.path_index, id_)
        self.items.append(item)
        if refusal is not None:
            item.fail(400, "illegal_argument_exception", refusal)
        elif operation not in WRITES:
            item.fail(
                400,
                "illegal_argument_exception",
                f"{operation} is not supported: shardlog stores log rows, it does not change "
                "or remove them (use index or create)",
            )
        if operation != "delete":
            self._pending = item

    def _parse_action(self, line: bytes) -> tuple[str, str | None, str | None, str | None]:
        """(operation, _index, _id, why the item is refused or None)."""
        where = f"Malformed action/metadata line [{self.line}]"
        try:
            action = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise BulkError(400, "x_content_parse_exception", f"{where}: {exc.msg}") from None
        if type(action) is not dict or len(action) != 1:
            raise BulkError(
                400, "illegal_argument_exception", f"{where}, expected an object with one action"
            )
        [(operation, parameters)] = action.items()
        if operation not in OPERATIONS:
            raise BulkError(
                400,
                "illegal_argument_exception",
                f"{where}, expected field [create], [delete], [index] or [update] but found "
                f"[{excerpt(operation)}]",
            )
        if type(parameters) is not dict:
            raise BulkError(400, "illegal_argument_exception", f"{where}, expected an object")
        unknown = sorted(parameters.keys() - KNOWN_PARAMETERS)
        if unknown:
            raise BulkError(
                400,
                "illegal_argument_exception",
                f"Action/metadata line [{self.line}] contains an unknown parameter "
                f"[{excerpt(unknown[0])}]",
            )
        index, id_ = parameters.get("_index"), parameters.get("_id")
        for name, value in (("_index", index), ("_id", id_)):
            if value is not None and (type(value) is not str or not value):
                raise BulkError(
                    400, "illegal_argument_exception", f"{where}: {name} must be a non-empty string"
                )
        versioning = sorted(parameters.keys() & VERSIONING_PARAMETERS)
        refusal = None
        if versioning:
            refusal = f"[{versioning[0]}] is not supported: shardlog does not version log rows"
        return operation, index, id_, refusal

    def _source(self, item: Item, line: bytes) -> None:
        try:
            document = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            item.fail(400, "document_parsing_exception", f"the document is not JSON: {exc.msg}")
            return
        if type(document) is not dict:
            item.fail(400, "document_parsing_exception", "the document is not a JSON object")
            return
        owner = self.rule(item.index, document)
        if owner is None:
            item.fail(
                400,
                "illegal_argument_exception",
                f"no owner: the owner rule {self.rule.text!r} found none in this item "
                "(no such field, and no index)",
            )
            return
        if item.index is None:
            item.index = owner
        try:
            ts = parse_time(document.pop("@timestamp", None), self.now)
        except TimeError as exc:
            item.fail(
                400,
                "document_parsing_exception",
                f"failed to parse field [@timestamp] of type [date]: {exc}",
            )
            return
        if "message" in document:
            message = document.pop("message")
            content = message if type(message) is str else orjson.dumps(message).decode()
            attrs = document or None
        else:
            # No message: the document itself, as sent, is the content (nothing lost).
            content, attrs = line.decode(), None
        self.messages.append(Message(owner, ts, content, attrs))
        self.positions.append(len(self.items) - 1)


def answer(items: list[Item], took_ms: int, id_prefix: str) -> bytes:
    """The bulk answer. Items without an ``_id`` of their own get ``id_prefix`` + their
    position: the same body answers the same ids again. Created items are rendered from a
    template per (action, index): a thousand dicts per request cost more than the parse."""
    dumps = orjson.dumps
    rendered: list[bytes] = []
    heads: dict[tuple[str, str | None], bytes] = {}
    errors = False
    for position, item in enumerate(items):
        id_ = item.id if item.id is not None else f"{id_prefix}{position:08x}"
        if item.error is not None:
            errors = True
            outcome = {"_index": item.index, "_id": id_, "status": item.status, "error": item.error}
            rendered.append(dumps({item.operation: outcome}))
            continue
        head = heads.get((item.operation, item.index))
        if head is None:
            head = heads[(item.operation, item.index)] = b'{"%s":{"_index":%s,"_id":' % (
                item.operation.encode(),
                dumps(item.index),
            )
        rendered.append(b"%s%s,%s%d%s" % (head, dumps(id_), _CREATED, position, _CREATED_END))
    took = b'{"took":%d,"errors":%s,"items":[' % (took_ms, b"true" if errors else b"false")
    return took + b",".join(rendered) + b"]}"


_CREATED = (
    b'"_version":1,"result":"created","_shards":{"total":1,"successful":1,"failed":0},"_seq_no":'
)
_CREATED_END = b',"_primary_term":1,"status":201}}'


# Elasticsearch's error types by status, for the errors of shardlog's own tree.
_ERROR_TYPES = {
    400: "illegal_argument_exception",
    401: "security_exception",
    403: "security_exception",
    404: "resource_not_found_exception",
    409: "version_conflict_engine_exception",
    413: "content_too_long_exception",
    415: "media_type_header_exception",
    429: "es_rejected_execution_exception",
    503: "unavailable_shards_exception",
    504: "timeout_exception",
}


def error_body(status: int, kind: str, reason: str) -> dict[str, Any]:
    cause = {"type": kind, "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


def request_error(exc: ShardlogError) -> tuple[int, dict[str, Any]]:
    """A shardlog error as Elasticsearch would answer it: a 422 is its 400, and a write still
    running under the same body (a 409 with Retry-After) is a 429, which every shipper
    retries."""
    status = 400 if exc.status == 422 else exc.status
    if exc.status == 409 and exc.retry_after_s is not None:
        status = 429
    return status, error_body(status, _ERROR_TYPES.get(status, "exception"), exc.message)


def item_error(exc: ShardlogError) -> tuple[int, str]:
    """(status, type) of an item refused by the audit rules or the token's reach."""
    if exc.status == 403:
        return 403, "security_exception"
    if exc.field is not None and exc.field.endswith(".owner"):
        return 400, "illegal_argument_exception"
    return 400, "document_parsing_exception"


def greeting(node: str, cluster: str, cluster_uuid: str, version: str) -> dict[str, Any]:
    """``GET /`` as an Elasticsearch 8 node answers it."""
    return {
        "name": node,
        "cluster_name": cluster,
        "cluster_uuid": cluster_uuid,
        "version": {
            "number": version,
            "build_flavor": "default",
            "build_type": "tar",
            "build_hash": "shardlog",
            "build_date": "2026-01-01T00:00:00.000000000Z",
            "build_snapshot": False,
            "lucene_version": LUCENE_VERSION,
            "minimum_wire_compatibility_version": "7.17.0",
            "minimum_index_compatibility_version": "7.0.0",
        },
        "tagline": "You Know, for Search",
    }
