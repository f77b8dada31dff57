#!/usr/bin/env python3
"""A page fetch over a slow link while bulk downloads (or an upload) run, unprotected and
with the background policy's mechanisms, on the namespace testbed (real packets; root).

Usage: sudo .venv/bin/python benchmarks/net_background.py [--link 1mbit:0ms:300ms]
    [--probes 8] [--alone-s 10] [--mode fixed|adaptive] [--mechanism acks|window|both|ingress]
    [--runs N] [--downloads 1,4] [--uploads] [--no-unprotected] [--target-ms 20]
    [--grow 0.08] [--shrink 0.1] [--margin-ms 50] [--attribution cgroup2|net_cls]
Prints, per scenario: the page fetch's median (and each fetch), the TCP handshake's
median round trip, and the bulk work's own speed as a share of the link's rate; then, per
policy, the spread over the runs of the two target figures: the fetch under four
downloads against the unloaded one, and four downloads' share of the link alone.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
from collections import defaultdict

from backburner import system
from backburner.base.errors import BackburnerError
from backburner.kernel import cgroups
from backburner.net import link as netlink
from backburner.net import measure, netcls, policy, testbed
from backburner.net.pacer import Rule, WindowRule


def line(name: str, f: measure.Figures, rate_bit: int, unloaded: float | None) -> str:
    ratio = f" ({f.fetch_median_s / unloaded:.2f}x unloaded)" if unloaded else ""
    each = " ".join(f"{t * 1000:.0f}" for t in f.fetch_s)
    what = "uploads" if f.uploads and not f.downloads else "downloads"
    bulk = (f"  {what} {f.bulk_bit_s / 1e3:.0f} kbit/s = "
            f"{100 * f.bulk_bit_s / rate_bit:.0f}% of the link"
            if f.downloads or f.uploads else "")
    return (f"{name:<30} fetch {f.fetch_median_s * 1000:6.0f} ms{ratio} "
            f"[{each}]  handshake {f.connect_median_s * 1000:.0f} ms{bulk}")


def run_policy(bed: testbed.Testbed, spec: netlink.LinkSpec, applied: policy.Applied,
               procs: tuple[str, ...], args: argparse.Namespace, base: float,
               name: str, summary: dict[str, list[tuple[float, float]]]) -> None:
    ratio4 = float("nan")
    for n in args.downloads:
        f = measure.scenario(bed, n, args.probes, cgroup_procs=procs)
        print(line(f"download:{n} {name}", f, spec.rate_bit, base), flush=True)
        if n == 4:
            ratio4 = f.fetch_median_s / base
    alone = measure.scenario(bed, 4, 0, cgroup_procs=procs, seconds=args.alone_s)
    share = alone.bulk_bit_s / spec.rate_bit
    print(f"{f'download:4 {name} alone':<30} downloads "
          f"{alone.bulk_bit_s / 1e3:.0f} kbit/s = {100 * share:.0f}% of the link over "
          f"{args.alone_s:g} s; {'job' if applied.ifb else 'ACK'} class sent "
          f"{policy.bulk_counters(applied)[1]} packets",
          flush=True)
    summary[name].append((ratio4, share))
    for knob in applied.pacer.knobs if applied.pacer is not None else []:
        values = sorted(v for _, v in knob.history[-50:])
        if values:
            now = values[len(values) // 2]
            print(f"{'':<30} pacer: {knob.name} now "
                  + (f"{now / 1e3:.0f} kbit/s" if knob.name in ("ack-rate", "ingress-rate") else
                     f"{now:.0f} bytes") + f" (median of the last 5 s), "
                  f"{len(knob.history)} steps")


def run_upload(bed: testbed.Testbed, spec: netlink.LinkSpec, applied: policy.Applied,
               procs: tuple[str, ...], args: argparse.Namespace, base: float,
               name: str) -> None:
    f = measure.scenario(bed, 0, args.probes, cgroup_procs=procs, uploads=1)
    print(line(f"upload:1 {name}", f, spec.rate_bit, base), flush=True)
    alone = measure.scenario(bed, 0, 0, cgroup_procs=procs, seconds=args.alone_s, uploads=1)
    print(f"{f'upload:1 {name} alone':<30} uploads {alone.bulk_bit_s / 1e3:.0f} kbit/s = "
          f"{100 * alone.bulk_bit_s / spec.rate_bit:.0f}% of the link over "
          f"{args.alone_s:g} s; upload class sent "
          f"{policy.bulk_counters(applied, policy.UPLOAD_CLASS)[1]} packets", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--link", default="1mbit:0ms:300ms")
    ap.add_argument("--probes", type=int, default=8)
    ap.add_argument("--alone-s", type=float, default=10.0)
    ap.add_argument("--mode", action="append", choices=["fixed", "adaptive"],
                    help="the budget (of ACKs, or with ingress of data): fixed at the "
                    "link's rate, or adaptive (the "
                    "pacer); repeatable; default adaptive")
    ap.add_argument("--mechanism", action="append", choices=policy.MECHANISMS,
                    help="what holds the downloads back (adaptive only): their ACKs paced, "
                    "their window clamped, or both; repeatable; default "
                    f"{policy.DEFAULT_MECHANISM}")
    ap.add_argument("--attribution", choices=policy.ATTRIBUTIONS, default="cgroup2",
                    help="how the job's packets are known: programs on its cgroup v2 "
                    "group, or (as where only cgroup v1 is there) its net_cls class id, "
                    "ACKs only (default %(default)s)")
    ap.add_argument("--downloads", default="1,4",
                    help="the loaded scenarios' numbers of downloads (default 1,4)")
    ap.add_argument("--uploads", action="store_true",
                    help="also one upload, unprotected and with the uplink shaped")
    ap.add_argument("--runs", type=int, default=1,
                    help="run every policy scenario this many times (default 1)")
    ap.add_argument("--no-unprotected", action="store_true",
                    help="skip the unprotected scenarios")
    ap.add_argument("--target-ms", type=float, default=Rule.target_s * 1000,
                    help="the pacer's queueing delay target (default %(default)g)")
    ap.add_argument("--grow", type=float, default=Rule.grow,
                    help="the pacer's growth per step at an empty queue (default %(default)g)")
    ap.add_argument("--shrink", type=float, default=Rule.shrink,
                    help="the pacer's shrink per step at twice the target (default "
                    "%(default)g)")
    ap.add_argument("--margin-ms", type=float, default=WindowRule.margin_s * 1000,
                    help="both: the window over the path's round trip (default %(default)g)")
    ap.add_argument("--interval-ms", type=float, default=100,
                    help="the pacer's step, one echo each (default %(default)g)")
    ap.add_argument("--filter", type=int, default=1,
                    help="the least delay of this many echoes counts (default %(default)g)")
    args = ap.parse_args()
    args.mode = args.mode or ["adaptive"]
    by_classid = args.attribution == "net_cls"
    args.mechanism = args.mechanism or ["acks" if by_classid else policy.DEFAULT_MECHANISM]
    if by_classid and args.mechanism != ["acks"]:
        ap.error("--attribution net_cls holds back the ACKs only (--mechanism acks)")
    args.downloads = [int(n) for n in args.downloads.split(",") if n]
    summary: dict[str, list[tuple[float, float]]] = defaultdict(list)
    try:
        spec = netlink.parse(args.link)
        testbed.check(spec)
        root = cgroups.unified_root()
        if root is None and not by_classid:
            raise BackburnerError("no cgroup2 hierarchy is mounted")
        with system.Transaction("net-bench") as tx:
            bed = testbed.build(tx, spec)
            testbed.start_server(bed)
            if by_classid:
                group = netcls.group(tx, secrets.token_hex(3))
            else:
                group = os.path.join(root, f"backburner-net-{secrets.token_hex(3)}")
                tx.apply(system.CgroupDir(group))
            procs = (os.path.join(group, "cgroup.procs"),)
            print(f"link {spec.spec()} (queue {spec.buffer_bytes} bytes), "
                  f"page {testbed.PAGE_BYTES} bytes, server {testbed.SERVER_CC}")
            idle = measure.scenario(bed, 0, args.probes)
            print(line("unloaded", idle, spec.rate_bit, None))
            base = idle.fetch_median_s
            for n in () if args.no_unprotected else args.downloads:
                f = measure.scenario(bed, n, args.probes, cgroup_procs=procs)
                print(line(f"download:{n} unprotected", f, spec.rate_bit, base), flush=True)
            if args.uploads and not args.no_unprotected:
                f = measure.scenario(bed, 0, args.probes, cgroup_procs=procs, uploads=1)
                print(line("upload:1 unprotected", f, spec.rate_bit, base), flush=True)
            rule = Rule(target_s=args.target_ms / 1000, grow=args.grow, shrink=args.shrink)
            window_rule = WindowRule(target_s=args.target_ms / 1000, grow=args.grow,
                                     shrink=args.shrink, margin_s=args.margin_ms / 1000)
            print(f"pacer: target {args.target_ms:g} ms, grow {args.grow:g}, shrink "
                  f"{args.shrink:g}, step {args.interval_ms:g} ms, least of {args.filter}; "
                  f"window margin {args.margin_ms:g} ms")
            fixed = [m for m in args.mechanism if m in ("acks", "ingress")] or ["acks"]
            runs = [("fixed", mech) for mech in fixed if "fixed" in args.mode] + [
                ("adaptive", mech) for mech in args.mechanism if "adaptive" in args.mode]
            for _ in range(args.runs):
                for mode, mech in runs:
                    name = mech if mode == "adaptive" else \
                        "fixed" if mech == "acks" else f"fixed {mech}"
                    name = f"{name} by net_cls" if by_classid else name
                    with system.Transaction("net-bench-policy") as ptx:
                        applied = policy.background(ptx, bed.client_ns, bed.client_dev,
                                                    None if mode == "adaptive" else spec,
                                                    group, adaptive=mode == "adaptive",
                                                    mechanism=mech, rule=rule,
                                                    window_rule=window_rule,
                                                    interval_s=args.interval_ms / 1000,
                                                    current_filter=args.filter,
                                                    attribution=args.attribution)
                        try:
                            run_policy(bed, spec, applied, procs, args, base, name, summary)
                        finally:
                            policy.stop(applied)
            if args.uploads:
                with system.Transaction("net-bench-upload") as ptx:
                    applied = policy.background(ptx, bed.client_ns, bed.client_dev, None,
                                                group, uplink_bit=spec.rate_bit,
                                                attribution=args.attribution)
                    try:
                        run_upload(bed, spec, applied, procs, args, base,
                                   "uplink shaped" + (" by net_cls" if by_classid else ""))
                    finally:
                        policy.stop(applied)
    except BackburnerError as err:
        print(f"net_background.py: {err}", file=sys.stderr)
        return err.exit_status
    for name, got in summary.items():
        ratios, shares = [r for r, _ in got], [s for _, s in got]
        print(f"{name}: {len(got)} runs; fetch under 4 downloads "
              f"{statistics.median(ratios):.2f}x unloaded [{min(ratios):.2f}-"
              f"{max(ratios):.2f}]; 4 downloads alone {100 * statistics.median(shares):.0f}% "
              f"of the link [{100 * min(shares):.0f}-{100 * max(shares):.0f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
