"""Where a setting came from, for `Settings`: clear errors and warnings about ``AIOCOORD_*``.

A bad value names the field, shows the value (never a secret: the digest credentials or the SASL password) and, when
it came from the environment or ``.env``, the variable that held it.  A variable
with the ``AIOCOORD_`` prefix that names no setting is warned about once per
process, with the closest valid name, since pydantic-settings would ignore it.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import ConfigError

__all__ = ("PREFIX", "config_error", "warn_unknown_variables")

log = logging.getLogger("aiocoord.settings")

PREFIX = "AIOCOORD_"
SECRET_FIELDS = frozenset({"auth", "sasl_password"})
"""Fields whose value is never shown, in errors or anywhere else."""
OTHER_VARIABLES = ("AIOCOORD_ZK_DIR",)
"""Variables that are not settings but are read by aiocoord's command line."""
TOOL_PREFIXES = ("AIOCOORD_CHAOS_", "AIOCOORD_MAVEN_", "AIOCOORD_BENCH")
"""The project's own test and benchmark switches."""
_SHOWN = 100  # characters of a bad value shown in an error

_warned: set[str] = set()


def variable(field: str) -> str:
    """The environment variable of a setting."""
    return PREFIX + field.upper()


def config_error(exc: ValidationError, given: Mapping[str, object]) -> ConfigError:
    """The `ConfigError` for the first error of `exc`; `given` are the explicit arguments."""
    err = exc.errors(include_url=False)[0]
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):  # raised by a check of several fields, naming one
        return ConfigError(cause.field, str(cause).removeprefix(f"{cause.field}: "))
    loc = err.get("loc", ())
    field = ".".join(str(part) for part in loc) or "settings"
    message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if len(loc) != 1:
        return ConfigError(field, message)  # a check of the whole model: no single value to show
    if field in given:
        if field in SECRET_FIELDS:
            return ConfigError(field, message)
        return ConfigError(field, f"{message} (got {_short(err.get('input'))})")
    # Not an argument: the value came from the environment or the .env file.
    if field in SECRET_FIELDS:
        return ConfigError(field, f"{message} (from {variable(field)}; value not shown)")
    return ConfigError(field, f"{message} ({variable(field)}={_short(err.get('input'))})")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def warn_unknown_variables(fields: Iterable[str], env_file: str | None) -> None:
    """Log a WARNING, once per name and process, for each unknown ``AIOCOORD_*`` variable."""
    known = sorted(variable(name) for name in fields)
    found = [(name, "environment variable") for name in os.environ]
    if env_file and Path(env_file).is_file():
        from dotenv import dotenv_values

        # An unreadable .env file is pydantic-settings' to report.
        with contextlib.suppress(OSError, UnicodeDecodeError):
            found += [(name, f"variable in {env_file}") for name in dotenv_values(env_file)]
    for raw, where in found:
        name = raw.upper()
        if (
            not name.startswith(PREFIX)
            or name in known
            or name in OTHER_VARIABLES
            or name.startswith(TOOL_PREFIXES)
            or name in _warned
        ):
            continue
        _warned.add(name)
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]}?" if close else " (it names no aiocoord.Settings field)"
        log.warning("ignoring unknown %s %s%s", where, raw, hint)
