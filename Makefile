# understory — build, test, demo.
#
#   make deps    install the Debian packages it needs (when missing)
#   make         build ./understory, the engine library and the Lua module
#   make run     run the seed-story demo
#   make test    every test: C unit tests, busted specs, CLI checks, and the
#                same again under AddressSanitizer + UndefinedBehaviorSanitizer
#   make bench   the benchmark (docs/benchmarks.md)

PKGS      := lua5.4 libcjson libuv libcurl
DEB_PKGS  := liblua5.4-dev lua5.4 libuv1-dev libcjson-dev libcurl4-openssl-dev lua-busted pkg-config gcc make

CC        ?= cc
BUILD     ?= build/release
SANITIZE  ?=
OPT       ?= -O2 -g
CFLAGS_PKG = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LIBS_PKG   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
WARN      := -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror
CFLAGS    += $(WARN) $(OPT) -fPIC $(SANITIZE) $(CFLAGS_PKG) -Iengine -Ibindings
LDFLAGS   += $(SANITIZE)
LDLIBS    += $(LIBS_PKG) -lm

ENGINE_SRC := $(filter-out engine/main.c,$(wildcard engine/*.c))
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
MAIN_OBJ   := $(BUILD)/engine/main.o
LIB_A      := $(BUILD)/libunderstory_engine.a
BIN        := $(BUILD)/understory
LUAMOD     := $(BUILD)/lua/understory.so
CTEST_SRC  := $(wildcard tests/c/test_*.c)
CTEST_BIN  := $(CTEST_SRC:tests/c/%.c=$(BUILD)/tests/%)

.PHONY: all run test test-release test-asan deps clean bench
all: understory $(LUAMOD)

understory: $(BUILD)/understory
	cp $< $@

$(BUILD)/%.o: %.c $(wildcard engine/*.h bindings/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB_A): $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(MAIN_OBJ) $(LIB_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(LUAMOD): $(BUILD)/bindings/lua_understory.o $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -o $@ $^ $(filter-out -llua5.4,$(LDLIBS))

$(BUILD)/tests/%: tests/c/%.c tests/c/check.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/c -o $@ $< $(LIB_A) $(LDFLAGS) $(LDLIBS)

# Build products of one flavour, used by tests/run.sh.
build-flavour: $(BIN) $(LUAMOD) $(CTEST_BIN)

run: all
	./understory simulate examples/seed-story.json

test: deps-check
	@$(MAKE) --no-print-directory build-flavour BUILD=build/release >/dev/null
	@$(MAKE) --no-print-directory build-flavour BUILD=build/asan OPT="-O1 -g" \
	    SANITIZE="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" >/dev/null
	@$(MAKE) --no-print-directory all >/dev/null
	@tests/run.sh

$(BUILD)/bench/understory-bench: tests/bench/bench.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB_A) $(LDFLAGS) $(LDLIBS)

bench: $(BUILD)/bench/understory-bench
	$(BUILD)/bench/understory-bench $(BENCH_ARGS)

deps:
	@missing=""; for p in $(DEB_PKGS); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "deps: all present"; fi

deps-check:
	@pkg-config --exists $(PKGS) || { echo "missing libraries: run 'make deps'"; exit 1; }

clean:
	rm -rf build understory
