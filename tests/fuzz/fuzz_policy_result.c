/*
 * fuzz_policy_result.c — libFuzzer target: the conversion and checking of
 * what policies return (make fuzz; docs/testing.md).
 *
 * One Lua policy set, loaded once, whose three functions return a Lua value
 * decoded from the fuzz input: nil, booleans, integers, floats (NaN, the
 * infinities, -0.0, the integer extremes), the names the view holds,
 * strings, functions, nested lists and tables, tables whose metamethods
 * raise.  The input reaches the policies through the view: as the name of
 * a queue ("f" then the input in hex: fairshare.lua) and as the label
 * `fuzz` of every node (placement.lua, background.lua).  Each input runs
 * two cycles on a small cluster (fair share, placement of AI pods that
 * arrive, eviction and re-offer of background pods) with the invariant
 * checker on: whatever a policy returns, the cycle falls back or uses a
 * result that passed the checks, and never crashes (ASan + UBSan) or breaks
 * an invariant (abort).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cycle.h"
#include "lifecycle.h"
#include "policy.h"
#include "scenario.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Shared by the three files: a Lua value from the bytes of a hex string. */
static const char DECODE[] =
    "local function decode(hex, names)\n"
    "  local s = hex:gsub('%x%x', function(h) return string.char(tonumber(h, 16)) end)\n"
    "  local pos = 0\n"
    "  local function byte() pos = pos + 1; return s:byte(pos) or 0 end\n"
    "  local specials = { 0/0, 1/0, -1/0, 2^53, -2^63, math.maxinteger, math.mininteger,\n"
    "                     1e308, -0.0, 0.5, 1e-300, 2^31, -1 }\n"
    "  local value\n"
    "  local function key(d)\n"
    "    local k = value(d)\n"
    "    if k == nil or k ~= k then return 'k' end\n"
    "    return k\n"
    "  end\n"
    "  function value(d)\n"
    "    local t = byte() % 14\n"
    "    if t == 0 then return nil\n"
    "    elseif t == 1 then return byte() % 2 == 1\n"
    "    elseif t == 2 then return byte() - 100\n"
    "    elseif t == 3 then return (byte() - 128) * 0.37\n"
    "    elseif t == 4 then return specials[byte() % #specials + 1]\n"
    "    elseif t <= 6 then return names[byte() % #names + 1]\n"
    "    elseif t == 7 then local n = byte() % 6; local r = s:sub(pos + 1, pos + n); pos = pos + n; return r\n"
    "    elseif t == 8 then return function() return 1 end\n"
    "    elseif t == 9 and d < 5 then\n"
    "      local r = {}\n"
    "      for i = 1, byte() % 5 do r[i] = value(d + 1) end\n"
    "      return r\n"
    "    elseif t >= 10 and d < 5 then\n"
    "      local r = {}\n"
    "      for _ = 1, byte() % 6 do r[key(d + 1)] = value(d + 1) end\n"
    "      if t == 13 then\n"
    "        setmetatable(r, { __index = function() error('index') end,\n"
    "                          __len = function() error('len') end,\n"
    "                          __pairs = function() error('pairs') end })\n"
    "      end\n"
    "      return r\n"
    "    end\n"
    "    return 0\n"
    "  end\n"
    "  return value(0)\n"
    "end\n";

static const char FAIRSHARE[] =
    "return { compute = function(view)\n"
    "  local hex, names = '', { 'gpu', 'cpu', 'memory' }\n"
    "  for _, q in ipairs(view.queues) do\n"
    "    names[#names + 1] = q.name\n"
    "    if q.name:sub(1, 1) == 'f' then hex = q.name:sub(2) end\n"
    "  end\n"
    "  return decode(hex, names)\n"
    "end }\n";

static const char PLACEMENT[] =
    "return { score = function(pod, node)\n"
    "  return decode(node.labels.fuzz or '', { pod.name, node.name })\n"
    "end }\n";

static const char BACKGROUND[] =
    "return { reoffer = function(view)\n"
    "  local names, hex = { 'keep', 'place' }, ''\n"
    "  for _, n in ipairs(view.nodes) do names[#names + 1] = n.name; hex = n.labels.fuzz or hex end\n"
    "  for _, p in ipairs(view.running) do names[#names + 1] = p.name end\n"
    "  for _, p in ipairs(view.pending) do names[#names + 1] = p.name end\n"
    "  return decode(hex, names)\n"
    "end }\n";

/* Two nodes, a queue tree whose leaf "f" is renamed per input, AI work
 * arriving at t=10, background work already running. */
static const char CLUSTER[] =
    "{\"name\": \"fuzz\", \"nodes\": ["
    " {\"name\": \"n1\", \"gpu\": 8, \"cpu\": \"64\", \"memory\": \"256Gi\", \"labels\": {\"fuzz\": \"\"}},"
    " {\"name\": \"n2\", \"gpu\": 8, \"cpu\": \"64\", \"memory\": \"256Gi\", \"labels\": {\"fuzz\": \"\"}}],"
    " \"queues\": ["
    " {\"name\": \"org\", \"resources\": {\"gpu\": {\"quota\": 8}}},"
    " {\"name\": \"f\", \"parent\": \"org\", \"resources\": {\"gpu\": {\"quota\": 4, \"limit\": 12}}},"
    " {\"name\": \"team\", \"parent\": \"org\", \"resources\": {\"gpu\": {\"quota\": 4}}},"
    " {\"name\": \"bg\", \"resources\": {\"gpu\": {\"quota\": 0, \"over_quota_weight\": 0},"
    "   \"cpu\": {\"quota\": 0, \"over_quota_weight\": 0}, \"memory\": {\"quota\": 0, \"over_quota_weight\": 0}}}],"
    " \"workloads\": ["
    " {\"name\": \"burn\", \"queue\": \"bg\", \"replicas\": 12, \"termination_grace\": 5,"
    "  \"labels\": {\"kai.scheduler/background\": \"true\"}, \"requests\": {\"gpu\": 1, \"cpu\": \"1\", \"memory\": \"1Gi\"}},"
    " {\"name\": \"a\", \"queue\": \"f\", \"submit_at\": 10, \"replicas\": 2, \"requests\": {\"gpu\": 2, \"cpu\": \"2\", \"memory\": \"2Gi\"}},"
    " {\"name\": \"b\", \"queue\": \"team\", \"submit_at\": 10, \"replicas\": 3, \"requests\": {\"gpu\": 1, \"cpu\": \"1\", \"memory\": \"1Gi\"}}]}";

static us_scenario cluster;  /* after its first cycle at t=0 */
static us_policy *pol;

static void die(const char *what, const char *msg) {
    fprintf(stderr, "fuzz_policy_result: %s: %s\n", what, msg);
    abort();
}

static void write_file(const char *dir, const char *name, const char *body) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(DECODE, f) < 0 || fputs(body, f) < 0 || fclose(f) != 0) die(path, "cannot write");
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    char dir[] = "/tmp/understory-fuzz-XXXXXX";
    us_err err = {0};
    us_cycle_opts o;
    us_cycle_log log;
    bool any = false;
    /* the time limit is not what is fuzzed: a loaded machine must not cut */
    us_policy_limits lim = {1000000, (size_t)32 << 20, 60000};
    (void)argc, (void)argv;
    if (!mkdtemp(dir)) die("mkdtemp", "failed");
    write_file(dir, "fairshare.lua", FAIRSHARE);
    write_file(dir, "placement.lua", PLACEMENT);
    write_file(dir, "background.lua", BACKGROUND);
    if (!(pol = us_policy_load(dir, &lim, &err))) die("policies", err.msg);
    for (int m = 0; m < US_POLICY_NFN; m++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, us_policy_files[m]);
        unlink(path);
    }
    rmdir(dir);
    if (us_scenario_load_string(&cluster, CLUSTER, strlen(CLUSTER), NULL, &err) < 0) die("cluster", err.msg);
    if (us_life_submit_due(&cluster.state, 0, &any) < 0) die("submit", "out of memory");
    us_cycle_opts_default(&o);
    us_cycle_log_init(&log);
    if (us_cycle_run(&cluster.state, NULL, 0, &o, &log, NULL, NULL, &err) < 0) die("first cycle", err.msg);
    us_cycle_log_free(&log);
    return 0;
}

/* Put the input, in hex, where the policies read it. */
static int plant(us_state *st, const uint8_t *data, size_t size) {
    char *hex = malloc(2 * size + 2), *qname;
    if (!hex) return -1;
    for (size_t i = 0; i < size; i++) snprintf(hex + 2 * i, 3, "%02x", data[i]);
    hex[2 * size] = '\0';
    for (size_t n = 0; n < st->nnodes; n++)
        for (size_t k = 0; k < st->nodes[n].labels.n; k++) {
            us_kv *kv = &st->nodes[n].labels.items[k];
            if (strcmp(kv->key, "fuzz") != 0) continue;
            char *v = strdup(hex);
            if (!v) goto fail;
            free(kv->value);
            kv->value = v;
        }
    for (size_t q = 0; q < st->nqueues; q++) {
        if (strcmp(st->queues[q].name, "f") != 0) continue;
        if (!(qname = malloc(2 * size + 2))) goto fail;
        snprintf(qname, 2 * size + 2, "f%s", hex);
        free(st->queues[q].name);
        st->queues[q].name = qname;
    }
    free(hex);
    return 0;
fail:
    free(hex);
    return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    us_state st;
    us_err err = {0};
    us_cycle_opts o;
    bool any = false;
    if (us_state_clone(&st, &cluster.state) < 0) return 0;
    us_cycle_opts_default(&o);
    o.check_invariants = true;
    if (plant(&st, data, size) == 0 && us_life_submit_due(&st, 10, &any) == 0) {
        for (int k = 0; k < 2; k++) {
            us_cycle_log log;
            us_cycle_log_init(&log);
            us_policy_seed(pol, (uint64_t)k + 1);
            if (us_cycle_run(&st, pol, 10.0 + 10.0 * k, &o, &log, NULL, NULL, &err) < 0 &&
                err.code != US_ENOMEM)
                die("cycle", err.msg);
            us_cycle_log_free(&log);
        }
    }
    us_state_free(&st);
    return 0;
}
