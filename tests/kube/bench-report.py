#!/usr/bin/env python3
"""tests/kube/bench-report.py — the figures of tests/kube/bench.sh, from
the API server's audit log (every write, with the server's timestamps),
the daemon's /metrics and what bench.sh read of the daemon's process.

  binds/s        AI pods / (last AI pod bound - first AI pod created)
  created/s      AI pods / (last created - first created)
  bound/s        AI pods / (last bound - first bound)
  create->bind   per AI pod: its bind's time - its create's time
                 (median, p99, max)
  ceiling        --ceiling-audit: the same binds/s of the trivial
                 binder's run (kube-create --bind, no scheduler), and
                 understory's binds/s as a ratio of it

Times are the audit events' stageTimestamp (ResponseComplete: the write
is done).  --check: exit 1 unless every AI pod has exactly one successful
bind and no other pod of the namespace was bound twice."""
import argparse
import collections
import datetime
import re
import sys


def ts(s):
    # "2026-12-01T05:30:00.123456Z"
    return datetime.datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    i = min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[i]


def read_audit(path, namespace):
    """Each pod of namespace: its create's time, its binds' times; and the
    daemon's writes by (verb, resource, code)."""
    import json
    created, bound = {}, collections.defaultdict(list)
    daemon_writes = collections.Counter()
    with open(path) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("stage") != "ResponseComplete":
                continue
            ref = e.get("objectRef") or {}
            code = (e.get("responseStatus") or {}).get("code", 0)
            user = (e.get("user") or {}).get("username", "")
            if user == "system:serviceaccount:understory-system:understory":
                what = ref.get("resource", "?") + ("/" + ref["subresource"] if ref.get("subresource") else "")
                daemon_writes[(e.get("verb"), what, code)] += 1
            if ref.get("namespace") != namespace or ref.get("resource") != "pods" or e.get("verb") != "create":
                continue
            if code not in (200, 201):
                continue
            name = ref.get("name")
            if not ref.get("subresource"):
                created.setdefault(name, ts(e["stageTimestamp"]))
            elif ref.get("subresource") == "binding":
                bound[name].append(ts(e["stageTimestamp"]))
    return created, bound, daemon_writes


def ceiling(out, audit, namespace, rate):
    """The trivial binder's run (kube-create --bind): its binds/s, and
    understory's rate as a share of it."""
    created, bound, _ = read_audit(audit, namespace)
    ai = [n for n in created if n in bound]
    if not ai:
        out.write("ceiling (trivial binder): nothing bound\n")
        return
    c0 = min(created.values())
    b1 = max(bound[n][0] for n in ai)
    lat = [bound[n][0] - created[n] for n in ai]
    top = len(ai) / max(b1 - c0, 1e-9)
    out.write("ceiling (trivial binder, no scheduler): %d bound, %.0f binds/s (%.2f s), create->bind median %.2f s, p99 %.2f s\n"
              % (len(ai), top, b1 - c0, pct(lat, 50), pct(lat, 99)))
    out.write("understory / ceiling: %.2f\n" % (rate / top))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--audit", required=True)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--namespace", default="bench")
    ap.add_argument("--pods", type=int, required=True)
    ap.add_argument("--cpu-seconds", type=float, required=True)
    ap.add_argument("--peak-kib", type=int, required=True)
    ap.add_argument("--rss-kib", type=int, required=True)
    ap.add_argument("--serve-out")
    ap.add_argument("--shape", default="")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--ceiling-audit", help="the audit log of the trivial binder's run (bench.sh's ceiling)")
    a = ap.parse_args()

    created, bound, daemon_writes = read_audit(a.audit, a.namespace)
    twice = sorted(n for n, b in bound.items() if len(b) > 1)
    ai = sorted(n for n in created if n in bound)
    lat = [bound[n][0] - created[n] for n in ai]
    c0, c1 = min(created.values()), max(created.values())
    b0, b1 = min(bound[n][0] for n in ai), max(bound[n][0] for n in ai)
    rate = len(ai) / max(b1 - c0, 1e-9)

    verbs = collections.Counter()
    cycles = {}
    for line in open(a.metrics):
        m = re.match(r'understory_api_requests_total\{verb="([^"]*)",code="([^"]*)"\} (\S+)', line)
        if m:
            verbs["%s %s" % (m.group(1), m.group(2))] += float(m.group(3))
        m = re.match(r'understory_cycle_duration_seconds_(sum|count)\{phase="([^"]*)"\} (\S+)', line)
        if m:
            cycles.setdefault(m.group(2), {})[m.group(1)] = float(m.group(3))

    out = sys.stdout
    out.write("shape: %s\n" % a.shape)
    out.write("AI pods created: %d, bound: %d (bound twice: %d)\n" % (len(created), len(ai), len(twice)))
    out.write("binds/s, first AI pod created to last bound: %.0f (%.2f s)\n" % (rate, b1 - c0))
    out.write("created/s, first created to last created: %.0f (%.2f s)\n" % (len(created) / max(c1 - c0, 1e-9), c1 - c0))
    out.write("bound/s, first bound to last bound: %.0f (%.2f s)\n" % (len(ai) / max(b1 - b0, 1e-9), b1 - b0))
    out.write("create->bind: median %.2f s, p99 %.2f s, max %.2f s\n" % (pct(lat, 50), pct(lat, 99), max(lat or [0])))
    out.write("daemon: %.2f CPU s, peak RSS %.1f MiB (now %.1f MiB)\n" % (a.cpu_seconds, a.peak_kib / 1024.0, a.rss_kib / 1024.0))
    out.write("daemon API requests by verb and code (/metrics):\n")
    for k in sorted(verbs):
        out.write("  %-12s %d\n" % (k, verbs[k]))
    out.write("daemon writes the API server recorded (audit log):\n")
    for (verb, what, code), n in sorted(daemon_writes.items()):
        out.write("  %-7s %-18s %3d  %d\n" % (verb, what, code, n))
    out.write("cycles (phase: count, mean ms):\n")
    for ph in sorted(cycles):
        c = cycles[ph]
        if c.get("count"):
            out.write("  %-12s %6d %8.2f\n" % (ph, c["count"], 1000 * c.get("sum", 0) / c["count"]))
    if a.ceiling_audit:
        ceiling(out, a.ceiling_audit, a.namespace, rate)
    if a.check and (len(ai) != a.pods or len(created) != a.pods or twice):
        sys.stderr.write("bench-report: %d of %d AI pods created, %d bound, bound twice: %s\n"
                         % (len(created), a.pods, len(ai), ", ".join(twice[:5])))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
