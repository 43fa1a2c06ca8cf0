"""A job's payload shape, read once from its handler: what `submit` and `jobs_router` both use."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from aiocoord.scheduler import PayloadField, PayloadShape
from aiocoord.scheduler._jobs import JobType
from aiocoord.scheduler._payload import payload_shape


class Resize(pydantic.BaseModel):
    width: int


async def resize(req: Resize) -> int:
    return req.width


async def add(a: int, b: int = 2) -> int:
    return a + b


async def untyped(x) -> None:  # type: ignore[no-untyped-def]
    pass


def test_a_handler_taking_a_model_takes_it_whole() -> None:
    shape = payload_shape("resize", resize)
    assert shape == PayloadShape(Resize, (PayloadField("req", Resize),), int)
    assert shape.fields[0].required


def test_a_handler_of_parameters_takes_an_object_of_them() -> None:
    shape = payload_shape("add", add)
    assert shape.model is None
    assert shape.fields == (PayloadField("a", int), PayloadField("b", int, 2))
    assert [f.required for f in shape.fields] == [True, False]
    assert payload_shape("untyped", untyped).fields == (PayloadField("x", Any),)


@pytest.mark.parametrize(
    ("handler", "says"),
    [
        (len, "async function"),
        (lambda: None, "async function"),
    ],
)
def test_a_handler_that_is_not_async_is_refused(handler: Any, says: str) -> None:
    with pytest.raises(TypeError, match=says):
        payload_shape("job", handler)


async def _star(*args: int) -> None:
    pass


def test_star_parameters_are_refused() -> None:
    with pytest.raises(TypeError, match="ordinary named parameter"):
        payload_shape("star", _star)


def test_the_job_type_keeps_the_shape_it_validates_with() -> None:
    job = JobType.build("add", add)
    assert job.shape == payload_shape("add", add)
    assert not job.model_param and job.params == ("a", "b")
    assert job.validate_payload({"a": 1}) == {"a": 1}
    assert JobType.build("resize", resize).model_param
