#!/usr/bin/env bash
# A policy file that is not a regular file (a FIFO, a device, a directory
# named placement.lua) is refused at once, by every command that loads
# policies, with a message that says what it is; nothing waits on it.  The
# policy directory is named once in each message.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

# Each case runs under a timeout: today's failure mode is a hang.
T=(timeout 20)
odd() { # name, then the command that puts the odd placement.lua in place
    local d=$TMP/$1
    mkdir -p "$d"
    cp policies/*.lua "$d/"
    rm "$d/placement.lua"
    shift
    "$@"
}

odd fifo mkfifo "$TMP/fifo/placement.lua"
odd dir mkdir "$TMP/dir/placement.lua"
odd dev ln -s /dev/zero "$TMP/dev/placement.lua"

for c in fifo:"a FIFO (named pipe)" dir:"a directory" dev:"a character device"; do
    name=${c%%:*} what=${c#*:}
    d=$TMP/$name

    LAST="simulate --policies $d"
    "${T[@]}" "$UNDERSTORY" simulate examples/seed-story.json --policies "$d" >"$TMP/out" 2>"$TMP/err"
    status=$?
    [ "$status" -ne 124 ] || fail "$LAST: hung on the $name"
    expect_status 2
    expect_stdout_empty
    expect_stderr_has "understory: policies $d: placement.lua: cannot read it: it is $what, not a regular file"
    [ "$(grep -o "$d" "$TMP/err" | wc -l)" -eq 1 ] || fail "$LAST: directory named twice: $(cat "$TMP/err")"
    grep -q "larger than" "$TMP/err" && fail "$LAST: reported as a size: $(cat "$TMP/err")"

    LAST="check $d"
    "${T[@]}" "$UNDERSTORY" check "$d" >"$TMP/out" 2>"$TMP/err"
    status=$?
    [ "$status" -ne 124 ] || fail "$LAST: hung on the $name"
    expect_status 1
    expect_stdout_has "$d/placement.lua: cannot read it: it is $what, not a regular file"

    # a timeline reload of such a directory is refused; the run goes on
    cat >"$TMP/reload-$name.json" <<JSON
{"name": "odd reload", "nodes": [{"name": "n1", "gpu": 1, "cpu": "8", "memory": "8Gi"}], "horizon": 10,
 "queues": [{"name": "q"}], "workloads": [],
 "timeline": [{"at": 0, "action": "reload_policies", "dir": "$d"}]}
JSON
    LAST="simulate reload-$name.json"
    "${T[@]}" "$UNDERSTORY" simulate "$TMP/reload-$name.json" >"$TMP/out" 2>"$TMP/err"
    status=$?
    [ "$status" -ne 124 ] || fail "$LAST: hung on the $name"
    expect_status 0
    expect_stdout_has "PolicyReloadRefused"
    expect_stdout_has "placement.lua: cannot read it: it is $what, not a regular file"
done

# A directory that is missing, or a file where the directory should be.
run simulate examples/seed-story.json --policies "$TMP/nowhere"
expect_status 2
expect_stderr_has "understory: policies $TMP/nowhere: cannot open the directory: No such file or directory"
run simulate examples/seed-story.json --policies README.md
expect_status 2
expect_stderr_has "understory: policies README.md: not a directory"
exit 0
