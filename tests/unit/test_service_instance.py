"""`ServiceInstance` JSON: the exact form curator-x-discovery's ``JsonInstanceSerializer`` writes."""

from __future__ import annotations

import pytest

from aiocoord import ConfigError, NodeDataError, ServiceInstance
from aiocoord.recipes.membership import ServiceProvider

# As a Java service writes it (Jackson, compact, declaration order, payload with its class).
JAVA = (
    b'{"name":"api","id":"i-1","address":"10.0.0.5","port":8080,"sslPort":null,'
    b'"payload":{"@class":"java.util.LinkedHashMap","zone":"a"},'
    b'"registrationTimeUTC":1616640377000,"serviceType":"STATIC",'
    b'"uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},'
    b'{"value":"address","variable":true},{"value":":","variable":false},'
    b'{"value":"port","variable":true}]},"enabled":true}'
)


def test_encoding_is_jacksons_byte_for_byte() -> None:
    from aiocoord.recipes.membership._instance import decode_instance, encode_instance

    instance = decode_instance(JAVA, "/services/api/i-1")
    assert instance == ServiceInstance(
        name="api",
        id="i-1",
        address="10.0.0.5",
        port=8080,
        payload={"zone": "a"},
        registration_time_utc=1616640377000,
        service_type="STATIC",
        uri_spec="{scheme}://{address}:{port}",
    )
    assert encode_instance(instance) == JAVA
    assert instance.uri() == "http://10.0.0.5:8080"
    assert instance.uri(scheme="grpc") == "grpc://10.0.0.5:8080"


def test_older_and_lenient_forms_are_read() -> None:
    from aiocoord.recipes.membership._instance import decode_instance, encode_instance

    old = b'{"name":"a","id":"b","address":null,"port":1,"payload":"text","unknown":3}'
    instance = decode_instance(old, "/s/a/b")
    assert instance.enabled and instance.service_type == "DYNAMIC"
    assert instance.payload == "text" and instance.registration_time_utc == 0
    assert b'"payload":"text"' in encode_instance(instance)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff",
        b"[]",
        b'{"name":3}',
        b'{"port":"80"}',
        b'{"serviceType":"X"}',
        b'{"uriSpec":1}',
    ],
)
def test_corrupt_data_is_a_node_data_error_naming_the_node(data: bytes) -> None:
    from aiocoord.recipes.membership._instance import decode_instance

    with pytest.raises(NodeDataError) as caught:
        decode_instance(data, "/s/a/b")
    assert caught.value.path == "/s/a/b"


def test_bad_fields_name_themselves() -> None:
    with pytest.raises(TypeError, match="port"):
        ServiceInstance(name="a", port="80")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="service_type"):
        ServiceInstance(name="a", service_type="WEIRD")
    with pytest.raises(TypeError, match="payload"):
        ServiceInstance(name="a", payload=[1, 2])


THREE = [ServiceInstance(name="api", id=str(i)) for i in range(3)]


async def _three(name: str) -> list[ServiceInstance]:
    return THREE


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_strategies_and_down_instances(anyio_backend: str) -> None:
    rr = ServiceProvider("api", _three)
    assert [(await rr.get()).id for _ in range(4)] == ["0", "1", "2", "0"]  # type: ignore[union-attr]
    sticky = ServiceProvider("api", _three, strategy="sticky")
    first = await sticky.get()
    assert first is not None
    for _ in range(3):
        assert await sticky.get() == first
    sticky.note_error(first)
    assert await sticky.get() == first  # one error: still up (threshold 2)
    sticky.note_error(first)
    other = await sticky.get()
    assert other is not None and other.id != first.id and "down=1" in repr(sticky)
    brief = ServiceProvider("api", _three, down_for=0.0, error_threshold=1)
    brief.note_error(ServiceInstance(name="api", id="0"))
    assert len(await brief.all()) == 3  # the report has expired already
    with pytest.raises(ConfigError, match="strategy"):
        ServiceProvider("api", _three, strategy="fastest")  # type: ignore[arg-type]
