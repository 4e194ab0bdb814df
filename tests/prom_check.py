#!/usr/bin/python3
# tests/prom_check.py — reads Prometheus text exposition with a real
# parser (Debian's python3-prometheus-client), so a test checks what a
# Prometheus server would read, not what our own code thinks it wrote.
#
#   prom_check.py TEXT EXPECTED.json   exit 0 when TEXT parses and holds
#       exactly the families ({"name", "type", "help"}) and samples
#       ({"name", "labels", "value"}) EXPECTED lists, in that order;
#       otherwise print the differences and exit 1.
#   prom_check.py TEXT                 print each sample as one line,
#       NAME{LABEL="VALUE",...} VALUE (labels sorted, values repr'd as
#       Python floats), for shell tests to grep.
# Must run under Debian's /usr/bin/python3 (where the package is).
import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError and others
        print("does not parse: %r" % e)
        return 1
    if len(sys.argv) < 3:
        for fam in families:
            for s in fam.samples:
                labels = ",".join('%s="%s"' % (k, v) for k, v in sorted(s.labels.items()))
                print("%s{%s} %r" % (s.name, labels, s.value))
        return 0
    with open(sys.argv[2], encoding="utf-8") as f:
        want = json.load(f)
    got_fams = [{"name": f.name, "type": f.type, "help": f.documentation} for f in families]
    # the parser names a counter's family without its _total suffix
    want_fams = [dict(f, name=f["name"][:-6] if f["type"] == "counter" else f["name"])
                 for f in want["families"]]
    got = [{"name": s.name, "labels": s.labels, "value": s.value} for f in families for s in f.samples]
    bad = 0
    if got_fams != want_fams:
        print("families differ:\n got  %r\n want %r" % (got_fams, want_fams))
        bad = 1
    if len(got) != len(want["samples"]):
        print("%d samples, want %d" % (len(got), len(want["samples"])))
        bad = 1
    for g, w in zip(got, want["samples"]):
        if g != w:
            print("sample differs:\n got  %r\n want %r" % (g, w))
            bad = 1
    return bad


sys.exit(main())
