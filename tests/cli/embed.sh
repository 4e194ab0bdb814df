#!/usr/bin/env bash
# The embedding products as a platform team gets them: `make install` into a
# fresh prefix; the example control plane built against the installed
# library with pkg-config alone, run (and run under valgrind when it is
# installed); the exports, soname and pkg-config metadata checked; the
# installed command line and Lua module run; `make uninstall` leaves no file.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

prefix=$TMP/prefix
make -s --no-print-directory install PREFIX="$prefix" >"$TMP/install.log" 2>&1 ||
    fail "make install: $(tail -n 20 "$TMP/install.log")"
major=$(sed -n 's/^#define UNDERSTORY_VERSION_MAJOR //p' bindings/understory.h)
for f in bin/understory lib/libunderstory.a lib/libunderstory.so "lib/libunderstory.so.$major" \
    include/understory.h lib/pkgconfig/understory.pc lib/lua/5.4/understory.so \
    share/understory/policies/placement.lua; do
    [ -e "$prefix/$f" ] || fail "make install did not install $f"
done

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
version=$(sed -n 's/^#define UNDERSTORY_VERSION_STRING "\(.*\)"/\1/p' bindings/understory.h)
[ "$(pkg-config --modversion understory)" = "$version" ] ||
    fail "understory.pc says $(pkg-config --modversion understory), the header $version"
[ "$(pkg-config --variable=policiesdir understory)" = "$prefix/share/understory/policies" ] ||
    fail "understory.pc: policiesdir is $(pkg-config --variable=policiesdir understory)"

# The shared library: soname libunderstory.so.MAJOR, and it exports the
# public API only, every symbol declared in the installed header.
so=$prefix/lib/libunderstory.so
soname=$(objdump -p "$so" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = "libunderstory.so.${version%%.*}" ] || fail "soname is '$soname'"
nm -D --defined-only "$so" | awk '{print $3}' >"$TMP/exports"
[ -s "$TMP/exports" ] || fail "no exported symbols"
while read -r sym; do
    case $sym in us_*) ;; *) fail "exports $sym: not part of the API" ;; esac
    grep -q "\b$sym(" "$prefix/include/understory.h" || fail "exports $sym: not declared in understory.h"
done <"$TMP/exports"
nm -g --defined-only "$prefix/lib/libunderstory.a" | awk 'NF == 3 {print $3}' | sort >"$TMP/a-exports"
sort "$TMP/exports" | cmp -s - "$TMP/a-exports" ||
    fail "libunderstory.a's global symbols differ from the shared library's"

# The example, built with pkg-config alone, against the shared library.
# shellcheck disable=SC2046
cc -o "$TMP/control_plane" examples/embed/control_plane.c $(pkg-config --cflags --libs understory) \
    2>"$TMP/cc.log" || fail "building the example: $(cat "$TMP/cc.log")"
[ ! -s "$TMP/cc.log" ] || fail "building the example warned: $(cat "$TMP/cc.log")"
for policies in "" "$prefix/share/understory/policies"; do
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH=$prefix/lib "$TMP/control_plane" $policies >"$TMP/out" 2>"$TMP/err" ||
        fail "control_plane ${policies:-(built-in)}: exit status $?: $(cat "$TMP/err")"
    for want in "world and engine agree" "bind     node-agent-n3    -> n3" \
        "event Normal  Evict                    gpu-burn: Evicted 12 pod(s)" \
        "evictor-action-type: backgroundpods" "pipeline train-0" "bind     train-0" \
        "refused: queue \"team\" holds workload \"train\" (busy)"; do
        grep -qF -- "$want" "$TMP/out" || fail "control_plane ${policies:-(built-in)}: no \"$want\" in: $(cat "$TMP/out")"
    done
done
grep -q "policies [0-9a-f]\{8\}" "$TMP/out" || fail "control_plane did not load the installed policies"

if command -v valgrind >/dev/null; then
    LD_LIBRARY_PATH=$prefix/lib valgrind -q --error-exitcode=99 --leak-check=full \
        --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
        "$TMP/control_plane" "$prefix/share/understory/policies" >/dev/null 2>"$TMP/vg" ||
        fail "control_plane under valgrind: $(cat "$TMP/vg")"
fi

# The static library links too (its dependencies from understory.pc).
# shellcheck disable=SC2046
cc -o "$TMP/control_plane_static" examples/embed/control_plane.c $(pkg-config --cflags understory) \
    "$prefix/lib/libunderstory.a" $(pkg-config --libs --static understory | sed 's/-lunderstory\b//') ||
    fail "building the example against libunderstory.a"
"$TMP/control_plane_static" >"$TMP/out-static" || fail "static control_plane failed"
cmp -s "$TMP/out-static" <(LD_LIBRARY_PATH=$prefix/lib "$TMP/control_plane") ||
    fail "static and shared builds of the example differ"

# The installed command line finds the installed policies by itself, and
# the installed Lua module loads.
"$prefix/bin/understory" simulate examples/seed-story.json --json >"$TMP/sim" 2>"$TMP/err" ||
    fail "installed understory: $(cat "$TMP/err")"
grep -q '"background_evictions"' "$TMP/sim" || fail "installed understory: no summary"
if command -v lua5.4 >/dev/null; then
    v=$(LUA_CPATH="$prefix/lib/lua/5.4/?.so" LUA_CPATH_5_4="$prefix/lib/lua/5.4/?.so" \
        lua5.4 -e 'local u = require "understory"; local e <close> = u.engine{}; print(u.version)') ||
        fail "installed Lua module does not load"
    [ "$v" = "$version" ] || fail "installed Lua module says version $v"
fi

make -s --no-print-directory uninstall PREFIX="$prefix" >"$TMP/uninstall.log" 2>&1 ||
    fail "make uninstall: $(cat "$TMP/uninstall.log")"
left=$(find "$prefix" ! -type d)
[ -z "$left" ] || fail "make uninstall left: $left"

# The embedding benchmark runs (small: its figures are for make bench-embed).
bench=$(dirname "$UNDERSTORY")/bench/embed-bench
[ -x "$bench" ] || fail "not built: $bench"
"$bench" 40 >"$TMP/bench" 2>"$TMP/err" || fail "embed-bench: $(cat "$TMP/err")"
grep -q "^remove_pod (an evicted pod gone)" "$TMP/bench" || fail "embed-bench printed: $(cat "$TMP/bench")"
