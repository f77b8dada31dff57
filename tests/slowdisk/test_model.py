"""The slowdisk timing model's arithmetic, exactly (no I/O, no sleeping)."""

from __future__ import annotations

import math
import random

import pytest

from backburner.base.errors import UsageError
from backburner.slowdisk.drive import SQRT_SEEK_MEAN_FRACTION, FlatProfile, Optical, Profile
from backburner.slowdisk.model import EXPIRE_S, MERGE_BYTES, Disk, Waiting
from backburner.slowdisk.profiles import (
    DVD,
    DVD_GEOMETRY,
    HDD_5400,
    HDD_7200,
    SDCARD,
    get_profile,
    list_profiles,
    profile_names,
)

MiB = 1 << 20
CAP = 64 * MiB
KiB4 = 4096

# A simple rotating profile with round numbers, no cache.
P = Profile(
    name="test",
    description="round numbers",
    rotational=True,
    command_overhead_s=0.001,
    settle_s=0.002,
    full_stroke_s=0.018,
    rpm=6000,  # 10 ms per revolution, 5 ms average latency
    rate_outer=100e6,
    rate_inner=50e6,
)


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-12, abs=1e-15)


def test_random_read_cost_is_overhead_seek_rotation_transfer() -> None:
    d = Disk(P, CAP)
    off = CAP // 4
    b = d.cost_breakdown(off, KiB4, False, 0.0)
    assert b.kind == "random"
    seek = 0.002 + 0.016 * math.sqrt(0.25)
    rate = 100e6 - 50e6 * 0.25
    assert b.seek_s == approx(seek)
    assert b.rotation_s == approx(0.005)
    assert b.transfer_s == approx(KiB4 / rate)
    assert b.service_s == approx(0.001 + seek + 0.005 + KiB4 / rate)
    # cost_breakdown does not change the state; service returns the same times.
    assert d.counters.requests == 0
    assert d.service(off, KiB4, False, 0.0) == (0.0, approx(b.finish))


def test_sequential_read_has_no_seek_and_no_rotation() -> None:
    d = Disk(P, CAP)
    _, f1 = d.service(0, KiB4, False, 0.0)  # head starts at 0: already sequential
    start, f2 = d.service(KiB4, KiB4, False, f1)
    b = d.last
    assert b is not None and b.kind == "sequential"
    assert b.seek_s == 0 and b.rotation_s == 0
    assert f2 - start == approx(0.001 + KiB4 / d.rate_at(KiB4))
    random_cost = Disk(P, CAP).cost_breakdown(CAP // 2, KiB4, False, 0.0).service_s
    assert random_cost > 10 * (f2 - start)
    assert d.counters.sequential == 2 and d.counters.seeks == 0


def test_seek_curve_monotone_bounded_and_anchored() -> None:
    d = Disk(P, CAP)
    assert d.seek_time(0) == 0.0
    assert d.seek_time(1) == pytest.approx(P.settle_s, abs=1e-5)
    assert d.seek_time(CAP) == approx(P.full_stroke_s)
    assert d.seek_time(-CAP // 2) == d.seek_time(CAP // 2)  # direction does not matter
    prev = 0.0
    for dist in [1, 512, KiB4, MiB, 8 * MiB, 32 * MiB, CAP - 1, CAP, 2 * CAP]:
        t = d.seek_time(dist)
        assert prev <= t <= P.full_stroke_s
        prev = t
    # Short seeks are settle-dominated.
    assert d.seek_time(KiB4) < 1.1 * P.settle_s


def test_average_seek_matches_the_closed_form() -> None:
    # Average over uniformly random start/end pairs = settle + (full - settle) * 8/15.
    d = Disk(P, CAP)
    n = 400
    pts = [(i + 0.5) / n * CAP for i in range(n)]
    mean = sum(d.seek_time(int(abs(a - b))) for a in pts for b in pts) / n**2
    assert mean == pytest.approx(P.average_seek_s, rel=0.01)
    assert math.isclose(SQRT_SEEK_MEAN_FRACTION, 8 / 15)


def test_rotational_latency_only_on_non_sequential() -> None:
    d = Disk(P, CAP)
    d.service(0, KiB4, False, 0.0)
    assert d.last is not None and d.last.rotation_s == 0.0  # head was at 0
    d.service(CAP // 2, KiB4, False, 1.0)
    assert d.last is not None and d.last.rotation_s == approx(0.005)
    d.service(CAP // 2 + KiB4, KiB4, False, 2.0)
    assert d.last is not None and d.last.rotation_s == 0.0
    assert P.rotational_latency_s == approx(0.005)
    assert HDD_7200.rotational_latency_s == pytest.approx(4.1667e-3, rel=1e-4)
    assert HDD_5400.rotational_latency_s == pytest.approx(5.5556e-3, rel=1e-4)
    assert SDCARD.rotational_latency_s == 0.0


def test_zoned_rate_at_both_ends() -> None:
    d = Disk(P, CAP)
    assert d.rate_at(0) == 100e6  # HDD: offset 0 = outer edge = fastest
    assert d.rate_at(CAP) == 50e6
    assert d.rate_at(CAP // 2) == approx(75e6)
    disc = DVD_GEOMETRY.medium_bytes
    dvd = Disk(DVD, disc)
    assert not DVD.outer_at_start
    assert dvd.rate_at(0) == approx(DVD.rate_inner)  # DVD (CAV): the END is the outer edge
    assert dvd.rate_at(disc) == approx(DVD.rate_outer)
    assert dvd.rate_at(0) < dvd.rate_at(disc)
    # a small image sits on the inner rings of the disc: it never reaches the fast edge
    small = Disk(DVD, CAP)
    assert small.rate_at(CAP) == approx(dvd.rate_at(CAP))
    assert small.rate_at(CAP) < 1.05 * DVD.rate_inner
    # Transfer time follows the zone.
    big = 8 * MiB
    outer = Disk(P, CAP).cost_breakdown(0, big, False, 0.0).transfer_s
    inner = Disk(P, CAP).cost_breakdown(CAP - big, big, False, 0.0).transfer_s
    assert outer == approx(big / 100e6)
    assert inner == approx(big / d.rate_at(CAP - big))


def test_cache_hit_and_read_ahead() -> None:
    p = Profile(**{**P.__dict__, "name": "cached", "cache_bytes": MiB,
                   "cache_hit_overhead_s": 0.0001, "interface_rate": 300e6})
    d = Disk(p, CAP)
    off = 16 * MiB
    _, f = d.service(off, 64 * 1024, False, 0.0)
    # Re-reading the data just read: served from the cache.
    d.service(off, KiB4, False, f)
    b = d.last
    assert b is not None and b.kind == "cache"
    assert b.service_s == approx(0.0001 + KiB4 / 300e6)
    assert b.seek_s == 0 and b.rotation_s == 0
    # Idle long enough: the drive read ahead (cache_bytes beyond the last request).
    later = b.finish + 1.0
    d.service(off + 512 * 1024, KiB4, False, later)
    assert d.last is not None and d.last.kind == "cache"
    assert d.counters.cache_hits == 2
    # Without idle time there is no read-ahead: the continuation is sequential, not cached.
    d2 = Disk(p, CAP)
    d2.service(off, KiB4, False, 0.0)
    d2.service(off + KiB4, KiB4, False, 0.0)  # queued behind: arrives while busy
    assert d2.last is not None and d2.last.kind == "sequential"
    # A far-away read misses and seeks.
    d.service(0, KiB4, False, later + 1)
    assert d.last is not None and d.last.kind == "random"


def test_read_ahead_stops_when_the_segment_is_full_of_unread_data() -> None:
    # A reader slower than the media: between its reads the drive reads ahead, but only
    # until its segment holds cache_bytes beyond the last request, so the next read of the
    # stream is always still in the cache (no read-ahead may evict what was not yet read).
    d = Disk(HDD_7200, 64 * MiB)
    size = 64 * 1024
    t = 0.0
    for i in range(200):
        _, t = d.service(32 * MiB + i * size, size, False, t + 0.003)
    assert d.counters.seeks == 1, d.counters.as_dict()  # only the first
    assert d.counters.cache_hits == 199
    assert d.head <= 32 * MiB + 200 * size + HDD_7200.cache_bytes


def test_short_forward_gap_streams_instead_of_seeking() -> None:
    d = Disk(P, CAP)
    d.service(0, KiB4, False, 0.0)
    d.service(2 * KiB4, KiB4, False, 0.0)  # 4 KiB gap: cheaper to let it pass than to seek
    b = d.last
    assert b is not None and b.kind == "skip"
    assert b.rotation_s == 0 and b.seek_s == 0
    # the 4 KiB gap passes under the head at the head's rate, then the data is read
    assert b.transfer_s == approx(KiB4 / d.rate_at(KiB4) + KiB4 / d.rate_at(2 * KiB4))
    assert d.counters.sequential == 2


def test_queueing_on_the_virtual_clock() -> None:
    d = Disk(P, CAP)
    s1, f1 = d.service(CAP // 2, KiB4, False, 10.0)
    s2, f2 = d.service(CAP // 4, KiB4, False, 10.0)  # arrives at the same time
    assert s1 == 10.0 and s2 == f1 and f2 > f1
    one = Disk(P, CAP).cost_breakdown(CAP // 2, KiB4, False, 0.0).service_s
    assert f1 - s1 == approx(one)
    b = d.last
    assert b is not None and b.queue_s == approx(f1 - 10.0)
    c = d.counters
    assert c.requests == 2 and c.reads == 2 and c.bytes_read == 2 * KiB4
    assert c.busy_s == approx((f1 - s1) + (f2 - s2))
    assert c.queue_s == approx(f1 - 10.0)
    assert c.latency_s == approx((f1 - 10.0) + (f2 - 10.0))
    # A request arriving after the disk went idle starts immediately.
    s3, _ = d.service(0, KiB4, False, f2 + 5)
    assert s3 == f2 + 5


def test_writes_cost_overhead_and_random_penalty() -> None:
    d = Disk(SDCARD, CAP)
    b = d.cost_breakdown(CAP // 2, KiB4, True, 0.0)
    assert b.kind == "random"
    assert b.service_s == pytest.approx(2.0e-3, rel=0.01)  # A1: 500 random-write IOPS
    r = d.cost_breakdown(CAP // 2, KiB4, False, 0.0)
    assert r.service_s == pytest.approx(1 / 1500, rel=0.01)  # A1: 1500 random-read IOPS
    d.service(0, KiB4, True, 0.0)
    d.service(KiB4, KiB4, True, 1.0)
    seq = d.last
    assert seq is not None and seq.kind == "sequential" and seq.write_penalty_s == approx(
        SDCARD.write_overhead_s)
    assert seq.service_s < b.service_s / 3
    c = d.counters
    assert c.writes == 2 and c.bytes_written == 2 * KiB4 and c.reads == 0


def test_flat_profile_is_a_constant_delay_without_queueing() -> None:
    p = get_profile("flat:20")
    assert isinstance(p, FlatProfile) and p.delay_s == approx(0.020)
    d = Disk(p, CAP)
    rng = random.Random(1)
    for _ in range(10):
        off = rng.randrange(0, CAP, KiB4)
        now = rng.uniform(0, 1)
        start, finish = d.service(off, rng.choice([512, KiB4, MiB]), rng.random() < 0.5, now)
        assert start == now and finish == approx(now + 0.020)
    assert d.counters.requests == 10 and d.counters.seeks == 0
    assert get_profile("flat:0").delay_s == 0.0
    assert get_profile("flat:0.5").delay_s == approx(0.0005)
    for bad in ("flat:", "flat:x", "flat:-1", "flat:nan", "flat:inf", "flat:1e300", "flat:10001"):
        with pytest.raises(UsageError):
            get_profile(bad)


def test_dvd_seeks_are_100_to_135_ms_on_a_full_disc() -> None:
    d = Disk(DVD, DVD_GEOMETRY.medium_bytes)
    assert 0.100 <= DVD.average_seek_s <= 0.135
    assert 0.100 <= DVD.average_random_access_s <= 0.135
    # the same average from the model's own seeks between uniformly random offsets
    n = 60
    pts = [int((i + 0.5) / n * d.span) for i in range(n)]
    mean = sum(d.seek_time(b - a, a) for a in pts for b in pts) / n**2
    assert mean == pytest.approx(DVD.average_seek_s, rel=0.01)
    assert DVD.read_only_medium
    # ~6.6x at the start of the disc, 16x at the end (1x = 11.08 Mbit/s).
    assert DVD.rate_outer == pytest.approx(16 * 11.08e6 / 8)
    assert DVD.rate_inner / DVD.rate_outer == pytest.approx(24 / 58)


def test_optical_radius_and_seeks_follow_the_spiral() -> None:
    """Offset 0 at 24 mm, a full disc ends at 58 mm, the radius grows as a square root; a
    1 GB image ends at ~34.2 mm: its longest seek crosses 10 mm, not 34."""
    disc = DVD_GEOMETRY.medium_bytes
    d = Disk(DVD, disc)
    assert d.radius_mm(0) == approx(24.0)
    assert d.radius_mm(disc) == pytest.approx(58.0)
    assert d.radius_mm(disc // 2) == pytest.approx(math.sqrt((58**2 + 24**2) / 2), rel=1e-6)
    gb = Disk(DVD, 10**9)
    assert gb.span == disc and gb.radius_mm(10**9) == pytest.approx(34.19, abs=0.01)
    assert gb.seek_time(10**9) == pytest.approx(0.075 + 0.0045 * 10.19, abs=1e-4)
    assert gb.seek_time(10**9) < 0.55 * d.seek_time(disc)
    # direction does not matter; the same byte distance is shorter radially further out
    assert d.seek_time(-MiB, 2 * MiB) == d.seek_time(MiB, MiB)
    assert d.seek_time(32 * MiB, disc - 32 * MiB) < d.seek_time(32 * MiB, 0)
    # an image larger than a disc is spread over the whole radius
    big = Disk(DVD, 2 * disc)
    assert big.span == 2 * disc and big.radius_mm(2 * disc) == pytest.approx(58.0)
    with pytest.raises(ValueError):
        Disk(P, CAP).radius_mm(0)


def test_optical_profiles_are_checked() -> None:
    with pytest.raises(ValueError, match="inner edge"):
        Profile(**{**DVD.__dict__, "outer_at_start": True})
    with pytest.raises(ValueError, match="optical curve"):
        Profile(**{**DVD.__dict__, "full_stroke_s": 0.200})
    with pytest.raises(ValueError):
        Optical(**{**DVD_GEOMETRY.__dict__, "r_inner_mm": 60.0})
    with pytest.raises(ValueError):
        Optical(**{**DVD_GEOMETRY.__dict__, "block_bytes": 0})
    with pytest.raises(ValueError):
        Optical(**{**DVD_GEOMETRY.__dict__, "long_s": -1.0})


def test_a_dvd_reads_whole_ecc_blocks() -> None:
    """A 4 KiB read costs one 32 KiB ECC block of media time and leaves the head at the
    block's end: the rest of the block is in the buffer, the next block is sequential."""
    d = Disk(DVD, CAP)
    blk = DVD_GEOMETRY.block_bytes
    off = 10 * MiB + 8192
    d.service(off, KiB4, False, 0.0)
    b = d.last
    assert b is not None and b.kind == "random"
    first = off - 8192
    assert b.transfer_s == approx(blk / d.rate_at(first))
    assert d.head == first + blk
    _, f = d.service(first + 20 * 1024, KiB4, False, 0.0)  # same block, back to back
    assert d.last is not None and d.last.kind == "cache"
    d.service(first + blk + 4096, KiB4, False, f)  # next block: sequential, no seek
    assert d.last is not None and d.last.kind == "sequential" and d.last.seek_s == 0
    assert d.last.transfer_s == approx(blk / d.rate_at(first + blk))


def test_hdd_profiles_match_datasheet_averages() -> None:
    assert HDD_7200.average_seek_s == pytest.approx(8.5e-3, abs=0.1e-3)
    assert 11e-3 <= HDD_5400.average_seek_s <= 12e-3
    assert HDD_5400.settle_s == HDD_7200.settle_s == 1.0e-3
    assert HDD_7200.average_random_access_s < HDD_5400.average_random_access_s


def test_profiles_registry() -> None:
    names = [p.name for p in list_profiles()]
    assert names == ["hdd-5400", "hdd-7200", "dvd", "sdcard"]
    assert profile_names() == [*names, "flat:MS"]
    for p in list_profiles():
        assert get_profile(p.name) is p
        assert p.source and p.description
        assert p.as_dict()["name"] == p.name
    assert get_profile(" HDD-7200 ") is HDD_7200


def test_unknown_profile_is_a_usage_error_listing_known_names() -> None:
    with pytest.raises(UsageError) as exc:
        get_profile("floppy")
    msg = str(exc.value)
    assert "floppy" in msg
    for name in ("hdd-5400", "hdd-7200", "dvd", "sdcard", "flat:MS"):
        assert name in msg
    assert exc.value.exit_status == 64


def test_invalid_profiles_and_requests_are_rejected() -> None:
    with pytest.raises(ValueError):
        Profile(**{**P.__dict__, "full_stroke_s": 0.001})  # shorter than settle
    with pytest.raises(ValueError):
        Profile(**{**P.__dict__, "rpm": 0})
    with pytest.raises(ValueError):
        Profile(**{**P.__dict__, "command_overhead_s": -1.0})
    with pytest.raises(ValueError):
        Disk(P, 0)
    with pytest.raises(ValueError):
        Disk(P, CAP).service(-1, KiB4, False, 0.0)


# --- the host queue of a drive without command queueing ---------------------------------------


def _waiting(offsets_kib: list[int], length: int = 16 * 1024, arrival: float = 0.0,
             is_write: bool = False) -> list[Waiting]:
    return [Waiting(o * 1024, length, is_write, arrival) for o in offsets_kib]


def test_next_command_sweeps_up_from_where_the_last_command_ended_and_merges() -> None:
    d = Disk(DVD, CAP)
    d.service(1024 * 1024, 4096, False, 0.0)  # the last command ended at 1028 KiB
    w = _waiting([2000, 1028, 1044, 1060, 500, 1100])
    group = d.next_command(w, 0.0)
    assert [g.offset // 1024 for g in group] == [1028, 1044, 1060]  # 1100 does not continue
    assert d.dispatch(group, 0.0) == group[0].finish == group[-1].finish
    assert d.counters.requests == 2 and d.counters.merged == 2
    assert d.last_end == 1076 * 1024
    rest = [x for x in w if x not in group]
    assert [g.offset // 1024 for g in d.next_command(rest, 0.0)] == [1100]


def test_next_command_goes_back_to_the_oldest_when_nothing_is_ahead() -> None:
    """As mq-deadline: out of higher sectors, it starts again from the earliest expiry."""
    d = Disk(DVD, CAP)
    d.service(32 * MiB, 4096, False, 0.0)
    w = [Waiting(900 * 1024, 4096, False, 0.2), Waiting(300 * 1024, 4096, False, 0.3),
         Waiting(600 * 1024, 4096, False, 0.1)]
    assert [g.offset // 1024 for g in d.next_command(w, 0.3)] == [600]


def test_merges_stop_at_the_limit_and_never_mix_reads_and_writes() -> None:
    d = Disk(DVD, CAP)
    n = MERGE_BYTES // (16 * 1024)
    w = _waiting([16 * i for i in range(n + 4)])
    assert sum(g.length for g in d.next_command(w, 0.0)) == MERGE_BYTES
    mixed = _waiting([0]) + _waiting([16], is_write=True) + _waiting([32])
    assert [g.offset for g in d.next_command(mixed, 0.0)] == [0]


def test_a_burst_issued_downwards_merges_in_front_of_the_oldest() -> None:
    """Nothing ahead of the head: the oldest (the highest of a downward burst) goes first,
    with the requests below it that end where it starts, as the elevator's front merges."""
    d = Disk(DVD, CAP)
    d.service(10 * MiB, 16 * 1024, False, 0.0)
    n = MERGE_BYTES // (16 * 1024)
    w = [Waiting(10 * MiB - (i + 1) * 16 * 1024, 16 * 1024, False, i * 1e-4)
         for i in range(n + 3)]
    group = d.next_command(w, 0.01)
    assert [g.offset for g in group] == sorted(x.offset for x in w[:n])
    assert sum(g.length for g in group) == MERGE_BYTES


def test_a_command_picked_ahead_takes_no_request_behind_the_head() -> None:
    d = Disk(DVD, CAP)
    d.service(1024 * 1024, 16 * 1024, False, 0.0)  # ended at 1040 KiB
    w = _waiting([1024, 1040, 1056])
    assert [g.offset // 1024 for g in d.next_command(w, 0.0)] == [1040, 1056]


def test_a_request_the_sweep_passed_goes_first_once_expired() -> None:
    d = Disk(DVD, CAP)
    d.service(10 * MiB, 4096, False, 0.0)
    behind = Waiting(1 * MiB, 4096, False, 0.0)
    ahead = Waiting(20 * MiB, 4096, False, 0.2)
    assert d.next_command([behind, ahead], EXPIRE_S / 2) == [ahead]
    assert d.next_command([behind, ahead], EXPIRE_S + 0.01) == [behind]


def test_a_merged_command_costs_one_command_overhead() -> None:
    """Four contiguous 32 KiB requests as one command vs one by one: three overheads less."""
    one, four = Disk(DVD, CAP), Disk(DVD, CAP)
    kib = DVD_GEOMETRY.block_bytes // 1024  # whole ECC blocks, so none is read twice
    w = _waiting([0, kib, 2 * kib, 3 * kib], length=kib * 1024)
    merged = one.dispatch(one.next_command(w, 0.0), 0.0)
    t = 0.0
    for x in _waiting([0, kib, 2 * kib, 3 * kib], length=kib * 1024):
        t = four.service(x.offset, x.length, False, 0.0)[1]
    assert t - merged == pytest.approx(3 * DVD.command_overhead_s, rel=1e-2)  # rate varies


def test_only_the_dvd_takes_one_command_at_a_time() -> None:
    assert not DVD.command_queueing
    assert all(p.command_queueing for p in (HDD_5400, HDD_7200, SDCARD))


def test_the_log_holds_every_command_with_what_it_carried() -> None:
    d = Disk(DVD, CAP, log=3)
    d.service(0, 4096, False, 0.0)
    mark = d.counters.requests
    w = _waiting([3028, 3044, 3060])  # beyond what the drive read ahead meanwhile
    d.dispatch(d.next_command(w, 1.0), 1.0)
    d.service(32 * MiB, 4096, False, 2.0)
    since = d.served_since(mark)
    assert [(seq, b.offset // 1024, b.length // 1024, carried) for seq, b, carried in since] == [
        (1, 3028, 48, 3), (2, 32 * 1024, 4, 1)]
    assert [b.kind for _, b, _ in since] == ["random", "random"]
    assert since[1][1].seek_s > 0 and since[1][1].finish > since[1][1].start >= 2.0
    d.service(32 * MiB + (256 << 10), 4096, False, 3.0)  # read ahead by the drive
    assert [seq for seq, _, _ in d.served] == [1, 2, 3]  # the oldest went
    assert d.served_since(3)[0][1].kind == "cache"
