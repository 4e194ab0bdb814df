# tests/cli/lib.bash — helpers for the CLI checks.  Sourced by each check;
# not a check itself (tests/run.sh runs only *.sh).
#
# A check gets the binary in $UNDERSTORY, runs from the repository root, and
# exits 0 when it passes.  `run` records the exit status in $status and the
# output in $TMP/out and $TMP/err, and fails the check at once when a
# sanitizer reported anything (a crash must never pass for a non-zero exit).
set -u
: "${UNDERSTORY:?set UNDERSTORY to the understory binary}"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/understory-cli.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

run() {
    LAST="understory $*"
    "$UNDERSTORY" "$@" >"$TMP/out" 2>"$TMP/err"
    status=$?
    if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$TMP/err"; then
        cat "$TMP/err" >&2
        fail "$LAST: sanitizer report"
    fi
}

expect_status() {
    [ "$status" -eq "$1" ] ||
        fail "$LAST: exit status $status, expected $1; stderr: $(cat "$TMP/err")"
}

expect_failure() {
    [ "$status" -ne 0 ] || fail "$LAST: exit status 0, expected a failure"
}

expect_stdout_has() {
    grep -qF -- "$1" "$TMP/out" || fail "$LAST: stdout lacks \"$1\": $(cat "$TMP/out")"
}

expect_stderr_has() {
    grep -qF -- "$1" "$TMP/err" || fail "$LAST: stderr lacks \"$1\": $(cat "$TMP/err")"
}

expect_stdout_empty() {
    [ ! -s "$TMP/out" ] || fail "$LAST: expected nothing on stdout, got: $(cat "$TMP/out")"
}

expect_stderr_empty() {
    [ ! -s "$TMP/err" ] || fail "$LAST: expected nothing on stderr, got: $(cat "$TMP/err")"
}
