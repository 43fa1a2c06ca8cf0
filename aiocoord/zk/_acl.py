"""Which ACL a node aiocoord creates gets: the default, or what an ACL provider picks by path.

An ACL provider is Curator's ``ACLProvider`` as one function: given the full
server path of a node about to be created (the chroot included, as Curator
passes it), it returns the ACL entries for it, or None for the session's
default (creator-only with credentials, open without).  An ACL given to a
create itself always wins, as Curator's ``withACL`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .types import ACL

__all__ = ("AclChoice", "AclProvider", "check_acl_provider")

AclProvider = Callable[[str], Sequence[ACL] | None]
"""``provider(server_path) -> ACL entries, or None for the default``."""


def check_acl_provider(provider: object) -> AclProvider | None:
    """`provider` if it is None or callable; `TypeError` naming ``acl_provider`` otherwise."""
    if provider is not None and not callable(provider):
        raise TypeError(
            f"acl_provider must be a function of a path returning ACL entries or None, "
            f"not {type(provider).__name__}"
        )
    return provider


class AclChoice:
    """The session's default ACL and its optional provider; `for_path` picks one."""

    __slots__ = ("default", "provider")

    def __init__(self, default: tuple[ACL, ...], provider: AclProvider | None) -> None:
        self.default = default
        self.provider = check_acl_provider(provider)

    def for_path(self, server_path: str) -> tuple[ACL, ...]:
        """The ACL of a node created at `server_path` without an ACL of its own.

        Raises `TypeError` naming ``acl_provider`` when the provider returns
        something other than None or a non-empty sequence of `ACL`.
        """
        if self.provider is None:
            return self.default
        chosen = self.provider(server_path)
        if chosen is None:
            return self.default
        if isinstance(chosen, ACL):
            chosen = (chosen,)
        if (
            isinstance(chosen, str | bytes)
            or not isinstance(chosen, Sequence)
            or not chosen
            or not all(isinstance(a, ACL) for a in chosen)
        ):
            raise TypeError(
                f"acl_provider returned {chosen!r} for {server_path!r}: "
                "expected a non-empty sequence of aiocoord.zk.ACL, or None"
            )
        return tuple(chosen)
