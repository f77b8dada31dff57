"""bench.netplan: a network study's options become a configuration and a plan, its cells
fill the matrix's dimensions with the link's meaning, and every option that only means
something for a disk is refused with one line (64) before anything is touched."""

from __future__ import annotations

import json

import pytest

from backburner.base.errors import UsageError
from backburner.bench import config, netplan, study
from backburner.bench.config import BenchConfig
from backburner.net import link
from backburner.store.cell import Cell


def _net(**kw: object) -> BenchConfig:
    return config.from_options(net_link="1mbit:0ms", seed=5, **kw)  # type: ignore[arg-type]


def test_defaults_of_a_network_study() -> None:
    cfg = _net()
    assert (cfg.probes, cfg.loads, cfg.policies, cfg.schedulers) == (
        ["net:page"], ["none"], ["default"], ["fifo"])
    assert cfg.device == "link:1mbit:0ms:300ms" and not cfg.cold
    assert cfg.settle_s == 3.0 and cfg.timeout_s == 20.0
    assert cfg.abort_factor == config.MAX_ABORT_FACTOR  # the limit is --timeout alone
    # a disk study's defaults are untouched
    disk = config.from_options(probes=["/bin/true"])
    assert disk.net_link is None and disk.cold and disk.schedulers == ["mq-deadline", "bfq"]


def test_the_cells_are_the_link_its_queue_probes_loads_policies() -> None:
    cfg = _net(probes=["net:page", "rtt=net:handshake"], loads=["download:1", "download:4"],
               policies=["default", "background"])
    plan = config.plan(cfg)
    assert isinstance(plan, netplan.NetPlan)
    assert plan.link == link.parse("1mbit:0ms:300ms")
    assert {p.label: p.figure for p in plan.probes.values()} == {"net:page": "fetch_s",
                                                                 "rtt": "connect_s"}
    assert {t: (ld.kind, ld.count) for t, ld in plan.loads.items()} == {
        "none": ("none", 0), "download:1": ("download", 1), "download:4": ("download", 4)}
    assert len(plan.cells) == 2 * (1 + 2 * 2)
    assert {c.device for c in plan.cells} == {"link:1mbit:0ms:300ms"}
    assert {c.scheduler for c in plan.cells} == {"fifo"} and all(c.network for c in plan.cells)
    loaded = next(c for c in plan.cells if c.load == "download:4" and c.probe == "rtt")
    # judged against the same probe over the same link, unloaded
    assert loaded.baseline() == Cell("rtt", "link:1mbit:0ms:300ms", "fifo", "none", "-")
    assert loaded.baseline() in plan.cells
    assert len(plan.slots()) == len(plan.cells) * (cfg.trials + cfg.warmup)


@pytest.mark.parametrize(("given", "flag"), [
    *[({key: ["x"] if key in ("schedulers", "prepares", "prepare_commands") else
        1 if key == "rotational" else True if key == "trace" else "x"}, flag)
      for key, flag in netplan.DISK_OPTIONS.items()],
    ({"cold": True}, "--cold"),
])
def test_every_disk_option_is_refused(given: dict, flag: str) -> None:
    with pytest.raises(UsageError) as err:
        _net(**given)
    assert err.value.exit_status == 64
    assert str(err.value).startswith(f"{flag} is for a disk study") and "\n" not in str(err.value)


def test_warm_is_what_a_network_study_is_anyway() -> None:
    assert not _net(cold=False).cold


def test_a_disk_preset_is_no_base_for_a_network_study() -> None:
    with pytest.raises(UsageError, match="--preset quick is a disk study"):
        config.from_options(preset_name="quick", net_link="1mbit:0ms")


@pytest.mark.parametrize(("kw", "message"), [
    ({"net_link": "1foo:0ms"}, "unknown link rate"),
    ({"net_link": "1mbit"}, "unknown link spec"),
    ({"net_link": "100000gbit:0ms"}, "is above 10gbit"),  # net.link's bounds, for all
    ({"net_link": "10gbit:0ms:1000000ms"}, "is above 10000ms"),
    ({"net_link": "10gbit:0ms:1000ms"}, "is beyond the testbed"),  # a queue over 1 GiB
    ({"probes": ["python3 -c pass"]}, "unknown network probe 'python3 -c pass'"),
    ({"probes": ["a=net:page", "a=net:handshake"]}, "two probes are labelled 'a'"),
    ({"loads": ["readers:1:seq"]}, "unknown network load 'readers:1:seq'"),
    ({"loads": ["upload"]}, "unknown network load 'upload'"),
    ({"loads": ["download:0"]}, "0 downloads out of range"),
    ({"loads": ["upload:0"]}, "0 uploads out of range"),
    ({"loads": ["seed:2"]}, "use none, download:N or upload:N"),
    ({"loads": [f"download:{netplan.MAX_DOWNLOADS + 1}"]}, "downloads out of range"),
    ({"policies": ["io=idle"]}, "unknown network policy 'io=idle'"),
    ({"policies": ["govern"]}, "unknown network policy 'govern'"),
])
def test_bad_parts_are_one_line_and_64(kw: dict, message: str) -> None:
    options = {"net_link": "1mbit:0ms", **kw}
    with pytest.raises(UsageError) as err:
        config.plan(config.from_options(seed=1, **options))
    assert message in str(err.value) and err.value.exit_status == 64


def test_a_stored_configuration_is_checked_again() -> None:
    """--resume rebuilds the plan from the stored JSON: a disk part in it is refused."""
    stored = _net().to_dict()
    assert config.plan(BenchConfig.from_dict(json.loads(json.dumps(stored)))).cells
    for key, value in (("cold", True), ("schedulers", ["bfq"]), ("trace", True),
                       ("prepare_commands", ["true"])):
        with pytest.raises(UsageError):
            config.plan(BenchConfig.from_dict({**stored, key: value}))


@pytest.mark.parametrize(("kw", "message"), [
    ({"probes": ["net:page"]}, "probe 'net:page' is a network probe: it needs --net-link"),
    ({"probes": ["/bin/true"], "loads": ["download:4"]},
     "load 'download:4' is a network load: it needs --net-link"),
])
def test_network_parts_without_a_link(kw: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        config.plan(config.from_options(seed=1, **kw))


@pytest.mark.parametrize(("spec", "label"), [
    ("1mbit:0ms", "link:1mbit:0ms:300ms"), ("500kbit:40ms:1000ms", "link:500kbit:40ms:1000ms"),
    ("1.5mbit:20ms:50ms", "link:1500kbit:20ms:50ms"), ("2gbit:0.5ms", "link:2gbit:0.5ms:300ms"),
    ("8001bit:0ms", "link:8001bit:0ms:300ms"),
])
def test_the_link_label(spec: str, label: str) -> None:
    assert netplan.device_label(link.parse(spec)) == label
    assert Cell("p", label, "fifo", "none", "-").network
    assert not Cell("p", "testbed:4G", "bfq", "none", "-").network


def test_study_file_key() -> None:
    options, preset, _ = study.parse({"net-link": "1mbit:0ms", "load": "download:4",
                                      "policy": ["default", "background"]})
    assert preset is None and options["net_link"] == "1mbit:0ms"
    cfg = config.from_options(seed=1, **options)
    assert cfg.loads == ["none", "download:4"] and cfg.policies == ["default", "background"]
    with pytest.raises(UsageError, match="'net-link' must be a string"):
        study.parse({"net-link": 1})
    with pytest.raises(UsageError, match="--scheduler is for a disk study"):
        config.from_options(seed=1, **study.parse({"net-link": "1mbit:0ms",
                                                  "scheduler": "bfq"})[0])
