#!/usr/bin/env bash
# tests/run.sh — the test runner behind `make test`.
#
# Expects the Makefile to have built build/release and build/asan.  Runs:
#   - every C unit test binary (build/<flavour>/tests/test_*), both flavours;
#   - the busted specs in tests/spec/ against build/release/lua/understory.so
#     and build/asan/lua/understory.so (sanitizer runtimes preloaded);
#   - every CLI check tests/cli/*.sh (exit 0 = pass), once with the release
#     binary and once with the ASan/UBSan one, in $UNDERSTORY;
#   - every libFuzzer target build/fuzz/fuzz_* (make fuzz) on its seed corpus
#     tests/fuzz/corpus/<target>, then a short bounded run (FUZZ_RUNS);
#   - every command README.md and docs/ show (tests/docs/doctest.lua);
#   - the Kubernetes tests tests/kube/test-*.sh once, against a real
#     control plane (built first by tests/kube/build.sh);
#   - the seed story under valgrind once, when valgrind is installed.
# Prints one line per suite and, last, exactly "N passed, N failed".  Exits
# non-zero when anything failed; a suite that crashes, cannot run or prints
# no count counts as one failure.  Failing suites show the tail of their
# output, so a failure can be read without rerunning; just before the last
# line a recap names each failing suite with its first "FAIL" line, so that
# the end of the output alone (all a CI summary may keep) says what broke.
set -u
set -o pipefail

cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
export UNDERSTORY_ROOT=$ROOT
unset UNDERSTORY_POLICIES LUA_INIT LUA_INIT_5_4

TIMEOUT=()
command -v timeout >/dev/null && TIMEOUT=(timeout 600)
LOG=$(mktemp -d "${TMPDIR:-/tmp}/understory-tests.XXXXXX") || exit 2
trap 'rm -rf "$LOG"' EXIT

total_passed=0
total_failed=0
seq_no=0
recap=()

# result NAME PASSED FAILED [NOTE] [LOGFILE]
result() {
    local name=$1 p=$2 f=$3 note=${4:-} log=${5:-}
    total_passed=$((total_passed + p))
    total_failed=$((total_failed + f))
    printf '%-46s %d passed, %d failed%s\n' "$name" "$p" "$f" "${note:+  ($note)}"
    [ "$f" -gt 0 ] || return 0
    local first=
    if [ -n "$log" ] && [ -s "$log" ]; then
        tail -n 30 "$log" | sed 's/^/      | /'
        first=$(grep -m 1 'FAIL' "$log" | cut -c 1-300)
    fi
    recap+=("$name: ${first:-${note:-failed}}")
}

newlog() {
    seq_no=$((seq_no + 1))
    echo "$LOG/$seq_no.log"
}

# Sanitizer settings for a flavour's processes.
flavour_env() {
    if [ "$1" = asan ]; then
        echo "ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1"
    fi
}

# ---- C unit tests -----------------------------------------------------------
for fl in release asan; do
    for src in tests/c/test_*.c; do
        [ -e "$src" ] || continue
        name=$(basename "$src" .c)
        bin=build/$fl/tests/$name
        if [ ! -x "$bin" ]; then
            result "c/$fl/$name" 0 1 "not built: $bin"
            continue
        fi
        log=$(newlog)
        # shellcheck disable=SC2046
        env $(flavour_env "$fl") "${TIMEOUT[@]}" "$bin" >"$log" 2>&1
        rc=$?
        counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
        if [ -z "$counts" ]; then
            result "c/$fl/$name" 0 1 "no count; exit status $rc" "$log"
            continue
        fi
        p=${counts%% passed*}
        f=${counts#*, }
        f=${f%% failed}
        note=""
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
            f=1
            note="exit status $rc after reporting"
        fi
        result "c/$fl/$name" "$p" "$f" "$note" "$log"
    done
done

# ---- busted specs -----------------------------------------------------------
# Once against each flavour of the module; the sanitizer flavour runs with
# the sanitizer runtimes preloaded into the interpreter (leak checks on).
specs=$(find tests/spec -name '*_spec.lua' 2>/dev/null | sort)
asan_preload="$(${CC:-cc} -print-file-name=libasan.so 2>/dev/null) $(${CC:-cc} -print-file-name=libubsan.so 2>/dev/null)"
for fl in release asan; do
    if [ -z "$specs" ]; then
        echo "busted: no specs in tests/spec (nothing to run)"
        break
    elif ! command -v busted >/dev/null || ! command -v lua5.4 >/dev/null; then
        result "busted/$fl" 0 1 "busted or lua5.4 is not installed"
        continue
    elif [ ! -f build/$fl/lua/understory.so ]; then
        result "busted/$fl" 0 1 "not built: build/$fl/lua/understory.so"
        continue
    fi
    preload=""
    asan_opts=""
    # LeakSanitizer's tracer can crash at exit on the DTLS block of a module
    # that lua5.4 dlopen()s (seen about one run in three on glibc 2.36); not
    # intercepting __tls_get_addr avoids it, and leak checking stays on.
    [ "$fl" = asan ] && preload=$asan_preload && asan_opts="detect_leaks=1:intercept_tls_get_addr=0"
    log=$(newlog)
    cpath="$ROOT/build/$fl/lua/?.so;;"
    lpath="$ROOT/?.lua;$ROOT/tests/spec/?.lua;;"
    # busted runs under lua5.4 explicitly: the module is built for 5.4.
    ASAN_OPTIONS=$asan_opts LD_PRELOAD=$preload LUA_CPATH=$cpath LUA_CPATH_5_4=$cpath LUA_PATH=$lpath LUA_PATH_5_4=$lpath \
        UNDERSTORY="$ROOT/build/$fl/understory" \
        "${TIMEOUT[@]}" lua5.4 "$(command -v busted)" --output=plainTerminal tests/spec \
        >"$log" 2>&1
    rc=$?
    counts=$(sed 's/\x1b\[[0-9;]*m//g' "$log" |
        grep -Eo '[0-9]+ success(es)? / [0-9]+ failures? / [0-9]+ errors? / [0-9]+ pending' |
        tail -n 1)
    if [ -z "$counts" ]; then
        result "busted/$fl" 0 1 "no count; exit status $rc" "$log"
        continue
    fi
    read -r s _ _ fa _ _ er _ _ pe _ <<<"$counts"
    f=$((fa + er))
    note=""
    [ "$pe" -gt 0 ] && note="$pe pending"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        note="exit status $rc"
    fi
    result "busted/$fl" "$s" "$f" "$note" "$log"
done

# ---- CLI checks -------------------------------------------------------------
for fl in release asan; do
    bin=$ROOT/build/$fl/understory
    for script in tests/cli/*.sh; do
        [ -e "$script" ] || continue
        name="cli/$fl/$(basename "$script" .sh)"
        if [ ! -x "$bin" ]; then
            result "$name" 0 1 "not built: $bin"
            continue
        fi
        log=$(newlog)
        # shellcheck disable=SC2046
        env $(flavour_env "$fl") UNDERSTORY="$bin" "${TIMEOUT[@]}" bash "$script" >"$log" 2>&1
        rc=$?
        if [ "$rc" -eq 0 ]; then
            result "$name" 1 0
        else
            result "$name" 0 1 "exit status $rc" "$log"
        fi
    done
done

# ---- docs -------------------------------------------------------------------
# Every command README.md and docs/*.md show, run as shown, its output
# checked against what they show (tests/docs/doctest.lua).  Once, with the
# release build: the commands are the user's, not the sanitizers'.
log=$(newlog)
"${TIMEOUT[@]}" lua5.4 tests/docs/doctest.lua "$ROOT" "$ROOT/build/release/understory" \
    README.md docs/*.md >"$log" 2>&1
rc=$?
counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
if [ -z "$counts" ]; then
    result "docs" 0 1 "no count; exit status $rc" "$log"
else
    p=${counts%% passed*}
    f=${counts#*, }
    f=${f%% failed}
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    result "docs" "$p" "$f"
    [ "$f" -gt 0 ] && grep -A12 '^FAIL' "$log" | head -n 60 | sed 's/^/      | /'
fi

# ---- fuzz smoke -------------------------------------------------------------
# Each libFuzzer target (make fuzz, build/fuzz) replays its seed corpus,
# regression inputs included, then runs FUZZ_RUNS fresh inputs.  New inputs
# go to a scratch directory: the corpus in the repository is never written.
FUZZ_RUNS=${FUZZ_RUNS:-2000}
for src in tests/fuzz/fuzz_*.c; do
    [ -e "$src" ] || continue
    name=$(basename "$src" .c)
    bin=build/fuzz/$name
    corpus=tests/fuzz/corpus/${name#fuzz_}
    if [ ! -x "$bin" ]; then
        result "fuzz/$name" 0 1 "not built: $bin (make fuzz needs clang)"
        continue
    fi
    log=$(newlog)
    work=$(mktemp -d "$LOG/fuzz.XXXXXX")
    "${TIMEOUT[@]}" "$bin" -runs="$FUZZ_RUNS" -entropic=0 -artifact_prefix="$work/" "$work" "$corpus" \
        >"$log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q "^Done $FUZZ_RUNS runs" "$log"; then
        result "fuzz/$name" 1 0 "$FUZZ_RUNS runs after $(find "$corpus" -type f | wc -l) seeds"
    else
        result "fuzz/$name" 0 1 "exit status $rc" "$log"
    fi
done

# ---- Kubernetes -------------------------------------------------------------
# The control plane is built once (tests/kube/build.sh: skipped when the
# binaries are newer than the pin; the first build takes long, see the
# README), then every tests/kube/test-*.sh runs against a real one, with
# the sanitizer build of understory.
kube_tests=$(find tests/kube -name 'test-*.sh' 2>/dev/null | sort)
if [ -n "$kube_tests" ]; then
    log=$(newlog)
    KUBE_TIMEOUT=()
    command -v timeout >/dev/null && KUBE_TIMEOUT=(timeout 3600)
    if "${KUBE_TIMEOUT[@]}" tests/kube/build.sh >"$log" 2>&1; then
        for script in $kube_tests; do
            name="kube/$(basename "$script" .sh)"
            log=$(newlog)
            # the sanitizer build of understory: once is enough for these
            # shellcheck disable=SC2046
            env $(flavour_env asan) UNDERSTORY="$ROOT/build/asan/understory" \
                "${TIMEOUT[@]}" bash "$script" >"$log" 2>&1
            rc=$?
            if [ "$rc" -eq 0 ]; then
                result "$name" 1 0
            else
                result "$name" 0 1 "exit status $rc" "$log"
            fi
        done
    else
        result "kube/build" 0 1 "tests/kube/build.sh failed" "$log"
    fi
fi

# ---- valgrind ---------------------------------------------------------------
if command -v valgrind >/dev/null; then
    seed=examples/seed-story.json
    if [ ! -f "$seed" ]; then
        result "valgrind/seed-story" 0 1 "missing $seed"
    elif [ ! -x build/release/understory ]; then
        result "valgrind/seed-story" 0 1 "not built: build/release/understory"
    else
        log=$(newlog)
        "${TIMEOUT[@]}" valgrind -q --error-exitcode=99 --leak-check=full \
            --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
            build/release/understory simulate "$seed" --json >/dev/null 2>"$log"
        rc=$?
        if [ "$rc" -eq 0 ]; then
            result "valgrind/seed-story" 1 0
        else
            result "valgrind/seed-story" 0 1 "exit status $rc" "$log"
        fi
    fi
else
    echo "valgrind: not installed (skipped)"
fi

if [ ${#recap[@]} -gt 0 ]; then
    echo "failed:"
    printf '  %s\n' "${recap[@]}"
fi
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
