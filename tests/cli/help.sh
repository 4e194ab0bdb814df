#!/usr/bin/env bash
# --help and --version: exit 0, on stdout, and the simulate help names every
# option.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

run --help
expect_status 0
expect_stdout_has "usage: understory"
expect_stdout_has "simulate FILE"
expect_stderr_empty

run --version
expect_status 0
expect_stdout_has "understory "

run simulate --help
expect_status 0
expect_stderr_empty
for opt in --json --policies --plain-ties --long-grace --instructions --memory --help; do
    expect_stdout_has "$opt"
done

# Help wins wherever it appears, even after the file.
run simulate some.json -h
expect_status 0
expect_stdout_has "usage: understory simulate"
