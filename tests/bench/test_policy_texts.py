"""bench.policy_texts: a run's policy texts read into policies, throttles and flush-behind."""

from __future__ import annotations

from backburner.bench import policy_texts
from backburner.policy import grammar
from backburner.store.cell import GOVERNED


def test_each_text_keeps_its_items_apart_from_its_policy() -> None:
    texts = ["default", "io=idle,throttle", "io=idle,flush-behind", GOVERNED, "default"]
    policies, throttles, flushes = policy_texts.parse(texts)
    assert list(policies) == ["default", "io=idle,throttle", "io=idle,flush-behind", GOVERNED]
    assert policies["io=idle,throttle"] == policies["io=idle,flush-behind"] == \
        grammar.parse_policy("io=idle")
    assert set(throttles) == {"io=idle,throttle"} and flushes == {"io=idle,flush-behind"}
    assert policies[GOVERNED].name == GOVERNED
