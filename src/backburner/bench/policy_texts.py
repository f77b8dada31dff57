"""The policy texts of a bench run (`--policy`): each text's policy, and the items of it only
a running backburner carries out, read apart from the grammar: the throttle
(``background,pause-ms=250``) and flush-behind (``io=idle,flush-behind``). Pure.
"""

from __future__ import annotations

from ..policy import flush_behind, grammar
from ..policy import throttle as throttle_text
from ..store.cell import GOVERNED


def parse(texts: list[str]) -> tuple[dict[str, grammar.Policy],
                                     dict[str, throttle_text.Spec], set[str]]:
    """Each policy text's policy, the throttle of those that ask for one (`throttled`:
    ``background,pause-ms=250`` is the background policy, throttled), and those whose
    load's files are written back at its class (``io=idle,flush-behind``)."""
    policies: dict[str, grammar.Policy] = {}
    throttles: dict[str, throttle_text.Spec] = {}
    flushes: set[str] = set()
    for text in dict.fromkeys(texts):
        if text == GOVERNED:
            policies[text] = grammar.Policy(GOVERNED,
                                             description="the govern daemon's rule applies it")
            continue
        rest, flush = flush_behind.split(text)
        rest, spec = throttle_text.split(rest)
        policies[text] = grammar.parse_policy(rest)
        if spec is not None:
            throttles[text] = spec
        if flush:
            flush_behind.check_class(text, policies[text], "the load's")
            flushes.add(text)
    return policies, throttles, flushes
