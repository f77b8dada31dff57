"""status.view: the text and the JSON of `backburner status`."""

from __future__ import annotations

import json

from backburner.status import view
from backburner.status.inforce import InForce
from backburner.status.sources import Disk, Entry, View


def _view() -> View:
    job = Entry("run", "backburner run (PID 10)", "PID 11 (tar)", "io idle, cpu idle",
                1_700_000_000.0, 11, 99, InForce("be:4", "idle", 0, ["blkio:/backburner/r"]),
                ["io: set idle, in force be:4"], ["command: tar xf a"])
    unit = Entry("apply", "backburner apply", "drop-in of x.service", "x.service: …", None,
                 notes=["live: /etc/systemd/system/x.service.d/50-backburner.conf"])
    return View([job, unit], [Disk("sda", "bfq")], ["a note"])


def test_the_text_says_each_source_what_is_in_force_and_what_differs() -> None:
    text = view.render(_view())
    assert text.startswith("On the back burner: 1 process, 1 file of apply; 1 differs")
    assert "run        PID 11 (tar), by backburner run (PID 10), since " in text
    assert "in force  io be:4; cpu idle; cgroup blkio:/backburner/r" in text
    assert "DIFFERS   io: set idle, in force be:4" in text
    assert "disks (the IO scheduler in force): sda bfq" in text and "note: a note" in text
    assert "Nothing is on the back burner" in view.render(View([], [], []))


def test_the_json_carries_every_field() -> None:
    data = json.loads(view.render_json(_view()))
    assert data["format"] == view.FORMAT
    (job, unit) = data["entries"]
    assert job["in_force"] == {"io": "be:4", "cpu": "idle", "nice": 0,
                               "cgroups": ["blkio:/backburner/r"], "threads": 1,
                               "threads_off": 0}
    assert job["differs"] == ["io: set idle, in force be:4"] and unit["pid"] is None
    assert data["disks"] == [{"name": "sda", "scheduler": "bfq"}]
