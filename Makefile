# understory — build, test, demo.
#
#   make deps    install the Debian packages it needs (when missing)
#   make         build ./understory, the engine library and the Lua module
#   make run     run the seed-story demo
#   make test    every test: C unit tests, busted specs, CLI checks, the
#                Kubernetes tests against a real control plane, and the
#                same again under AddressSanitizer + UndefinedBehaviorSanitizer
#   make kube    build the Kubernetes control plane the tests run (tests/kube)
#   make bench   the benchmark (docs/benchmarks.md)
#   make bench-embed   what the embedding API's calls cost (docs/embedding.md)
#   make bench-kube    `understory serve` at KAI's scale-test shape on a real
#                control plane (docs/benchmarks.md; BENCH_KUBE_ARGS)
#   make fuzz    build the libFuzzer targets in build/fuzz (docs/testing.md)
#   make fuzz-plain   the same targets uninstrumented (-O2), each running the
#                inputs named once, in build/release/fuzz-plain (docs/testing.md)
#   make install PREFIX=/usr/local [DESTDIR=]   the command line, libunderstory
#                (.a and .so), understory.h, understory.pc, the Lua module and
#                the default policies; make uninstall removes exactly those

PKGS      := lua5.4 libcjson libuv libcurl yaml-0.1
DEB_PKGS  := liblua5.4-dev lua5.4 libuv1-dev libcjson-dev libcurl4-openssl-dev lua-busted pkg-config gcc make valgrind git \
             clang libclang-rt-14-dev chromium
# clang, libclang-rt-14-dev: make fuzz (libFuzzer); chromium: tests/cli/report.sh renders the HTML report headless
# Kubernetes: libyaml reads kubeconfig files (`understory serve`); the
# tests' control plane (tests/kube) needs certificates, health probes and
# process groups.  Go itself is /usr/local/go on these machines.
# serve's admin endpoint parses HTTP with http-parser; its metrics are
# checked by a real Prometheus parser (tests/prom_check.py).
KUBE_PKGS := openssl curl procps util-linux libyaml-dev libhttp-parser-dev python3-prometheus-client

CC        ?= cc
BUILD     ?= build/release
SANITIZE  ?=
# -DUS_CHECK_INVARIANTS: check the engine's invariants after every cycle by
# default (engine/invariants.h); the sanitizer flavour of make test has it.
CHECKS    ?=
OPT       ?= -O2 -g
CFLAGS_PKG = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LIBS_PKG   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
WARN      := -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror
# Hidden by default: the shared library and the Lua module export only what
# is marked US_API (bindings/understory.h) or luaopen_understory.
CFLAGS    += $(WARN) $(OPT) -fPIC -fvisibility=hidden $(SANITIZE) $(CHECKS) $(CFLAGS_PKG) -Iengine -Ibindings -Iserve -Ikube
LDFLAGS   += $(SANITIZE)
# -lhttp_parser: serve's admin endpoint (Debian's libhttp-parser-dev has no .pc)
LDLIBS    += $(LIBS_PKG) -lhttp_parser -lm

# kube/: the Kubernetes object mapping, part of the library like the engine
ENGINE_SRC := $(filter-out engine/main.c,$(wildcard engine/*.c)) $(wildcard kube/*.c)
# The default policies compiled in (engine/policysrc.c), so that a policy
# directory need hold only the files it changes.
POLICY_FILES := policies/fairshare.lua policies/placement.lua policies/background.lua
GEN_SRC    := $(BUILD)/gen/default_policies.c
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/default_policies.o
MAIN_OBJ   := $(BUILD)/engine/main.o
# `understory serve` (serve/): the command line's, not the library's
SERVE_SRC  := $(wildcard serve/*.c)
SERVE_OBJ  := $(SERVE_SRC:%.c=$(BUILD)/%.o)
LIB_A      := $(BUILD)/libunderstory_engine.a
BIN        := $(BUILD)/understory
LUAMOD     := $(BUILD)/lua/understory.so
CTEST_SRC  := $(wildcard tests/c/test_*.c)
CTEST_BIN  := $(CTEST_SRC:tests/c/%.c=$(BUILD)/tests/%)
REPLAY     := $(BUILD)/tests/replay

# The embedding libraries.  The version's one source is the public header.
VERSION    := $(shell sed -n 's/^\#define UNDERSTORY_VERSION_STRING "\(.*\)"/\1/p' bindings/understory.h)
SONAME     := libunderstory.so.$(firstword $(subst ., ,$(VERSION)))
PUB_A      := $(BUILD)/libunderstory.a
PUB_SO     := $(BUILD)/libunderstory.so.$(VERSION)
# What the library itself links (libcurl is the command line's, not the
# engine's): its NEEDED entries and understory.pc's Requires.private.
LIB_PKGS   := lua5.4 libcjson libuv
LIB_LIBS    = $(shell pkg-config --libs $(LIB_PKGS) 2>/dev/null) -lm -pthread
PREFIX     ?= /usr/local
DESTDIR    ?=
D          := $(DESTDIR)$(PREFIX)

.PHONY: kube all libs run test test-release test-asan deps clean bench bench-embed bench-kube install uninstall fuzz fuzz-targets fuzz-plain
all: understory $(LUAMOD) libs
libs: $(PUB_A) $(PUB_SO)

understory: $(BUILD)/understory
	cp $< $@

$(BUILD)/%.o: %.c $(wildcard engine/*.h bindings/*.h serve/*.h kube/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(GEN_SRC): $(POLICY_FILES) Makefile
	@mkdir -p $(dir $@)
	@{ echo '#include <stddef.h>'; i=0; for f in $(POLICY_FILES); do \
	    echo "static const char d$$i[] = {"; od -An -v -tx1 $$f | sed 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	    echo '0};'; i=$$((i + 1)); done; \
	  echo 'extern const char *const us_policysrc_default_text[3];'; \
	  echo 'extern const size_t us_policysrc_default_len[3];'; \
	  echo 'const char *const us_policysrc_default_text[3] = {d0, d1, d2};'; \
	  echo 'const size_t us_policysrc_default_len[3] = {sizeof d0 - 1, sizeof d1 - 1, sizeof d2 - 1};'; \
	} >$@.tmp && mv $@.tmp $@

$(BUILD)/gen/default_policies.o: $(GEN_SRC)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB_A): $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(MAIN_OBJ) $(SERVE_OBJ) $(LIB_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(LUAMOD): $(BUILD)/bindings/lua_understory.o $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -Wl,--exclude-libs,ALL -o $@ $^ $(filter-out -llua5.4,$(LDLIBS))

$(BUILD)/tests/%: tests/c/%.c tests/c/check.h $(SERVE_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/c -o $@ $< $(SERVE_OBJ) $(LIB_A) $(LDFLAGS) $(LDLIBS)

# The scenario replayed through the C API (tests/cli/embed-equivalence.sh).
$(REPLAY): tests/embed/replay.c bindings/understory.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB_A) $(LDFLAGS) $(LDLIBS)

# What the embedding API's calls cost, at a size and twice it (docs/embedding.md).
$(BUILD)/bench/embed-bench: tests/embed/bench.c bindings/understory.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB_A) $(LDFLAGS) $(LDLIBS)

bench-embed: $(BUILD)/bench/embed-bench
	$(BUILD)/bench/embed-bench $(BENCH_ARGS)

# libunderstory.a: the engine linked into one object whose only global
# symbols are the public API (the internals become local), so that it cannot
# clash with a program's own names.
$(BUILD)/understory-lib.o: $(ENGINE_OBJ)
	$(CC) -r -nostdlib -o $@.tmp $^
	objcopy --localize-hidden $@.tmp $@
	@rm -f $@.tmp

$(PUB_A): $(BUILD)/understory-lib.o
	@rm -f $@
	ar rcs $@ $<

# libunderstory.so.X.Y.Z, soname libunderstory.so.X, and the usual links.
$(PUB_SO): $(ENGINE_OBJ)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined -o $@ $^ $(LIB_LIBS)
	ln -sf $(notdir $@) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/libunderstory.so

# Build products of one flavour, used by tests/run.sh.
build-flavour: $(BIN) $(LUAMOD) $(CTEST_BIN) $(REPLAY) $(BUILD)/bench/understory-bench $(BUILD)/bench/embed-bench \
	$(BUILD)/bench/kube-create

run: all
	./understory simulate examples/seed-story.json

test: deps-check
	@$(MAKE) --no-print-directory build-flavour BUILD=build/release >/dev/null
	@$(MAKE) --no-print-directory build-flavour BUILD=build/asan OPT="-O1 -g" \
	    SANITIZE="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	    CHECKS=-DUS_CHECK_INVARIANTS >/dev/null
	@$(MAKE) --no-print-directory all >/dev/null
	@$(MAKE) --no-print-directory fuzz >/dev/null
	@tests/run.sh

$(BUILD)/bench/understory-bench: tests/bench/bench.c $(SERVE_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iserve -o $@ $< $(SERVE_OBJ) $(LIB_A) $(LDFLAGS) $(LDLIBS)

bench: $(BUILD)/bench/understory-bench
	@$(BUILD)/bench/understory-bench $(BENCH_ARGS)

# tests/kube/bench.sh's creator: objects POSTed many at once over HTTP/2
$(BUILD)/bench/kube-create: tests/kube/create.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) $(LDLIBS)

# 500 KWOK nodes, 4,000 AI pods in 4,000 PodGroups, burn-in: minutes
bench-kube: $(BIN) $(BUILD)/bench/kube-create
	UNDERSTORY=$(abspath $(BIN)) tests/kube/bench.sh $(BENCH_KUBE_ARGS)

# Installed files; uninstall removes exactly these (and the policies
# directory it made).
INSTALLED := bin/understory lib/libunderstory.a lib/libunderstory.so.$(VERSION) lib/$(SONAME) \
             lib/libunderstory.so include/understory.h lib/pkgconfig/understory.pc \
             lib/lua/5.4/understory.so $(addprefix share/understory/,$(wildcard policies/*.lua))

install: all
	install -d $(D)/bin $(D)/lib/pkgconfig $(D)/lib/lua/5.4 $(D)/include $(D)/share/understory/policies
	install -m 755 $(BIN) $(D)/bin/understory
	install -m 644 $(PUB_A) $(D)/lib/libunderstory.a
	install -m 755 $(PUB_SO) $(D)/lib/libunderstory.so.$(VERSION)
	ln -sf libunderstory.so.$(VERSION) $(D)/lib/$(SONAME)
	ln -sf $(SONAME) $(D)/lib/libunderstory.so
	install -m 644 bindings/understory.h $(D)/include/understory.h
	install -m 755 $(LUAMOD) $(D)/lib/lua/5.4/understory.so
	install -m 644 $(wildcard policies/*.lua) $(D)/share/understory/policies/
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' \
	    'policiesdir=$${prefix}/share/understory/policies' '' \
	    'Name: understory' \
	    'Description: GPU-cluster scheduling engine with Lua policies: the embedding API' \
	    'Version: $(VERSION)' \
	    'Cflags: -I$${includedir}' \
	    'Libs: -L$${libdir} -lunderstory' \
	    'Requires.private: $(LIB_PKGS)' \
	    'Libs.private: -lm -pthread' >$(D)/lib/pkgconfig/understory.pc

uninstall:
	rm -f $(addprefix $(D)/,$(INSTALLED))
	rmdir --ignore-fail-on-non-empty $(D)/share/understory/policies $(D)/share/understory 2>/dev/null || true

deps:
	@missing=""; for p in $(DEB_PKGS) $(KUBE_PKGS); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "deps: all present"; fi

# The control plane the Kubernetes tests run (make test builds it too).
kube:
	@tests/kube/build.sh

deps-check:
	@pkg-config --exists $(PKGS) || { echo "missing libraries: run 'make deps'"; exit 1; }

# libFuzzer targets (tests/fuzz/fuzz_*.c; docs/testing.md): the engine built
# again with clang, AddressSanitizer, UndefinedBehaviorSanitizer, the
# fuzzer's coverage and the checks of checking builds (each tie-break
# choice, queue order and kept node list held to a plain recomputation),
# in build/fuzz.  make test runs each briefly on its seed
# corpus (tests/fuzz/corpus/<target>); long runs are in docs/testing.md.
FUZZ_TARGETS := scenario quantity policy_result api kube json watch
# serve is not in the library: a target of serve's takes its module along
FUZZ_SERVE_watch := $(BUILD)/serve/watchstream.o
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

fuzz:
	@$(MAKE) --no-print-directory fuzz-targets BUILD=build/fuzz CC=clang OPT="-O1 -g" \
	    SANITIZE="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" CHECKS=-DUS_CHECK_INVARIANTS

fuzz-targets: $(FUZZ_TARGETS:%=$(BUILD)/fuzz_%)

$(BUILD)/fuzz_watch: $(FUZZ_SERVE_watch)
$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(filter %.o,$^) $(LIB_A) $(LDFLAGS) $(LDLIBS)

# The same targets without libFuzzer or sanitizers, on this flavour's
# engine: each a main that runs the files or directories named once
# (tests/fuzz/run_inputs.c), to measure a target's own cost (callgrind,
# docs/testing.md) or replay a corpus quickly.
fuzz-plain: $(FUZZ_TARGETS:%=$(BUILD)/fuzz-plain/fuzz_%)

$(BUILD)/fuzz-plain/fuzz_watch: $(FUZZ_SERVE_watch)
$(BUILD)/fuzz-plain/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/run_inputs.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< tests/fuzz/run_inputs.c $(filter %.o,$^) $(LIB_A) $(LDFLAGS) $(LDLIBS)

clean:
	rm -rf build understory
