/*
 * test_policy.c — the Lua policy host: the sandbox refuses every escape,
 * budgets cut off runaway policies with file:line and leave the state
 * usable, load errors name file:line, results convert both ways, and the
 * default policies in policies/ give exactly what the built-in C policies
 * give, on hand-made and generated inputs.
 *
 * Run from the repository root (or with UNDERSTORY_ROOT set): it loads
 * ./policies.  Bad policies are written to temporary directories.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "check.h"
#include "policy.h"

/* ---- policy directories ------------------------------------------------ */

static const char *FS_MIN =
    "return { compute = function(view)\n"
    "  local r = {}\n"
    "  for _, q in ipairs(view.queues) do r[q.name] = { gpu = 0, cpu = 0, memory = 0 } end\n"
    "  return r\n"
    "end }\n";
static const char *PL_MIN = "return { score = function(pod, node) return 0 end }\n";
static const char *BG_MIN = "return { reoffer = function(view) return { keep = {}, place = {} } end }\n";

static const char *const FILES[3] = {"fairshare.lua", "placement.lua", "background.lua"};

static const char *defaults_dir(void) {
    static char path[4096];
    const char *root = getenv("UNDERSTORY_ROOT");
    snprintf(path, sizeof path, "%s/policies", root && *root ? root : ".");
    return path;
}

static int write_file(const char *dir, const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = strlen(text);
    int rc = fwrite(text, 1, n, f) == n ? 0 : -1;
    return fclose(f) == 0 ? rc : -1;
}

/* Write a policy directory under /tmp; NULL sources get the minimal ones. */
static int make_dir(char *dir, const char *fs, const char *pl, const char *bg) {
    const char *src[3] = {fs ? fs : FS_MIN, pl ? pl : PL_MIN, bg ? bg : BG_MIN};
    strcpy(dir, "/tmp/us-policy-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    for (int i = 0; i < 3; i++)
        if (write_file(dir, FILES[i], src[i]) < 0) return -1;
    return 0;
}

static void remove_dir(const char *dir) {
    char path[256];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, FILES[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* Load policies from sources (the host reads the files whole at load, so
 * the directory is removed at once). */
static us_policy *load_src(const char *fs, const char *pl, const char *bg,
                           const us_policy_limits *lim, us_err *err) {
    char dir[64];
    us_policy *p = NULL;
    if (make_dir(dir, fs, pl, bg) == 0) p = us_policy_load(dir, lim, err);
    else us_err_set(err, US_EIO, "cannot write a temporary policy directory");
    remove_dir(dir);
    return p;
}

/* ---- fixtures ---------------------------------------------------------- */

static us_kv node_kv[1] = {{"zone", "a"}};
static us_kv wl_kv[1] = {{"team", "x"}};

static us_node mknode(char *name, int gpus, int64_t cpu, int64_t mem) {
    us_node n;
    memset(&n, 0, sizeof n);
    n.name = name;
    n.pool = "default";
    n.gpus = gpus;
    n.cap.v[US_GPU] = (int64_t)gpus * US_GPU_UNIT;
    n.cap.v[US_CPU] = cpu;
    n.cap.v[US_MEM] = mem;
    n.labels.items = node_kv;
    n.labels.n = 1;
    return n;
}

static us_workload mkwl(char *name, int64_t gpu_milli, int64_t cpu, int64_t mem) {
    us_workload w;
    memset(&w, 0, sizeof w);
    w.name = name;
    w.priority = 50;
    w.request.v[US_GPU] = gpu_milli;
    w.request.v[US_CPU] = cpu;
    w.request.v[US_MEM] = mem;
    w.labels.items = wl_kv;
    w.labels.n = 1;
    return w;
}

static us_pod mkpod(char *name) {
    us_pod p;
    memset(&p, 0, sizeof p);
    p.name = name;
    p.node = -1;
    p.pin = -1;
    p.shared_dev = -1;
    return p;
}

/* Score one pod named `name` on one node. */
static int score1(us_policy *p, char *name, double *out, us_err *err) {
    us_node n = mknode("n1", 8, 64000, (int64_t)512 << 30);
    us_workload w = mkwl("w", 1000, 8000, (int64_t)64 << 30);
    us_pod pod = mkpod(name);
    us_pod_view pv = {&pod, &w, "team-a"};
    us_node_view nv = {&n, {{2000, 16000, 0}}, 6, NULL};
    *out = -1;
    return us_policy_score(p, &pv, &nv, 1, out, err);
}

/* ---- sandbox ------------------------------------------------------------ */

static const char *PROBES =
    "secret = 42\n"
    "local probes = {\n"
    "  io = function() return io.open('/etc/passwd') end,\n"
    "  os = function() return os.execute('true') end,\n"
    "  debug = function() return debug.getregistry() end,\n"
    "  package = function() return package.loadlib('libc.so.6', 'system') end,\n"
    "  require = function() return require('io') end,\n"
    "  dofile = function() return dofile('/etc/passwd') end,\n"
    "  loadfile = function() return loadfile('/etc/passwd') end,\n"
    "  binary = function()\n"
    "    local f, msg = load('\\27LuaT\\0\\25\\147\\r\\n\\26\\n\\4\\8\\8xV\\0\\0', 'x', 'b')\n"
    "    if f then return 1 end\n"
    "    error(msg, 0)\n"
    "  end,\n"
    "  dump = function() return string.dump(function() end) end,\n"
    "  dump_method = function() return ('').dump(function() end) end,\n"
    "  strmeta = function() return getmetatable('').__index end,\n"
    "  collect = function() return collectgarbage('count') end,\n"
    "  print = function() print('x') end,\n"
    "  rawset_lib = function() rawset(string, 'upper', nil) end,\n"
    "  write_lib = function() string.upper = nil end,\n"
    "  gc = function() setmetatable({}, { __gc = function() end }) end,\n"
    "  env_meta = function() setmetatable(_ENV, nil) end,\n"
    "  randomseed = function() math.randomseed(1) end,\n"
    "  load_env = function() return load('return secret')() end,\n"
    "  load_io = function() return load('return io')() == nil and 3 or 4 end,\n"
    "  leak = function()\n"
    "    local clean = leaked == nil and also_leaked == nil and raw_leaked == nil\n"
    "    return (clean and tostring ~= nil and math.floor(2.5) == 2) and 7 or 0\n"
    "  end,\n"
    "}\n"
    "return { score = function(pod, node)\n"
    "  local probe = probes[pod.name]\n"
    "  local v = probe and probe()\n"
    "  if type(v) == 'number' then return v end\n"
    "  return 1\n"
    "end }\n";

/* Written at load by fairshare.lua: none of it may show in placement.lua. */
static const char *LEAKER =
    "leaked = 42\n"
    "tostring = nil\n"
    "_G.also_leaked = 1\n"
    "rawset(_G, 'raw_leaked', 1)\n"
    "return { compute = function(view) return {} end }\n";

static void refused(us_policy *p, char *probe, const char *want) {
    us_err err = {0};
    double v;
    int rc = score1(p, probe, &v, &err);
    if (rc != -1 || err.code != US_EPOLICY || !strstr(err.msg, want) ||
        !strstr(err.msg, "placement.lua:")) {
        fprintf(stderr, "  probe %s: rc %d score %g code %d msg \"%s\" (wanted \"%s\")\n", probe,
                rc, v, err.code, err.msg, want);
        check_cur_failed = 1;
    }
}

/* A score call is pure when it neither drew from math.random nor logged
 * (us_policy_last_call_pure: only pure scores outlive the cycle); telling
 * draws leaves math.random as it is, so its errors still name it. */
TEST(score_calls_that_draw_or_log_are_impure) {
    static const char *const src[] = {
        "return { score = function(pod, node) return node.free_gpus end }\n",
        "return { score = function(pod, node) return math.random(3) end }\n",
        "return { score = function(pod, node) log('x') return 1 end }\n",
        "local draws = 0\n"
        "return { score = function(pod, node) draws = draws + 1\n"
        "  if draws == 2 then return math.random() end return 0 end }\n",
        "return { score = function(pod, node) return math.random(5, 1) end }\n"};
    us_err err = {0};
    double out;
    for (int i = 0; i < 4; i++) {
        us_policy *p = load_src(NULL, src[i], NULL, NULL, &err);
        CHECK(p != NULL);
        if (!p) continue;
        CHECK(score1(p, "w-0", &out, &err) == 0);
        CHECK(us_policy_last_call_pure(p) == (i == 0 || i == 3));  /* the 4th draws on its 2nd call */
        CHECK(score1(p, "w-0", &out, &err) == 0);
        CHECK(us_policy_last_call_pure(p) == (i == 0));
        us_policy_free(p);
    }
    us_policy *p = load_src(NULL, src[4], NULL, NULL, &err);
    CHECK(p != NULL);
    if (p) {
        CHECK(score1(p, "w-0", &out, &err) < 0);
        CHECK_HAS(err.msg, "bad argument #1 to 'random' (interval is empty)");
        us_policy_free(p);
    }
}

TEST(sandbox_refuses_escapes) {
    us_err err = {0};
    us_policy *p = load_src(LEAKER, PROBES, NULL, NULL, &err);
    CHECK(p != NULL);
    if (!p) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    refused(p, "io", "global 'io'");
    refused(p, "os", "global 'os'");
    refused(p, "debug", "global 'debug'");
    refused(p, "package", "global 'package'");
    /* the policy's own require: helpers of its directory only, never Lua's io */
    refused(p, "require", "require \"io\": no io.lua in the policy directory");
    refused(p, "dofile", "global 'dofile'");
    refused(p, "loadfile", "global 'loadfile'");
    refused(p, "binary", "attempt to load a binary chunk");
    refused(p, "dump", "'dump'");
    refused(p, "dump_method", "'dump'");
    refused(p, "strmeta", "boolean");
    refused(p, "collect", "global 'collectgarbage'");
    refused(p, "print", "global 'print'");
    refused(p, "rawset_lib", "read-only");
    refused(p, "write_lib", "read-only");
    refused(p, "gc", "__gc");
    refused(p, "env_meta", "protected metatable");
    refused(p, "randomseed", "'randomseed'");

    double v;
    CHECK(score1(p, "load_env", &v, &err) == 0 && v == 42);  /* text load, file env */
    CHECK(score1(p, "load_io", &v, &err) == 0 && v == 3);
    CHECK(score1(p, "leak", &v, &err) == 0 && v == 7);
    CHECK(score1(p, "plain", &v, &err) == 0 && v == 1);
    us_policy_free(p);
}

TEST(sandbox_shared_libraries_read_only_at_load) {
    us_err err = {0};
    us_policy *p = load_src("math.floor = function() return 0 end\nreturn {}\n", NULL, NULL, NULL,
                            &err);
    CHECK(p == NULL);
    CHECK(err.code == US_EPOLICY);
    CHECK_HAS(err.msg, "fairshare.lua:1:");
    CHECK_HAS(err.msg, "read-only");
    us_policy_free(p);
}

/* The pattern matcher and the table/string loops are C, out of the count
 * hook's reach and not bounded by memory: their work is charged to the
 * instruction budget before they start, so backtracking patterns on long
 * strings, huge moves and lying __len are cut off at their line. */
static const char *PATTERNS =
    "local long = string.rep('a', 3000)\n"
    "local huge = string.rep('a', 1000000)\n"
    "return { score = function(pod, node)\n"
    "  if pod.name == 'find' then return long:find('.-.-.-x') or 0 end\n"
    "  if pod.name == 'match' then return string.match(long, '(a*)(a*)(a*)x') or 0 end\n"
    "  if pod.name == 'gmatch' then for w in long:gmatch('a-a-a-x') do end return 0 end\n"
    "  if pod.name == 'gsub' then return (select(2, long:gsub('%bab.-.-.-x', ''))) end\n"
    "  if pod.name == 'rep' then return #string.rep('', 1e15) + #('').rep('', 1e15, '') end\n"
    "  if pod.name == 'move' then table.move({}, 1, 1e15, 2) end\n"
    "  local liar = setmetatable({}, { __len = function() return 1e15 end })\n"
    "  if pod.name == 'insert' then table.insert(liar, 1, 0) end\n"
    "  if pod.name == 'remove' then table.remove(liar, 1) end\n"
    "  local t = { 1, 2, 3 }\n"
    "  table.insert(t, 1, 0)\n"
    "  table.remove(t)\n"
    "  table.move(t, 1, 3, 2)\n"
    "  local ok = ('team-a'):match('^(%w+)-(%w+)$') == 'team'\n"
    "    and select(2, string.gsub('a b  c', '%s+', ' ')) == 2\n"
    "    and huge:find('needle', 1, true) == nil\n"
    "    and huge:find('needle') == nil\n"
    "    and long:find('^a-b') == nil\n"
    "    and node.labels.zone:match('^[%w%-]+$') ~= nil\n"
    "    and table.concat(t, ',') == '0,0,1,2' and string.rep('ab', 3, ',') == 'ab,ab,ab'\n"
    "  return ok and 1 or 0\n"
    "end }\n";

TEST(sandbox_c_loops_guarded) {
    us_err err = {0};
    us_policy_limits lim = {1000000, 0, 0};
    us_policy *p = load_src(NULL, PATTERNS, NULL, &lim, &err);
    double v;
    CHECK(p != NULL);
    if (!p) return;
    refused(p, "find", ":4: instruction budget exceeded (1000000 instructions) in string.find");
    refused(p, "match", ":5: instruction budget exceeded (1000000 instructions) in string.match");
    refused(p, "gmatch", ":6: instruction budget exceeded (1000000 instructions) in string.gmatch");
    refused(p, "gsub", ":7: instruction budget exceeded (1000000 instructions) in string.gsub");
    refused(p, "move", ":9: instruction budget exceeded (1000000 instructions) in table.move");
    refused(p, "insert", ":11: instruction budget exceeded (1000000 instructions) in table.insert");
    refused(p, "remove", ":12: instruction budget exceeded (1000000 instructions) in table.remove");
    CHECK(score1(p, "rep", &v, &err) == 0 && v == 0);
    CHECK(score1(p, "ordinary", &v, &err) == 0 && v == 1);
    us_policy_free(p);
}

/* ---- budgets ------------------------------------------------------------ */

static const char *RUNAWAY =
    "local M = {}\n"                                                       /* 1 */
    "local function recurse(n)\n"                                          /* 2 */
    "  return recurse(n + 1) + 1\n"                                        /* 3 */
    "end\n"                                                                /* 4 */
    "function M.score(pod, node)\n"                                        /* 5 */
    "  if pod.name == 'loop' then\n"                                       /* 6 */
    "    while true do end\n"                                              /* 7 */
    "  elseif pod.name == 'recurse' then\n"                                /* 8 */
    "    return recurse(1)\n"                                              /* 9 */
    "  elseif pod.name == 'bomb' then\n"                                   /* 10 */
    "    local t = {}\n"                                                   /* 11 */
    "    for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end\n"        /* 12 */
    "  elseif pod.name == 'bigstring' then\n"                              /* 13 */
    "    return #string.rep('x', 1 << 30)\n"                               /* 14 */
    "  elseif pod.name == 'pcall_loop' then\n"                             /* 15 */
    "    while true do pcall(function() while true do end end) end\n"      /* 16 */
    "  elseif pod.name == 'error_table' then\n"                            /* 17 */
    "    error({})\n"                                                      /* 18 */
    "  elseif pod.name == 'yield' then\n"                                  /* 19 */
    "    coroutine.yield(1)\n"                                             /* 20 */
    "  elseif pod.name == 'co_loop' then\n"                                /* 21 */
    "    coroutine.wrap(function() while true do end end)()\n"             /* 22 */
    "  end\n"                                                              /* 23 */
    "  return 5\n"                                                         /* 24 */
    "end\n"
    "return M\n";

/* Once the budget is spent, not one more instruction of the code that
 * catches the error runs: pcall, xpcall (and its handler, which Lua would
 * call from inside the count hook, where no hook runs: "handler" hung
 * forever), coroutine.resume and coroutine.close (of a __close handler)
 * raise it again at once.  The counter `after` survives the failed call;
 * the probe "report" reads it. */
static const char *CATCHERS =
    "local after = 0\n"
    "local function spin() while true do end end\n"
    "local M = {}\n"
    "function M.score(pod, node)\n"
    "  local how = pod.name\n"
    "  if how == 'report' then return after end\n"
    "  after = 0\n"
    "  while true do\n"
    "    if how == 'pcall' then pcall(spin)\n"
    "    elseif how == 'xpcall' then xpcall(spin, function(e) after = after + 100 return e end)\n"
    "    elseif how == 'handler' then xpcall(spin, spin)\n"
    "    elseif how == 'resume' then coroutine.resume(coroutine.create(spin))\n"
    "    elseif how == 'wrap' then pcall(coroutine.wrap(spin))\n"
    "    elseif how == 'close' then\n"
    "      local co = coroutine.create(function()\n"
    "        local x <close> = setmetatable({}, { __close = spin })\n"
    "        coroutine.yield()\n"
    "      end)\n"
    "      coroutine.resume(co)\n"
    "      coroutine.close(co)\n"
    "    end\n"
    "    after = after + 1\n"
    "  end\n"
    "end\n"
    "return M\n";

TEST(spent_budget_cannot_be_caught) {
    us_err err = {0};
    us_policy_limits lim = {200000, 0, 60000}; /* time: not what is tested */
    us_policy *p = load_src(NULL, CATCHERS, NULL, &lim, &err);
    double v;
    static char *const hows[] = {"pcall", "xpcall", "handler", "resume", "wrap", "close"};
    CHECK(p != NULL);
    if (!p) return;
    for (size_t i = 0; i < sizeof hows / sizeof *hows; i++) {
        CHECK(score1(p, hows[i], &v, &err) == -1);
        CHECK_HAS(err.msg, "placement.lua:2: instruction budget exceeded (200000 instructions)");
        CHECK(score1(p, "report", &v, &err) == 0);
        if (v != 0) fprintf(stderr, "  %s: %g catching iterations ran after the cut\n", hows[i], v);
        CHECK(v == 0);
    }
    us_policy_free(p);
}

/* The call fails with US_EPOLICY naming want, and the next call works. */
static void cut_off(us_policy *p, char *probe, const char *want) {
    us_err err = {0};
    double v = 0;
    int rc = score1(p, probe, &v, &err);
    if (rc != -1 || err.code != US_EPOLICY || !strstr(err.msg, want)) {
        fprintf(stderr, "  %s: rc %d code %d msg \"%s\" (wanted \"%s\")\n", probe, rc, err.code,
                err.msg, want);
        check_cur_failed = 1;
    }
    rc = score1(p, "ok", &v, &err);
    if (rc != 0 || v != 5) {
        fprintf(stderr, "  after %s: rc %d score %g msg \"%s\"\n", probe, rc, v, err.msg);
        check_cur_failed = 1;
    }
}

TEST(budgets_cut_off_and_state_survives) {
    us_policy_limits lim = {1000000, (size_t)16 << 20, 60000}; /* time: not what is tested */
    us_err err = {0};
    us_policy *p = load_src(NULL, RUNAWAY, NULL, &lim, &err);
    CHECK(p != NULL);
    if (!p) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    cut_off(p, "loop", "placement.lua:7: instruction budget exceeded (1000000 instructions)");
    cut_off(p, "recurse", "placement.lua:3:");
    cut_off(p, "bomb", "placement.lua:12: memory budget exceeded (16777216 bytes)");
    cut_off(p, "bigstring", "placement.lua:14: memory budget exceeded (16777216 bytes)");
    cut_off(p, "pcall_loop", "placement.lua:16: instruction budget exceeded");
    cut_off(p, "error_table", "placement.lua:18: (error object is a table value)");
    cut_off(p, "yield", "placement.lua:20: score yielded outside a coroutine");
    cut_off(p, "co_loop", "placement.lua:22: instruction budget exceeded");
    /* and again: nothing accumulates across failed calls */
    cut_off(p, "bomb", "memory budget exceeded");
    cut_off(p, "loop", "instruction budget exceeded");
    us_policy_free(p);
}

TEST(budgets_default_limits) {
    us_err err = {0};
    us_policy *p = load_src(NULL, RUNAWAY, NULL, NULL, &err);
    CHECK(p != NULL);
    if (!p) return;
    cut_off(p, "loop", "placement.lua:7: instruction budget exceeded (10000000 instructions)");
    us_policy_free(p);
}

/* ---- loading ------------------------------------------------------------ */

TEST(load_errors) {
    us_err err = {0};
    us_policy *p;

    p = load_src(NULL, "return { scor = function() end }\n", NULL, NULL, &err);
    CHECK(p == NULL);
    CHECK(err.code == US_EPOLICY);
    CHECK_STR(err.msg, "placement.lua: must return a table with a function \"score\"");

    p = load_src(NULL, NULL, "return 42\n", NULL, &err);
    CHECK(p == NULL);
    CHECK_STR(err.msg, "background.lua: must return a table with a function \"reoffer\"");

    p = load_src("return { compute = 1 }\n", NULL, NULL, NULL, &err);
    CHECK(p == NULL);
    CHECK_STR(err.msg, "fairshare.lua: must return a table with a function \"compute\"");

    p = load_src(NULL, "local M = {}\nlocal x = = 1\nreturn M\n", NULL, NULL, &err);
    CHECK(p == NULL);
    CHECK(err.code == US_EPOLICY);
    CHECK_HAS(err.msg, "placement.lua:2:");

    p = load_src(NULL, NULL, "local x = 1\nerror('boom')\n", NULL, &err);
    CHECK(p == NULL);
    CHECK_STR(err.msg, "background.lua:2: boom");

    p = load_src("\x1bLua\x54\x00 binary", NULL, NULL, NULL, &err);
    CHECK(p == NULL);
    CHECK_HAS(err.msg, "fairshare.lua: attempt to load a binary chunk");

    us_policy_limits lim = {100000, 0, 0};
    p = load_src("local n = 0\nwhile true do n = n + 1 end\n", NULL, NULL, &lim, &err);
    CHECK(p == NULL);
    CHECK_HAS(err.msg, "fairshare.lua:2: instruction budget exceeded");

    us_policy_limits tiny = {0, 4096, 0};
    p = load_src(NULL, NULL, NULL, &tiny, &err);
    CHECK(p == NULL);
    CHECK(err.code == US_EPOLICY);
    CHECK_HAS(err.msg, "memory budget");

    p = us_policy_load("/nonexistent/understory-policies", NULL, &err);
    CHECK(p == NULL);
    CHECK(err.code == US_EIO);
    CHECK_HAS(err.msg, "cannot open the directory: No such file or directory");
}

TEST(id_dir_and_seed) {
    us_err err = {0};
    char dir[64];
    const char *rnd = "return { score = function(pod, node) return math.random(1, 1000000000) end }\n";
    CHECK(make_dir(dir, NULL, rnd, NULL) == 0);
    us_policy *a = us_policy_load(dir, NULL, &err), *b = us_policy_load(dir, NULL, &err);
    us_policy *c = load_src(NULL, "return { score = function() return 1 end }\n", NULL, NULL, &err);
    remove_dir(dir);
    CHECK(a && b && c);
    if (!a || !b || !c) goto done;
    CHECK_STR(us_policy_dir(a), dir);
    CHECK(strlen(us_policy_id(a)) == 16);
    CHECK_STR(us_policy_id(a), us_policy_id(b));
    CHECK(strcmp(us_policy_id(a), us_policy_id(c)) != 0);

    double x, y, z;
    /* loaded states start from the same seed, and re-seeding repeats */
    CHECK(score1(a, "p", &x, &err) == 0 && score1(b, "p", &y, &err) == 0 && x == y);
    us_policy_seed(a, 42);
    us_policy_seed(b, 42);
    CHECK(score1(a, "p", &x, &err) == 0 && score1(b, "p", &y, &err) == 0 && x == y);
    us_policy_seed(b, 43);
    CHECK(score1(b, "p", &z, &err) == 0 && z != x);
    us_policy_seed(b, 42);
    CHECK(score1(b, "p", &z, &err) == 0 && z == x);
done:
    us_policy_free(a);
    us_policy_free(b);
    us_policy_free(c);
}

/* ---- result conversion --------------------------------------------------- */

static const char *FS_MODES =
    "return { compute = function(view)\n"
    "  local mode = view.pool\n"
    "  if mode == 'nil' then return nil end\n"
    "  local r = {}\n"
    "  for _, q in ipairs(view.queues) do\n"
    "    if mode == 'good' then r[q.name] = { gpu = 1.5, cpu = 250, memory = 1024 }\n"
    "    elseif mode == 'string' then r[q.name] = { gpu = '1', cpu = 0, memory = 0 }\n"
    "    elseif mode == 'nan' then r[q.name] = { gpu = 0, cpu = 0/0, memory = 0 }\n"
    "    elseif mode == 'number' then r[q.name] = 3\n"
    "    elseif mode == 'view' then\n"
    "      local p = q.parent and view.queues_by_name[q.parent]\n"
    "      r[q.name] = { gpu = q.quota.gpu, cpu = q.limit.cpu, memory = #q.children\n"
    "        + (p and 1000 or 0) + q.over_quota_weight.memory * 100 + q.demand.memory * 0\n"
    "        + q.allocated.gpu * 10000 + q.priority * 100000 }\n"
    "    end\n"
    "  end\n"
    "  r.extra = 'ignored'\n"
    "  return r\n"
    "end }\n";

static int fs_mode(us_policy *p, const char *mode, double *fair, us_err *err) {
    us_fs_queue q[2];
    memset(q, 0, sizeof q);
    q[0].name = "a";
    q[0].parent = -1;
    q[0].priority = 2;
    q[1].name = "b";
    q[1].parent = 0;
    for (int r = 0; r < US_NRES; r++) {
        q[0].res[r].quota = US_UNLIMITED;
        q[0].res[r].limit = 7000;
        q[0].res[r].over_quota_weight = 2;
        q[1].res[r].quota = 500;
        q[1].res[r].limit = US_UNLIMITED;
        q[1].res[r].over_quota_weight = 0.5;
    }
    q[1].allocated.v[US_GPU] = 3000;
    us_fs_input in = {mode, {{8000, 64000, 1 << 30}}, q, 2};
    return us_policy_fairshare(p, &in, fair, err);
}

TEST(convert_fairshare) {
    us_err err = {0};
    double fair[2 * US_NRES];
    us_policy *p = load_src(FS_MODES, NULL, NULL, NULL, &err);
    CHECK(p != NULL);
    if (!p) return;

    CHECK(fs_mode(p, "good", fair, &err) == 0);
    CHECK(fair[US_GPU] == 1500 && fair[US_CPU] == 250 && fair[US_MEM] == 1024);
    CHECK(fair[US_NRES + US_GPU] == 1500);

    /* the view: quota -1 stays -1, gpu in devices, limits in engine units
     * for cpu, children, parent, weights, allocated, priority */
    CHECK(fs_mode(p, "view", fair, &err) == 0);
    CHECK(fair[US_GPU] == -1000);              /* unlimited quota, times 1000 */
    CHECK(fair[US_CPU] == 7000);
    CHECK(fair[US_MEM] == 1 + 200 + 200000);  /* one child, weight 2, priority 2 */
    CHECK(fair[US_NRES + US_GPU] == 500);      /* 0.5 devices */
    CHECK(fair[US_NRES + US_CPU] == -1);
    CHECK(fair[US_NRES + US_MEM] == 1000 + 50 + 30000);

    CHECK(fs_mode(p, "missing", fair, &err) == -1);
    CHECK(err.code == US_EPOLICY);
    CHECK_STR(err.msg, "fairshare.lua: compute returned no share for queue \"a\"");
    CHECK(fs_mode(p, "string", fair, &err) == -1);
    CHECK_HAS(err.msg, "non-number gpu share for queue \"a\"");
    CHECK(fs_mode(p, "nan", fair, &err) == -1);
    CHECK_HAS(err.msg, "non-finite cpu share for queue \"a\"");
    CHECK(fs_mode(p, "number", fair, &err) == -1);
    CHECK_HAS(err.msg, "for queue \"a\"");
    CHECK(fs_mode(p, "nil", fair, &err) == -1);
    CHECK_STR(err.msg, "fairshare.lua: compute must return a table, got nil");
    CHECK(fs_mode(p, "good", fair, &err) == 0);
    us_policy_free(p);
}

static const char *PL_MODES =
    "return { score = function(pod, node)\n"
    "  if pod.name == 'nil' then return nil end\n"
    "  if pod.name == 'nan' then return 0/0 end\n"
    "  if pod.name == 'inf' then return math.huge end\n"
    "  if pod.name == 'string' then return '3' end\n"
    "  if pod.name == 'view' then\n"
    "    local ok = pod.workload == 'w' and pod.queue == 'team-a' and pod.priority == 50\n"
    "      and pod.background == false and pod.requests.gpu == 1 and pod.requests.cpu == 8000\n"
    "      and math.type(pod.requests.memory) == 'integer' and pod.labels.team == 'x'\n"
    "      and node.name == 'n1' and node.pool == 'default' and node.labels.zone == 'a'\n"
    "      and node.capacity.gpu == 8 and node.allocated.gpu == 2 and node.free.gpu == 6\n"
    "      and node.free.cpu == 48000 and node.free_gpus == 6 and node.unschedulable == false\n"
    "    return ok and 1 or 0\n"
    "  end\n"
    "  return 2.5\n"
    "end }\n";

TEST(convert_score) {
    us_err err = {0};
    double v;
    us_policy *p = load_src(NULL, PL_MODES, NULL, NULL, &err);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(score1(p, "nil", &v, &err) == -1);
    CHECK(err.code == US_EPOLICY);
    CHECK_HAS(err.msg, "placement.lua: score must return a finite number, got nil");
    CHECK_HAS(err.msg, "node \"n1\"");
    CHECK(score1(p, "nan", &v, &err) == -1);
    CHECK_HAS(err.msg, "finite number, got ");
    CHECK_HAS(err.msg, "nan");
    CHECK(score1(p, "inf", &v, &err) == -1);
    CHECK_HAS(err.msg, "got inf");
    CHECK(score1(p, "string", &v, &err) == -1);
    CHECK_HAS(err.msg, "got string");
    CHECK(score1(p, "view", &v, &err) == 0 && v == 1);
    CHECK(score1(p, "x", &v, &err) == 0 && v == 2.5);
    us_policy_free(p);
}

/* The view bg_mode() gives, as mode 'fields' writes it: every documented
 * field, of its documented type, and no other. */
#define BG_VIEW_NODES \
    "{1={capacity={cpu=integer:64000,gpu=float:8.0,memory=integer:68719476736},free={cpu=inte" \
    "ger:8000,gpu=float:2.0,memory=integer:1073741824},free_at_end={cpu=integer:8000,gpu=floa" \
    "t:2.0,memory=integer:1073741824},free_gpus=integer:2,free_gpus_at_end=integer:2,idle={cp" \
    "u=integer:7900,gpu=float:1.0,memory=integer:1072693248},idle_gpus=integer:1,labels={zone" \
    "=\"a\"},name=\"n1\"},2={capacity={cpu=integer:64000,gpu=float:8.0,memory=integer:6871947" \
    "6736},free={cpu=integer:64000,gpu=float:8.0,memory=integer:1073741824},free_at_end={cpu=" \
    "integer:64000,gpu=float:8.0,memory=integer:1073741824},free_gpus=integer:8,free_gpus_at_" \
    "end=integer:8,idle={cpu=integer:63900,gpu=float:7.0,memory=integer:1072693248},idle_gpus" \
    "=integer:7,labels={zone=\"a\"},name=\"n2\"}}"
#define BG_VIEW_RUNNING \
    "{1={labels={team=\"x\"},name=\"r1\",node=\"n1\",priority=integer:50,requests={cpu=intege" \
    "r:100,gpu=float:1.0,memory=integer:1048576},workload=\"w\"},2={labels={team=\"x\"},name=" \
    "\"r2\",node=\"n2\",priority=integer:50,requests={cpu=integer:100,gpu=float:1.0,memory=in" \
    "teger:1048576},workload=\"w\"}}"
#define BG_VIEW_PENDING \
    "{1={candidates={1=\"n2\"},labels={team=\"x\"},name=\"fields\",priority=integer:50,reques" \
    "ts={cpu=integer:100,gpu=float:1.0,memory=integer:1048576},workload=\"w\"},2={candidates=" \
    "{1=\"n1\",2=\"n2\"},labels={team=\"x\"},name=\"px\",priority=integer:50,requests={cpu=in" \
    "teger:100,gpu=float:1.0,memory=integer:1048576},workload=\"w\"}}"

static const char *BG_MODES =
    "local VIEW = { nodes = [==[" BG_VIEW_NODES "]==], running = [==[" BG_VIEW_RUNNING "]==],\n"
    "  pending = [==[" BG_VIEW_PENDING "]==] }\n"
    "return { reoffer = function(view)\n"
    "  local mode = view.pending[1].name\n"
    "  if mode == 'good' then return { keep = { 'r2' }, place = { good = 'n2', px = 'n1' } }\n"
    "  elseif mode == 'view' then\n"
    "    local n1, r1, px = view.nodes[1], view.running[1], view.pending[2]\n"
    "    local ok = n1.name == 'n1' and view.nodes_by_name.n2 == view.nodes[2]\n"
    "      and n1.free.gpu == 2 and n1.free_gpus == 2 and n1.capacity.gpu == 8 and n1.labels.zone == 'a'\n"
    "      and r1.name == 'r1' and r1.node == 'n1' and r1.workload == 'w' and r1.requests.gpu == 1\n"
    "      and r1.labels.team == 'x' and r1.priority == 50\n"
    "      and #px.candidates == 2 and px.candidates[1] == 'n1' and px.candidates[2] == 'n2'\n"
    "    if ok then return { keep = { 'r1', 'r1' } } end\n"
    "    return {}\n"
    "  elseif mode == 'fields' then\n"
    "    -- every table of the view, keys sorted, values with their types:\n"
    "    -- a field missing, extra, of another type or value shows here\n"
    "    local function dump(v)\n"
    "      if type(v) == 'string' then return string.format('%q', v) end\n"
    "      if type(v) ~= 'table' then return (math.type(v) or type(v)) .. ':' .. tostring(v) end\n"
    "      local keys, out = {}, {}\n"
    "      for k in pairs(v) do keys[#keys + 1] = k end\n"
    "      table.sort(keys, function(a, b)\n"
    "        if type(a) ~= type(b) then return type(a) < type(b) end\n"
    "        return a < b\n"
    "      end)\n"
    "      for _, k in ipairs(keys) do out[#out + 1] = tostring(k) .. '=' .. dump(v[k]) end\n"
    "      return '{' .. table.concat(out, ',') .. '}'\n"
    "    end\n"
    "    local keys = {}\n"
    "    for k in pairs(view) do keys[#keys + 1] = k end\n"
    "    table.sort(keys)\n"
    "    if table.concat(keys, ' ') ~= 'nodes nodes_by_name pending running' then error('view keys') end\n"
    "    for i, n in ipairs(view.nodes) do\n"
    "      if view.nodes_by_name[n.name] ~= n then error('nodes_by_name') end\n"
    "    end\n"
    "    if next(view.nodes_by_name, next(view.nodes_by_name, next(view.nodes_by_name))) then error('nodes_by_name') end\n"
    "    for _, part in ipairs({ 'nodes', 'running', 'pending' }) do\n"
    "      local got = dump(view[part])\n"
    "      if got ~= VIEW[part] then error('view.' .. part .. ': ' .. got) end\n"
    "    end\n"
    "    -- shared, as documented: one table per workload's requests and\n"
    "    -- labels, per candidate list, per node in nodes_by_name, and a\n"
    "    -- node's rooms where equal (here free_at_end is free; idle is not:\n"
    "    -- a pod runs there)\n"
    "    local r1, r2, p1, p2 = view.running[1], view.running[2], view.pending[1], view.pending[2]\n"
    "    if r1.requests ~= p2.requests or r1.labels ~= r2.labels or p1.candidates == p2.candidates\n"
    "      or view.nodes_by_name.n1 ~= view.nodes[1] then error('not shared') end\n"
    "    for _, n in ipairs(view.nodes) do\n"
    "      if n.free_at_end ~= n.free or n.idle == n.free then error('rooms') end\n"
    "    end\n"
    "    return { keep = { 'r1' } }\n"
    "  elseif mode == 'unknown_keep' then return { keep = { 'nope' } }\n"
    "  elseif mode == 'unknown_place' then return { place = { zz = 'n1', nope = 'n1' } }\n"
    "  elseif mode == 'bad_node' then return { place = { bad_node = 'n9' } }\n"
    "  elseif mode == 'not_candidate' then return { place = { not_candidate = 'n1' } }\n"
    "  elseif mode == 'keep_type' then return { keep = 5 }\n"
    "  elseif mode == 'keep_elem' then return { keep = { 5 } }\n"
    "  elseif mode == 'place_type' then return { place = { place_type = 3 } }\n"
    "  elseif mode == 'place_key' then return { place = { [1] = 'n1' } }\n"
    "  elseif mode == 'nil' then return nil\n"
    "  end\n"
    "  return {}\n"
    "end }\n";

/* The re-offer's two other rooms, as the engine derives them: once the AI
 * plan ends (here: no transition, the same as free) and idle (free less
 * every offered running pod on the node, kept or not). */
static void bg_rooms(us_bg_node *nodes, size_t n, const us_bg_pod *running, size_t nr) {
    for (size_t k = 0; k < n; k++) {
        nodes[k].free_at_end = nodes[k].free;
        nodes[k].free_gpus_at_end = nodes[k].free_gpus;
        nodes[k].idle = nodes[k].free;
        nodes[k].idle_gpus = nodes[k].free_gpus;
    }
    for (size_t i = 0; i < nr; i++) {
        us_bg_node *bn = &nodes[running[i].node];
        bn->idle = us_res_sub(bn->idle, running[i].wl->request);
        bn->idle_gpus -= (int)((running[i].wl->request.v[US_GPU] + US_GPU_UNIT - 1) / US_GPU_UNIT);
    }
}

static int bg_mode(us_policy *p, char *mode, bool *keep, int *place, us_err *err) {
    static us_node n1, n2;
    n1 = mknode("n1", 8, 64000, (int64_t)64 << 30);
    n2 = mknode("n2", 8, 64000, (int64_t)64 << 30);
    us_bg_node nodes[2] = {{.node = &n1, .free = {{2000, 8000, 1 << 30}}, .free_gpus = 2},
                           {.node = &n2, .free = {{8000, 64000, 1 << 30}}, .free_gpus = 8}};
    us_workload w = mkwl("w", 1000, 100, 1 << 20);
    us_pod r1 = mkpod("r1"), r2 = mkpod("r2"), first = mkpod(mode), px = mkpod("px");
    int only2[] = {1}, both[] = {0, 1};
    us_bg_pod running[2] = {{&r1, &w, 0, NULL, 0}, {&r2, &w, 1, NULL, 0}};
    us_bg_pod pending[2] = {{&first, &w, -1, only2, 1}, {&px, &w, -1, both, 2}};
    bg_rooms(nodes, 2, running, 2);
    us_bg_input in = {nodes, 2, running, 2, pending, 2};
    return us_policy_reoffer(p, &in, keep, place, err);
}

TEST(convert_reoffer) {
    us_err err = {0};
    bool keep[2];
    int place[2];
    us_policy *p = load_src(NULL, NULL, BG_MODES, NULL, &err);
    CHECK(p != NULL);
    if (!p) return;

    CHECK(bg_mode(p, "good", keep, place, &err) == 0);
    CHECK(!keep[0] && keep[1]);
    CHECK(place[0] == 1 && place[1] == 0);
    CHECK(bg_mode(p, "view", keep, place, &err) == 0);
    CHECK(keep[0] && !keep[1] && place[0] == -1 && place[1] == -1);
    CHECK(bg_mode(p, "fields", keep, place, &err) == 0);
    if (err.msg[0]) fprintf(stderr, "  %s\n", err.msg);
    CHECK(keep[0] && !keep[1] && place[0] == -1 && place[1] == -1);
    CHECK(bg_mode(p, "empty", keep, place, &err) == 0);
    CHECK(!keep[0] && !keep[1] && place[0] == -1 && place[1] == -1);

    CHECK(bg_mode(p, "unknown_keep", keep, place, &err) == -1);
    CHECK(err.code == US_EPOLICY);
    CHECK_STR(err.msg, "background.lua: reoffer kept \"nope\", which is not a running background pod");
    CHECK(bg_mode(p, "unknown_place", keep, place, &err) == -1);
    CHECK_STR(err.msg, "background.lua: reoffer placed \"nope\", which is not a pending background pod");
    CHECK(bg_mode(p, "bad_node", keep, place, &err) == -1);
    CHECK_HAS(err.msg, "placed pod \"bad_node\" on \"n9\", which is not a node");
    CHECK(bg_mode(p, "not_candidate", keep, place, &err) == -1);
    CHECK_HAS(err.msg, "placed pod \"not_candidate\" on node \"n1\", which is not among its candidates");
    CHECK(bg_mode(p, "keep_type", keep, place, &err) == -1);
    CHECK_HAS(err.msg, "keep must be a list of pod names, got number");
    CHECK(bg_mode(p, "keep_elem", keep, place, &err) == -1);
    CHECK_HAS(err.msg, "keep[1] must be a pod name, got number");
    CHECK(bg_mode(p, "place_type", keep, place, &err) == -1);
    CHECK_HAS(err.msg, "place[\"place_type\"] must be a node name, got number");
    CHECK(bg_mode(p, "place_key", keep, place, &err) == -1);
    CHECK_HAS(err.msg, "number key");
    CHECK(bg_mode(p, "nil", keep, place, &err) == -1);
    CHECK_STR(err.msg, "background.lua: reoffer must return a table, got nil");
    us_policy_free(p);
}

/* ---- default Lua policies == built-in C ------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static unsigned rnd(unsigned n) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)((rng >> 33) % n);
}

#define MAXQ 48
static char qnames[MAXQ][16];

/* Compare Lua and C fair shares, exactly. */
static bool same_fairshare(us_policy *p, const us_fs_queue *qs, size_t n, us_res cap) {
    double lua[MAXQ * US_NRES], c[MAXQ * US_NRES];
    us_fs_input in = {"default", cap, qs, n};
    us_err err = {0};
    bool same = true;
    if (us_policy_fairshare(p, &in, lua, &err) != 0) {
        fprintf(stderr, "  lua fairshare: %s\n", err.msg);
        return false;
    }
    if (us_builtin_fairshare(&in, c, &err) != 0) {
        fprintf(stderr, "  builtin fairshare: %s\n", err.msg);
        return false;
    }
    for (size_t i = 0; i < n * US_NRES; i++)
        if (lua[i] != c[i]) {
            fprintf(stderr, "  queue %s %s: lua %.17g != c %.17g\n", qs[i / US_NRES].name,
                    us_res_names[i % US_NRES], lua[i], c[i]);
            same = false;
        }
    return same;
}

static void fsq(us_fs_queue *q, const char *name, int parent, int prio, double quota, double w,
                double demand, double limit) {
    memset(q, 0, sizeof *q);
    q->name = name;
    q->parent = parent;
    q->priority = prio;
    for (int r = 0; r < US_NRES; r++) {
        double unit = r == US_GPU ? 1000 : r == US_CPU ? 8000 : (double)(1 << 30);
        q->res[r].quota = quota < 0 ? US_UNLIMITED : (int64_t)(quota * unit);
        q->res[r].limit = limit < 0 ? US_UNLIMITED : (int64_t)(limit * unit);
        q->res[r].over_quota_weight = w;
        q->demand.v[r] = (int64_t)(demand * unit);
        q->allocated.v[r] = (int64_t)(demand * unit / 2);
    }
}

TEST(defaults_fairshare_equal_builtin) {
    us_err err = {0};
    us_policy *p = us_policy_load(defaults_dir(), NULL, &err);
    CHECK(p != NULL);
    if (!p) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    us_fs_queue q[MAXQ];
    us_res cap = {{10000, 80000, (int64_t)10 << 30}};

    /* hand-made: quota then weight, water-filling, buckets, limits, zero
     * weights, oversubscribed quota, hierarchy */
    fsq(&q[0], "c", -1, 0, 0, 2, 10, -1);
    fsq(&q[1], "a", -1, 0, 4, 1, 8, -1);
    fsq(&q[2], "b", -1, 0, 2, 1, 3, -1);
    CHECK(same_fairshare(p, q, 3, cap));

    fsq(&q[0], "a", -1, 0, 0, 1, 1, -1);
    fsq(&q[1], "b", -1, 0, 0, 1, 20, -1);
    fsq(&q[2], "c", -1, 0, 0, 2, 20, -1);
    cap.v[US_GPU] = 12000;
    CHECK(same_fairshare(p, q, 3, cap));

    fsq(&q[0], "h", -1, 1, 2, 1, 6, -1);
    fsq(&q[1], "l1", -1, 0, 1, 1, 10, -1);
    fsq(&q[2], "l2", -1, 0, 1, 3, 10, 2.5);
    fsq(&q[3], "z", -1, 3, 0, 0, 10, -1);
    CHECK(same_fairshare(p, q, 4, cap));

    fsq(&q[0], "a", -1, 0, 6, 1, 6, -1);
    fsq(&q[1], "b", -1, 0, 3, 1, 3, -1);
    fsq(&q[2], "u", -1, 0, -1, 0, 0.7, -1);
    cap.v[US_GPU] = 6000;
    CHECK(same_fairshare(p, q, 3, cap));

    fsq(&q[0], "r2", -1, 0, 4, 1, 20, -1);
    fsq(&q[1], "r1", -1, 0, 8, 1, 12, -1);
    fsq(&q[2], "y", 1, 0, 2, 1, 2, -1);
    fsq(&q[3], "x", 1, 0, 4, 2, 10, -1);
    fsq(&q[4], "z", 3, 0, 0, 1, 7, -1);
    fsq(&q[5], "z2", 3, 0, 0, 0, 3, -1);
    cap.v[US_GPU] = 16000;
    CHECK(same_fairshare(p, q, 6, cap));

    /* generated: 40 queues, three levels, every feature mixed */
    for (int round = 0; round < 20; round++) {
        size_t n = 40;
        static const double weights[] = {0, 0.5, 1, 1, 2, 3};
        for (size_t i = 0; i < n; i++) {
            int parent = i < 6 ? -1 : (int)rnd((unsigned)(i < 16 ? 6 : 16));
            snprintf(qnames[i], sizeof qnames[i], "%c%02zu", 'a' + rnd(26), i);
            memset(&q[i], 0, sizeof q[i]);
            q[i].name = qnames[i];
            q[i].parent = parent;
            q[i].priority = (int)rnd(3);
            q[i].created_at = (double)rnd(3) - 1;  /* ties for a unit left over */
            for (int r = 0; r < US_NRES; r++) {
                int64_t unit = r == US_GPU ? 250 : r == US_CPU ? 1000 : (int64_t)1 << 28;
                q[i].res[r].quota = rnd(4) == 0 ? US_UNLIMITED : (int64_t)rnd(12) * unit;
                q[i].res[r].limit = rnd(3) == 0 ? (int64_t)rnd(20) * unit : US_UNLIMITED;
                q[i].res[r].over_quota_weight = weights[rnd(6)];
            }
        }
        /* leaves ask; parents' demand is the sum of their children's */
        for (size_t i = n; i-- > 0;) {
            bool leaf = true;
            for (size_t j = 0; j < n; j++)
                if (q[j].parent == (int)i) leaf = false;
            if (leaf)
                for (int r = 0; r < US_NRES; r++) {
                    int64_t unit = r == US_GPU ? 500 : r == US_CPU ? 1000 : (int64_t)1 << 28;
                    q[i].demand.v[r] = (int64_t)rnd(16) * unit;
                    q[i].allocated.v[r] = q[i].demand.v[r] / 2;
                }
            if (q[i].parent >= 0) {
                q[q[i].parent].demand = us_res_add(q[q[i].parent].demand, q[i].demand);
                q[q[i].parent].allocated = us_res_add(q[q[i].parent].allocated, q[i].allocated);
            }
        }
        us_res gcap = {{(int64_t)(8 + rnd(120)) * 1000, (int64_t)(16 + rnd(400)) * 1000,
                        (int64_t)(1 + rnd(40)) << 30}};
        CHECK(same_fairshare(p, q, n, gcap));
    }
    us_policy_free(p);
}

TEST(defaults_score_equal_builtin) {
    us_err err = {0};
    us_policy *p = us_policy_load(defaults_dir(), NULL, &err);
    CHECK(p != NULL);
    if (!p) return;
    enum { NN = 30 };
    static char names[NN][16];
    us_node nodes[NN];
    us_node_view views[NN];
    double lua[NN], c[NN];
    for (int k = 0; k < NN; k++) {
        int g = k % 5 == 0 ? 0 : (int)(1 + rnd(8));
        snprintf(names[k], sizeof names[k], "n%02d", k);
        nodes[k] = mknode(names[k], g, (int64_t)(8 + rnd(120)) * 1000, (int64_t)(1 + rnd(64)) << 30);
        views[k].node = &nodes[k];
        views[k].labels = NULL;  /* all of the node's labels */
        views[k].allocated.v[US_GPU] = g ? (int64_t)rnd((unsigned)g * 1000 + 1) : 0;
        views[k].allocated.v[US_CPU] = (int64_t)rnd((unsigned)nodes[k].cap.v[US_CPU] + 1);
        views[k].allocated.v[US_MEM] = (int64_t)rnd(1u << 30);
        views[k].free_gpus = (int)((nodes[k].cap.v[US_GPU] - views[k].allocated.v[US_GPU]) / 1000);
    }
    static const int64_t gpu_reqs[] = {0, 100, 250, 700, 1000, 2000, 8000};
    for (int i = 0; i < 7; i++) {
        us_workload w = mkwl("w", gpu_reqs[i], (int64_t)rnd(16000), (int64_t)rnd(1u << 30));
        us_pod pod = mkpod("w-0");
        us_pod_view pv = {&pod, &w, "q"};
        CHECK(us_policy_score(p, &pv, views, NN, lua, &err) == 0);
        for (int k = 0; k < NN; k++) {
            c[k] = us_builtin_score(&pv, &views[k]);
            if (lua[k] != c[k]) {
                fprintf(stderr, "  req %lld node %s: lua %.17g != c %.17g\n",
                        (long long)gpu_reqs[i], names[k], lua[k], c[k]);
                check_cur_failed = 1;
            }
        }
    }
    us_policy_free(p);
}

static bool same_reoffer(us_policy *p, const us_bg_input *in) {
    bool lk[64], ck[64];
    int lp[64], cp[64];
    us_err err = {0};
    bool same = true;
    if (us_policy_reoffer(p, in, lk, lp, &err) != 0) {
        fprintf(stderr, "  lua reoffer: %s\n", err.msg);
        return false;
    }
    if (us_builtin_reoffer(in, ck, cp, &err) != 0) {
        fprintf(stderr, "  builtin reoffer: %s\n", err.msg);
        return false;
    }
    for (size_t i = 0; i < in->nrunning; i++)
        if (lk[i] != ck[i]) {
            fprintf(stderr, "  keep %s: lua %d c %d\n", in->running[i].pod->name, lk[i], ck[i]);
            same = false;
        }
    for (size_t j = 0; j < in->npending; j++)
        if (lp[j] != cp[j]) {
            fprintf(stderr, "  place %s: lua %d c %d\n", in->pending[j].pod->name, lp[j], cp[j]);
            same = false;
        }
    return same;
}

TEST(defaults_reoffer_equal_builtin) {
    us_err err = {0};
    us_policy *p = us_policy_load(defaults_dir(), NULL, &err);
    CHECK(p != NULL);
    if (!p) return;

    /* hand-made: the builtin test's cluster */
    {
        us_node n1 = mknode("n1", 8, 64000, (int64_t)64 << 30);
        us_node n2 = mknode("n2", 8, 64000, (int64_t)64 << 30);
        us_node n3 = mknode("n3", 8, 64000, (int64_t)64 << 30);
        us_bg_node nodes[3] = {{.node = &n1, .free = {{2000, 8000, (int64_t)8 << 30}}, .free_gpus = 2},
                               {.node = &n2, .free = {{6500, 32000, (int64_t)32 << 30}}, .free_gpus = 6},
                               {.node = &n3, .free = {{8000, 64000, (int64_t)64 << 30}}, .free_gpus = 8}};
        us_workload g1 = mkwl("g1", 1000, 100, 1 << 20), g2 = mkwl("g2", 2000, 100, 1 << 20);
        us_workload big = mkwl("big", 16000, 100, 0), c = mkwl("c", 0, 9000, 0);
        us_pod ra = mkpod("ra"), rb = mkpod("rb"), rc = mkpod("rc");
        us_pod p1 = mkpod("p1"), p2 = mkpod("p2"), p3 = mkpod("p3"), p4 = mkpod("p4");
        int all[] = {0, 1, 2}, first2[] = {0, 1};
        us_bg_pod running[3] = {{&ra, &g1, 0, NULL, 0}, {&rb, &g2, 0, NULL, 0}, {&rc, &c, 0, NULL, 0}};
        us_bg_pod pending[4] = {{&p1, &g1, -1, all, 3}, {&p2, &g1, -1, first2, 2},
                                {&p3, &big, -1, all, 3}, {&p4, &g2, -1, all, 3}};
        bg_rooms(nodes, 3, running, 3);
        nodes[0].free_at_end.v[US_GPU] += 1000;  /* a transition: more room once the plan ends */
        nodes[0].free_gpus_at_end += 1;
        us_bg_input in = {nodes, 3, running, 3, pending, 4};
        CHECK(same_reoffer(p, &in));
    }

    /* generated: 20 nodes (some CPU-only, some with fractional use).  From
     * round 10 on, free room in whole units on identical nodes (scores tie
     * often: the node listed first must win, however the policy ranks)
     * and pending pods of few workloads sharing few candidate lists
     * (groups of several pods, placed one after another down the ranking) */
    enum { NN = 20, NR = 30, NP = 40 };
    static char nn[NN][16], rn[NR][16], pn[NP][16];
    static us_node nodes[NN];
    static us_bg_node bn[NN];
    static us_workload wls[8];
    static us_pod rp[NR], pp[NP];
    static us_bg_pod running[NR], pending[NP];
    static int cands[NP][NN];
    static char wnames[8][16];
    for (int round = 0; round < 40; round++) {
        bool ties = round >= 10;
        for (int k = 0; k < NN; k++) {
            int g = k % 4 == 3 ? 0 : 8;
            snprintf(nn[k], sizeof nn[k], "n%02d", k);
            nodes[k] = mknode(nn[k], g, 64000, (int64_t)256 << 30);
            bn[k].node = &nodes[k];
            bn[k].free.v[US_GPU] = g ? (ties ? (int64_t)rnd(4) * 2000 : (int64_t)rnd(8001)) : 0;
            bn[k].free.v[US_CPU] = ties ? (int64_t)rnd(3) * 16000 + 16000 : (int64_t)rnd(64001);
            bn[k].free.v[US_MEM] = (int64_t)rnd(256) << 30;
            bn[k].free_gpus = (int)(bn[k].free.v[US_GPU] / 1000);
        }
        for (int i = 0; i < 8; i++) {
            snprintf(wnames[i], sizeof wnames[i], "w%d", i);
            wls[i] = mkwl(wnames[i], (int64_t)rnd(3) * 1000, (int64_t)rnd(8000),
                          (int64_t)rnd(16) << 30);
        }
        for (int i = 0; i < NR; i++) {
            snprintf(rn[i], sizeof rn[i], "r%02d", i);
            rp[i] = mkpod(rn[i]);
            running[i] = (us_bg_pod){&rp[i], &wls[rnd(8)], (int)rnd(NN), NULL, 0};
        }
        for (int j = 0; j < NP; j++) {
            size_t nc = 0;
            snprintf(pn[j], sizeof pn[j], "p%02d", j);
            pp[j] = mkpod(pn[j]);
            for (int k = 0; k < NN; k++)
                if (rnd(3) != 0) cands[j][nc++] = k;
            pending[j] = (us_bg_pod){&pp[j], &wls[rnd(8)], -1, cands[j], nc};
            if (ties && j >= 3) {  /* the list of one of the first three pods, and its workload */
                const us_bg_pod *like = &pending[rnd(3)];
                pending[j] = (us_bg_pod){&pp[j], like->wl, -1, like->candidates, like->ncandidates};
            }
        }
        bg_rooms(bn, NN, running, NR);
        for (int k = 0; k < NN; k++) {  /* transitions: some nodes have more room at the end */
            int extra = nodes[k].gpus ? (int)rnd(3) : 0;
            bn[k].free_at_end.v[US_GPU] += extra * 1000;
            bn[k].free_gpus_at_end += extra;
            bn[k].free_at_end.v[US_CPU] += (int64_t)rnd(8000);
        }
        us_bg_input in = {bn, NN, running, NR, pending, NP};
        CHECK(same_reoffer(p, &in));
    }
    us_policy_free(p);
}


/* The view a call is given is the engine's, and grows with the cluster:
 * it is not charged to the memory budget, which bounds what the policy
 * allocates beyond it, and the instruction budget grows with it.  With a 2 MiB budget the default background.lua
 * decides a re-offer of 20,000 running pods on 2,000 nodes (a view of
 * several MiB) as the built-in does, twice in a row (the first view's
 * allowance ends with its call); a policy that allocates 4 MiB of its own
 * beside the same view is still cut off. */
#define BIG_NN 2000
#define BIG_NR 20000
TEST(budgets_make_room_for_the_view) {
    us_policy_limits lim = {100000000, (size_t)2 << 20, 60000};
    us_err err = {0};
    static us_node nodes[BIG_NN];
    static us_bg_node bn[BIG_NN];
    static char nn[BIG_NN][24], rn[BIG_NR][24];
    static us_pod rp[BIG_NR], pp[1];
    static us_bg_pod running[BIG_NR], pending[1];
    static bool keep[BIG_NR], ckeep[BIG_NR];
    static int place[1], cplace[1], cands[BIG_NN];
    us_workload w = mkwl("burn", 1000, 100, 1 << 20);
    for (int k = 0; k < BIG_NN; k++) {
        snprintf(nn[k], sizeof nn[k], "node-%05d", k);
        nodes[k] = mknode(nn[k], 8, 64000, (int64_t)256 << 30);
        bn[k].node = &nodes[k];
        bn[k].free = (us_res){{(k % 3) * 4000, 64000, (int64_t)256 << 30}};  /* some full */
        bn[k].free_gpus = (k % 3) * 4;
        cands[k] = k;
    }
    for (int i = 0; i < BIG_NR; i++) {
        snprintf(rn[i], sizeof rn[i], "burn-%05d", i);
        rp[i] = mkpod(rn[i]);
        running[i] = (us_bg_pod){&rp[i], &w, i % BIG_NN, NULL, 0};
    }
    pp[0] = mkpod("burn-new");
    pending[0] = (us_bg_pod){&pp[0], &w, -1, cands, BIG_NN};
    bg_rooms(bn, BIG_NN, running, BIG_NR);
    us_bg_input in = {bn, BIG_NN, running, BIG_NR, pending, 1};

    us_policy *p = us_policy_load(defaults_dir(), &lim, &err);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(us_builtin_reoffer(&in, ckeep, cplace, &err) == 0);
    /* what the state holds after a call: the view (some 5 MiB here) is
     * freed when the call ends, not left to later calls' collection */
    size_t held = us_policy_memory(p), after = 0;
    for (int round = 0; round < 2; round++) {
        CHECK(us_policy_reoffer(p, &in, keep, place, &err) == 0);
        CHECK(us_policy_memory(p) < held + ((size_t)1 << 20));
        CHECK(round == 0 || us_policy_memory(p) == after);
        after = us_policy_memory(p);
        size_t kept = 0, same = 0;
        for (int i = 0; i < BIG_NR; i++) {
            kept += keep[i];
            same += keep[i] == ckeep[i];
        }
        CHECK(same == BIG_NR && place[0] == cplace[0]);
        CHECK(kept > 0 && kept < BIG_NR);  /* the full nodes' pods go, the others stay */
        memset(&err, 0, sizeof err);
    }
    us_policy_free(p);

    const char *hog = "return { reoffer = function(view)\n"
                      "  local t = {}\n"
                      "  for i = 1, 100000 do t[i] = string.rep('x', 40) .. i end\n"
                      "  return { keep = {}, place = {} }\n"
                      "end }\n";
    p = load_src(NULL, NULL, hog, &lim, &err);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(us_policy_reoffer(p, &in, keep, place, &err) == -1);
    CHECK(err.code == US_EPOLICY && strstr(err.msg, "memory budget exceeded (2097152 bytes)"));
    us_policy_free(p);

    /* What a policy throws away is not what it holds: one that makes 64
     * MiB of garbage beside the same view, a MiB at a time, with a 2 MiB
     * budget, decides (it keeps every pod, which it can only return after
     * the churn). */
    const char *churn = "return { reoffer = function(view)\n"
                        "  for i = 1, 64 do\n"
                        "    local t = {}\n"
                        "    for j = 1, 65536 do t[j] = j end\n"
                        "  end\n"
                        "  local keep = {}\n"
                        "  for _, pod in ipairs(view.running) do keep[#keep + 1] = pod.name end\n"
                        "  return { keep = keep, place = {} }\n"
                        "end }\n";
    memset(&err, 0, sizeof err);
    p = load_src(NULL, NULL, churn, &lim, &err);
    CHECK(p != NULL);
    if (!p) return;
    memset(keep, 0, sizeof keep);
    CHECK(us_policy_reoffer(p, &in, keep, place, &err) == 0);
    size_t all = 0;
    for (int i = 0; i < BIG_NR; i++) all += keep[i];
    CHECK(all == BIG_NR && place[0] == -1);
    us_policy_free(p);

    /* the allowance ends with its call: a score call after the large view
     * (the view of a score call is one pod and one node) that allocates 4 MiB
     * is cut off, where a lingering allowance would let it through */
    const char *quiet = "return { reoffer = function(view) return { keep = {}, place = {} } end }\n";
    const char *hog_score = "return { score = function(pod, node)\n"
                            "  local t = {}\n"
                            "  for i = 1, 100000 do t[i] = string.rep('x', 40) .. i end\n"
                            "  return 1\n"
                            "end }\n";
    memset(&err, 0, sizeof err);
    p = load_src(NULL, hog_score, quiet, &lim, &err);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(us_policy_reoffer(p, &in, keep, place, &err) == 0);
    double score;
    CHECK(score1(p, "w-0", &score, &err) == -1);
    CHECK(err.code == US_EPOLICY && strstr(err.msg, "memory budget exceeded (2097152 bytes)"));
    us_policy_free(p);

    /* The instruction budget grows with the view too, by 64 an item: with
     * 200,000 instructions a call, background.lua decides the same view of
     * 22,001 items (about 20 instructions an item), and a loop that never
     * ends is still cut off, at 200,000 + 64 * 22,001. */
    us_policy_limits few = {200000, 0, 60000};
    memset(&err, 0, sizeof err);
    p = us_policy_load(defaults_dir(), &few, &err);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(us_policy_reoffer(p, &in, keep, place, &err) == 0);
    size_t same = 0;
    for (int i = 0; i < BIG_NR; i++) same += keep[i] == ckeep[i];
    CHECK(same == BIG_NR && place[0] == cplace[0]);
    us_policy_free(p);
    const char *spin = "return { reoffer = function(view) while true do end end }\n";
    memset(&err, 0, sizeof err);
    p = load_src(NULL, NULL, spin, &few, &err);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(us_policy_reoffer(p, &in, keep, place, &err) == -1);
    CHECK(err.code == US_EPOLICY && strstr(err.msg, "instruction budget exceeded (1608064 instructions)"));
    us_policy_free(p);
}

int main(void) {
    RUN(score_calls_that_draw_or_log_are_impure);
    RUN(sandbox_refuses_escapes);
    RUN(sandbox_shared_libraries_read_only_at_load);
    RUN(sandbox_c_loops_guarded);
    RUN(budgets_cut_off_and_state_survives);
    RUN(spent_budget_cannot_be_caught);
    RUN(budgets_default_limits);
    RUN(load_errors);
    RUN(id_dir_and_seed);
    RUN(convert_fairshare);
    RUN(convert_score);
    RUN(convert_reoffer);
    RUN(defaults_fairshare_equal_builtin);
    RUN(defaults_score_equal_builtin);
    RUN(defaults_reoffer_equal_builtin);
    RUN(budgets_make_room_for_the_view);
    return check_report();
}
