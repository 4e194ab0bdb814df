#!/usr/bin/env bash
# simulate --report: the page renders in headless Chromium (Debian's
# `chromium`, installed by `make deps`) without errors, nothing is fetched,
# the screenshot is not blank and the rendered page holds every chart.
# tests/spec/report_spec.lua checks its numbers against the JSON summary.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

command -v chromium >/dev/null || fail "chromium is not installed: run 'make deps'"

run simulate examples/seed-story.json --report "$TMP/seed.html"
expect_status 0
expect_stderr_empty
[ -s "$TMP/seed.html" ] || fail "$LAST: no report written"
cmp -s "$TMP/out" <("$UNDERSTORY" simulate examples/seed-story.json) || fail "$LAST: --report changed stdout"

browse() {
    timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$TMP/profile-$1" --enable-logging=stderr --v=0 "${@:2}" 2>"$TMP/chromium-$1.err"
}

browse shot --window-size=1000,2600 --screenshot="$TMP/seed.png" "file://$TMP/seed.html" >/dev/null ||
    fail "chromium could not render the report: $(tail -5 "$TMP/chromium-shot.err")"
[ "$(head -c 8 "$TMP/seed.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "the screenshot is not a PNG"
# a blank page of this size compresses to a few kilobytes; the charts do not
[ "$(stat -c %s "$TMP/seed.png")" -gt 40000 ] || fail "the screenshot looks blank ($(stat -c %s "$TMP/seed.png") bytes)"

browse dom --dump-dom "file://$TMP/seed.html" >"$TMP/dom.html" ||
    fail "chromium could not load the report: $(tail -5 "$TMP/chromium-dom.err")"
for f in shot dom; do
    ! grep -E 'CONSOLE|Uncaught|net::ERR|Failed to load' "$TMP/chromium-$f.err" ||
        fail "the page logged errors in chromium"
done
for id in use-0 evictions-0 pending-0 queue-0 queue-3 heat-0; do
    grep -q "id=\"$id\"" "$TMP/dom.html" || fail "the rendered page has no chart $id"
done
[ "$(grep -o '<svg class="chart' "$TMP/dom.html" | wc -l)" -eq 8 ] || fail "the rendered page does not have 8 charts"
grep -q 'data-figure="harvest_ratio">0.9221<' "$TMP/dom.html" || fail "the rendered page lacks the harvest ratio"

# errors: a file that cannot be written is named, exit 1; usage errors
run simulate examples/seed-story.json --report "$TMP/no/such/dir/r.html"
expect_status 1
expect_stderr_has "$TMP/no/such/dir/r.html"
run simulate examples/seed-story.json --report
expect_status 2
run simulate examples/seed-story.json --report "$TMP/r.html" --watch
expect_status 2
expect_stderr_has "--report does not go with --watch"
exit 0
