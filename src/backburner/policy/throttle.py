"""The throttle as part of a policy text (`bench --policy background,pause-ms=250`): which
items of the text are the throttle's, and its parameters. Pure, and at the bottom: bench
runs the throttle (`bench.throttled`), the report turns a throttled cell into the govern
rule that applies it (`report.recommend`).

``throttle`` alone is the default policy throttled with govern's defaults (pauses of at
most 500 ms, the load keeps at least a tenth of the time: `DEFAULT_MIN_DUTY`);
any of `pause-ms`, `min-duty`, `stall-ms`, `window-ms` switches it on; `throttle=off`
switches it off again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base.errors import UsageError

#: govern's `[throttle]` defaults, here once (bench's policy and govern's table take them).
DEFAULT_STALL_MS = 100
DEFAULT_WINDOW_MS = 1000
DEFAULT_PAUSE_MS = 500
#: The share of time throttled bulk work keeps running. 0.1 because it, and not 0.5, brought
#: Writer's first window within 5% of unloaded on BFQ beside a flatpak installer at the idle
#: class, for both installers: 1.02x [1.01-1.04] (shell loop) and 1.03x [1.01-1.05]
#: (long-lived), against 1.05x [1.03-1.07] and 1.06x [1.04-1.10] at 0.5, the installs'
#: speed over the runs the same, 8.3-9.3 MB/s (docs/measurements/startup.md, "Beyond the
#: idle class"). Throttling only acts while interactive work is stalled on IO.
DEFAULT_MIN_DUTY = 0.1


@dataclass(frozen=True)
class Spec:
    """The throttle's parameters, with govern's `[throttle]` defaults."""

    pause_ms: int = DEFAULT_PAUSE_MS
    min_duty: float = DEFAULT_MIN_DUTY
    stall_ms: int = DEFAULT_STALL_MS
    window_ms: int = DEFAULT_WINDOW_MS

    def as_dict(self) -> dict[str, float]:
        return {"pause_ms": self.pause_ms, "min_duty": self.min_duty,
                "stall_ms": self.stall_ms, "window_ms": self.window_ms}


#: key -> (field, parse, low, high): the numbers a policy text may give, and their range
#: (a PSI window is 500 ms to 10 s; a duty of 1 would never pause, of 0 never run)
_KEYS: dict[str, tuple[str, type, float, float]] = {
    "pause-ms": ("pause_ms", int, 10, 60_000),
    "min-duty": ("min_duty", float, 0.01, 0.99),
    "stall-ms": ("stall_ms", int, 1, 10_000),
    "window-ms": ("window_ms", int, 500, 10_000),
}


def split(text: str) -> tuple[str, Spec | None]:
    """A policy text without its throttle items, and the throttle it asks for (None: none).
    ``throttle`` alone is the default policy throttled."""
    rest: list[str] = []
    on: bool | None = None
    values: dict[str, Any] = {}
    for item in text.split(","):
        key, eq, value = (part.strip() for part in item.partition("="))
        if key == "throttle":
            if eq and value not in ("on", "off"):
                raise UsageError(f"throttle={value!r} in policy {text!r}", "use on or off")
            on = not eq or value == "on"
        elif key in _KEYS:
            name, kind, low, high = _KEYS[key]
            try:
                number = kind(value)
            except ValueError:
                number = None
            if number is None or not low <= number <= high:
                what = "is out of range" if number is not None else "is not a number"
                raise UsageError(f"{key}={value!r} in policy {text!r} {what}",
                                 f"give {key}={low:g}..{high:g}")
            values[name] = number
            on = True if on is None else on
        else:
            rest.append(item)
    if on is None or not on:
        return ",".join(rest) if on is None else (",".join(rest) or "default"), None
    spec = Spec(**values)
    if spec.stall_ms >= spec.window_ms:
        raise UsageError(f"policy {text!r}: stall-ms {spec.stall_ms} is not below window-ms "
                         f"{spec.window_ms}", "a stall is counted within its window")
    return ",".join(rest).strip() or "default", spec


def govern_table(spec: Spec) -> str:
    """govern's `[throttle]` table with these parameters (those not at its defaults)."""
    lines = ["[throttle]"]
    for key, value in spec.as_dict().items():
        if value != getattr(Spec(), key):
            lines.append(f"{key} = {value:g}")
    return "\n".join(lines) + "\n" if len(lines) > 1 else ""

