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
for opt in --json --policies --plain-ties --check-invariants --long-grace --instructions --memory --time-limit --cycle-budget --help; do
    expect_stdout_has "$opt"
done

# Help wins wherever it appears, even after the file.
run simulate some.json -h
expect_status 0
expect_stdout_has "usage: understory simulate"

# The policy commands: listed in the main help, each with its own.
run --help
expect_stdout_has "check DIR"
expect_stdout_has "diff --from DIR --to DIR FILE"
run simulate --help
expect_stdout_has "--watch"
expect_stdout_has "--watch-max-runs"
run check --help
expect_status 0
expect_stderr_empty
for opt in --scenario --instructions --memory --plain-ties --long-grace "exit status"; do
    expect_stdout_has "$opt"
done
run diff --help
expect_status 0
expect_stderr_empty
for opt in --from --to --json --instructions --memory "exit status"; do
    expect_stdout_has "$opt"
done
