"""Database addresses as the user sees them: told apart from file names, and shown with
their secrets masked.

An address that holds a password is refused (see `postgres`), but the refusal, a parse error
or any other message naming the database must not print the password either: error messages
end up in terminals' scrollback, CI logs and bug reports. `shown` masks a URL's userinfo
password and any ``*password=`` query value, as psql and pg_dump do (``user:***@host``);
`libpq_reason` keeps libpq's words but not the pieces of the address it quotes back.

The userinfo is taken generously: everything between ``://`` and the last ``@`` before the
query. libpq itself ends it at the first ``@`` or ``/``, so a password that holds a ``/``
or an ``@`` would otherwise be shown in part; masking a little too much in a message costs
nothing.
"""

from __future__ import annotations

import re

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
MASK = "***"


def looks_like_url(target: str) -> bool:
    """`postgresql://…` and friends: never to be taken for a file name."""
    head, sep, _ = target.partition("://")
    return bool(sep) and head.replace("+", "").isalnum()


def meant_as_address(target: str) -> bool:
    """A URL, or something meant as a PostgreSQL one (``postgresql:/u:pw@h`` is a typo, but
    still holds a password)."""
    return looks_like_url(target) or target.lower().startswith(("postgresql:", "postgres:"))


def _parts(target: str) -> tuple[str, str, str, str]:
    """(scheme and slashes, userinfo, the rest up to the query, the query with its '?')."""
    scheme = _SCHEME.match(target)
    head = scheme.group(0) if scheme else ""
    rest = target[len(head):]
    slashes = len(rest) - len(rest.lstrip("/"))
    head, rest = head + rest[:slashes], rest[slashes:]
    before_query, q, query = rest.partition("?")
    user, at, host = before_query.rpartition("@")
    return head, user + at, host, q + query


def shown(target: str) -> str:
    """`target` as messages show it: a file name as given, an address with its password
    (in the userinfo or the query) replaced by ``***``."""
    if not meant_as_address(target):
        return target
    head, userinfo, host, query = _parts(target)
    if ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":" + MASK + "@"
    params = "&".join(_masked_param(p) for p in query[1:].split("&"))
    return f"{head}{userinfo}{host}{query[:1]}{params}"


def _masked_param(param: str) -> str:
    key, eq, _value = param.partition("=")
    return f"{key}={MASK}" if eq and "password" in key.lower() else param


def secrets(target: str) -> list[str]:
    """The parts of `target` that `shown` masks (what must appear in no message)."""
    if not meant_as_address(target):
        return []
    _, userinfo, _, query = _parts(target)
    found = [userinfo[:-1].split(":", 1)[1]] if ":" in userinfo else []
    for param in query[1:].split("&"):
        key, eq, value = param.partition("=")
        if eq and "password" in key.lower():
            found.append(value)
    return [s for s in found if s]


def libpq_reason(text: str, target: str) -> str:
    """libpq's first line about `target`, without what it quotes of it: its parse errors end
    in the offending piece (``invalid percent-encoded token: "pa%zzss"``), which may be the
    password or the whole address; and a password libpq did not see as one (it holds a
    ``/``) comes back as a host or port. The quoted piece is dropped, and any word of a
    secret left is masked."""
    line = text.strip().splitlines()[0] if text.strip() else "no reason given"
    line = line.removeprefix("connection failed: ")
    for i in (m.start() for m in re.finditer(r': "', line)):
        if line.endswith('"') and line[i + 3:-1] in target:
            line = line[:i]  # the address, or the piece of it that did not parse
            break
    hidden = secrets(target)
    words = {w for s in hidden for w in re.split(r"[/?@:#&=]", s) if w} | set(hidden)
    for word in sorted(words, key=len, reverse=True):
        line = re.sub(rf"(?<!\w){re.escape(word)}(?!\w)", MASK, line)
    return line
