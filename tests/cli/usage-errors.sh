#!/usr/bin/env bash
# Bad command lines exit 2 with the reason and the usage on stderr, and
# nothing on stdout.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

check() { # expected-text args...
    local want=$1
    shift
    run "$@"
    expect_status 2
    expect_stdout_empty
    expect_stderr_has "$want"
    expect_stderr_has "usage: understory"
}

check "--bogus" simulate scenario.json --bogus
check "--bogus" --bogus
check "frobnicate" frobnicate
check "missing a command"
check "missing the scenario FILE" simulate
check "--long-grace needs a value" simulate scenario.json --long-grace
check "--long-grace" simulate scenario.json --long-grace soon
check "--long-grace" simulate scenario.json --long-grace=-5
check "--instructions" simulate scenario.json --instructions 0
check "--instructions" simulate scenario.json --instructions 12x
check "--memory" simulate scenario.json --memory lots
check "--time-limit: \"0\" is not a positive number of milliseconds" simulate scenario.json --time-limit 0
check "--time-limit needs a value" check policies --time-limit
check "--policies needs a value" simulate scenario.json --policies
check "one scenario at a time" simulate a.json b.json
check "--bogus" check policies --bogus
check "--scenario needs a value" check policies --scenario
# a file where the policy directory goes: a usage error that says so
check "examples/seed-story.json is a file, not a policy directory" check examples/seed-story.json
check "--scenario FILE" check policies/placement.lua --scenario examples/seed-story.json
check "--csv needs a value" simulate scenario.json --csv
check "--report needs a value" simulate scenario.json --report
check "missing --from DIR" diff --to policies scenario.json
check "--from needs a value" diff scenario.json --from
check "--policies" diff --from a --to b scenario.json --policies p
