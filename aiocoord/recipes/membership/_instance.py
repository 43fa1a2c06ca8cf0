"""`ServiceInstance` and its JSON: curator-x-discovery's ``ServiceInstance`` as Jackson writes it.

Curator's ``JsonInstanceSerializer`` writes the instance's properties in
their declaration order, compactly: ``name``, ``id``, ``address``, ``port``,
``sslPort``, ``payload``, ``registrationTimeUTC``, ``serviceType``,
``uriSpec``, ``enabled``.  The payload carries Jackson's class id
(``@JsonTypeInfo(use=CLASS)``): an object payload is written with
``"@class": "java.util.LinkedHashMap"`` first, as Jackson writes a ``Map``
payload (meant for a Java ``JsonInstanceSerializer<Map>``, not yet tested
against one); strings, numbers and booleans go as they are.  A `UriSpec` is ``{"parts": [{"value": ..., "variable": ...}]}``;
here it is its template string (``"{scheme}://{address}:{port}"``).

Reading is lenient where Jackson's defaults are (a missing property takes
its default; unknown ones are ignored) and strict where Java would fail: a
node whose data is not such an object is `NodeDataError` naming it.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from ..._checks import check_int
from ..._records import (
    FLAG,
    INT64,
    TEXT,
    Invalid,
    Record,
    dump,
    integer,
    list_of,
    load_record,
    one_of,
    optional,
)
from ...errors import ConfigError, NodeDataError

__all__ = ("SERVICE_TYPES", "ServiceInstance", "decode_instance", "encode_instance")

SERVICE_TYPES: Final = ("DYNAMIC", "STATIC", "PERMANENT")
"""Curator's ``ServiceType``s that aiocoord registers (``DYNAMIC_SEQUENTIAL`` is read only)."""
_READ_TYPES: Final = (*SERVICE_TYPES, "DYNAMIC_SEQUENTIAL")
_MAP_CLASS: Final = "java.util.LinkedHashMap"
_SPEC_PART = re.compile(r"\{([^{}]*)\}|([^{}]+)")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _new_id() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class ServiceInstance:
    """One instance of a service, as curator-x-discovery describes it.

    `id` defaults to a random UUID and `registration_time_utc` (milliseconds
    since the epoch) to now, as Curator's builder does.  `payload` is a
    JSON value: None, a str, a number, a bool, or a dict of JSON values.
    `service_type` is ``"DYNAMIC"`` (ephemeral: gone with the session, the
    default), ``"STATIC"`` or ``"PERMANENT"`` (persistent nodes).  Raises
    `TypeError` or `ConfigError` naming the field for a bad value.
    """

    name: str
    address: str | None = None
    port: int | None = None
    id: str = field(default_factory=_new_id)
    ssl_port: int | None = None
    payload: Any = None
    registration_time_utc: int = field(default_factory=_now_ms)
    service_type: str = "DYNAMIC"
    uri_spec: str | None = None
    enabled: bool = True

    def __post_init__(self) -> None:
        for name in ("name", "id"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        if self.address is not None and not isinstance(self.address, str):
            raise TypeError(f"address must be a str or None, not {type(self.address).__name__}")
        for name in ("port", "ssl_port"):
            value = getattr(self, name)
            if value is not None:
                check_int(name, value)
        if self.service_type not in _READ_TYPES:
            raise ConfigError(
                "service_type", f"must be one of {SERVICE_TYPES}, not {self.service_type!r}"
            )
        if not isinstance(self.enabled, bool):
            raise TypeError(f"enabled must be a bool, not {type(self.enabled).__name__}")
        if self.uri_spec is not None and not isinstance(self.uri_spec, str):
            raise TypeError(f"uri_spec must be a str or None, not {type(self.uri_spec).__name__}")
        if isinstance(self.payload, list | tuple | set):
            raise TypeError("payload must be None, a str, a number, a bool or a dict")

    def uri(self, **variables: object) -> str:
        """`uri_spec` with its fields filled in (Curator's ``buildUriSpec``); "" without one."""
        if self.uri_spec is None:
            return ""
        known: dict[str, object] = {
            "[": "{",
            "]": "}",
            "scheme": "https" if self.ssl_port is not None else "http",
            "name": self.name,
            "id": self.id,
            "address": self.address or "",
            "port": "" if self.port is None else self.port,
            "ssl-port": "" if self.ssl_port is None else self.ssl_port,
            "registration-time-utc": self.registration_time_utc,
            "service-type": self.service_type.lower(),
            **variables,
        }
        return "".join(
            str(known.get(var.strip(), "")) if var is not None else literal
            for var, literal in (m.groups() for m in _SPEC_PART.finditer(self.uri_spec))
        )


def _spec_to_json(spec: str) -> dict[str, object]:
    parts = [
        {"value": var.strip(), "variable": True}
        if var is not None
        else {"value": literal, "variable": False}
        for var, literal in (m.groups() for m in _SPEC_PART.finditer(spec))
    ]
    return {"parts": parts}


def _part(value: object) -> str:
    """One uriSpec part, back in its template form."""
    if not isinstance(value, dict) or not isinstance(value.get("value", ""), str):
        raise Invalid("must be an object {'value': str, 'variable': bool}")
    text = value.get("value", "")
    return f"{{{text}}}" if value.get("variable") is True else text


def _spec_from_json(record: Record) -> str | None:
    spec = record.maybe_record("uriSpec")
    return None if spec is None else "".join(spec.get("parts", list_of(_part), []))


def encode_instance(instance: ServiceInstance) -> bytes:
    """The instance as Curator's ``JsonInstanceSerializer`` writes it (UTF-8 JSON)."""
    payload = instance.payload
    if isinstance(payload, dict):
        payload = {"@class": _MAP_CLASS, **payload}
    document = {
        "name": instance.name,
        "id": instance.id,
        "address": instance.address,
        "port": instance.port,
        "sslPort": instance.ssl_port,
        "payload": payload,
        "registrationTimeUTC": instance.registration_time_utc,
        "serviceType": instance.service_type,
        "uriSpec": None if instance.uri_spec is None else _spec_to_json(instance.uri_spec),
        "enabled": instance.enabled,
    }
    try:
        return dump(document, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"payload must be JSON: {exc}") from None


def decode_instance(data: bytes, path: str) -> ServiceInstance:
    """The instance a node holds; `NodeDataError` naming `path` if it is not one."""
    record = load_record(path, data)
    payload = record.get("payload", _any, None)
    if isinstance(payload, dict):
        payload = {k: v for k, v in payload.items() if k != "@class"}
    elif isinstance(payload, list) and len(payload) == 2 and isinstance(payload[0], str):
        payload = payload[1]  # Jackson's [class, value] form for a typed non-object value
    port = optional(integer(-(2**31), 2**31 - 1))
    try:
        return ServiceInstance(
            name=record.get("name", TEXT, ""),
            id=record.get("id", TEXT, ""),
            address=record.maybe("address", TEXT),
            port=record.maybe("port", port),
            ssl_port=record.maybe("sslPort", port),
            payload=payload,
            registration_time_utc=record.get("registrationTimeUTC", INT64, 0),
            service_type=record.maybe("serviceType", one_of(*_READ_TYPES)) or "DYNAMIC",
            uri_spec=_spec_from_json(record),
            enabled=record.get("enabled", FLAG, True),
        )
    except (TypeError, ConfigError) as exc:
        raise NodeDataError(path, str(exc)) from None


def _any(value: object) -> object:
    return value
