/*
 * lua_understory.c — the Lua 5.4 module `understory` (require "understory"):
 * the simulator and the embeddable engine for Lua programs.
 *
 *   local understory = require "understory"
 *   local out = understory.simulate(scenario, opts)
 *   local e = understory.engine(opts)       -- see "engine" below
 *   print(understory.version)
 *
 * scenario: a file path; a JSON document (a string whose first non-blank
 * character is '{'); or a Lua table shaped like the JSON document (a table
 * whose keys are exactly 1..n is an array, any other table — including an
 * empty one — an object; object keys must be strings).
 *
 * opts (all optional):
 *   policies      directory holding fairshare.lua, placement.lua and
 *                 background.lua; default: the environment variable
 *                 UNDERSTORY_POLICIES, else the built-in C policies
 *   plain_ties    true: AI pods stay where placement put them, ties by
 *                 node name (default false: background-aware ties)
 *   long_grace    seconds of termination grace above which a background pod
 *                 draws a warning (default 30)
 *   instructions  Lua instructions a policy call may run
 *   memory        Lua heap a policy may use: bytes, or a quantity ("64Mi")
 *   check_invariants  true: check the engine's invariants after every cycle
 *                 (docs/scheduling.md); a violation raises an error naming
 *                 the invariant, the cycle and the objects
 *   time_limit    wall-clock milliseconds a policy call may take (500)
 *   cycle_budget  wall-clock seconds a whole cycle's policy calls may run to;
 *                 past it the rest of the cycle uses the built-in policies,
 *                 with a PolicyFailed warning (5)
 *   full_cycles   true: every cycle recomputes everything instead of reusing
 *                 what the last one left (decides the same; for tests and
 *                 measuring)
 *   reported_pods understory.engine only; true: pods exist once reported,
 *                 and the engine places none its controllers made that no
 *                 report has claimed (us_engine_options.reported_pods)
 *
 * Returns the output document of docs/scenario.md as a Lua table: objects become
 * tables, arrays 1-based sequences, and JSON null is left out (a pod with no
 * node has no `node` field).  Any failure raises a Lua error with the
 * engine's message (`workloads[3].queue: "team-z" is not a queue`); errors
 * about the Lua table itself name its path Lua's way (`workloads[4].name`).
 *
 * understory.engine(opts) returns an engine object over the embedding API
 * (bindings/understory.h; docs/embedding.md has the walk-through).  opts
 * are simulate's.  Methods take tables shaped like the scenario format's
 * objects (or the same as JSON text) and return plain tables:
 *   e:upsert_node(t)  e:remove_node(name)  e:upsert_queue(t)
 *   e:remove_queue(name)  e:upsert_workload(t [, now])
 *   e:remove_workload(name [, now])  e:complete_workload(name [, now])
 *   e:upsert_pod{name=, workload=, node=, pin=, state=}  e:remove_pod(name)
 *   e:load_policies(dir or nil)  e:reload_policies(dir)  e:policy_id()
 *   e:run_cycle(now) -> {decisions = {...}, events = {...}, log = {...},
 *                        log_dropped = n}
 *   e:pods()  e:nodes()  e:queues()  e:workloads()  e:time()
 *   e:cycle_count()  e:gpu_use()  e:cycle_phases()  e:cycle_reuse()
 *   e:state_json()
 *   e:on_event(fn or nil)  e:close()   (also __gc and __close)
 * now defaults to the engine's time.  Decisions and events have the
 * simulator output's shapes (plus `workload` on decisions).  Errors are Lua
 * errors carrying the engine's message (`workload.queue: "x" is not a
 * queue`).  understory.json_decode(text) and understory.json_encode(value)
 * convert between JSON and the same tables.
 *
 * Owns only the conversion between Lua values and the engine.  It must never
 * leak on a Lua error: everything it allocates hangs off one userdata whose
 * __gc frees it, so an error raised at any point leaves nothing behind.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <lauxlib.h>
#include <lua.h>

#include "output.h"
#include "policy.h"
#include "scenario.h"
#include "sim.h"
#include "understory.h"

#define JOB_MT "understory.job"
#define MAX_DEPTH 64

/* Everything one simulate call owns. */
typedef struct job {
    cJSON *in;          /* a scenario given as a table, as JSON */
    char *text;         /* its printed form */
    us_scenario sc;
    bool loaded;
    us_policy *pol;
    us_sim_result res;
    bool ran;
    cJSON *out;
} job;

static void job_release(job *j) {
    cJSON_Delete(j->out);
    if (j->ran) us_sim_result_free(&j->res);
    if (j->pol) us_policy_free(j->pol);
    if (j->loaded) us_scenario_free(&j->sc);
    free(j->text);
    cJSON_Delete(j->in);
    memset(j, 0, sizeof *j);
}

static int job_gc(lua_State *L) {
    job_release(luaL_checkudata(L, 1, JOB_MT));
    return 0;
}

/* ---- Lua table -> JSON ----------------------------------------------------- */

/* Where the conversion is in the table, for messages: workloads[4].name */
typedef struct walk {
    char path[512];
    size_t len;
} walk;

static size_t path_push(walk *w, const char *key, lua_Integer index) {
    size_t old = w->len;
    int n = key ? snprintf(w->path + old, sizeof w->path - old, "%s%s", old ? "." : "", key)
                : snprintf(w->path + old, sizeof w->path - old, "[%lld]", (long long)index);
    if (n > 0) w->len = old + (size_t)n < sizeof w->path ? old + (size_t)n : sizeof w->path - 1;
    return old;
}

static void path_pop(walk *w, size_t old) {
    w->len = old;
    w->path[old] = '\0';
}

static int conv_error(lua_State *L, const walk *w, const char *what) {
    return luaL_error(L, "%s: %s", w->len ? w->path : "scenario", what);
}

static void fill(lua_State *L, int idx, cJSON *into, walk *w, int depth);

/* Attach item to parent (under key, or appended when key is NULL). */
static void attach(lua_State *L, cJSON *parent, const char *key, cJSON *item) {
    bool ok = item && (key ? cJSON_AddItemToObject(parent, key, item)
                           : cJSON_AddItemToArray(parent, item));
    if (!ok) {
        cJSON_Delete(item);
        luaL_error(L, "out of memory");
    }
}

/* Convert the value at idx and attach it.  Containers are attached before
 * they are filled, so an error half-way leaves them reachable from the root
 * (and freed with it). */
static void add_value(lua_State *L, int idx, cJSON *parent, const char *key, walk *w, int depth) {
    size_t len;
    const char *s;
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN:
        attach(L, parent, key, cJSON_CreateBool(lua_toboolean(L, idx)));
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            attach(L, parent, key, cJSON_CreateNumber((double)lua_tointeger(L, idx)));
        } else {
            double d = lua_tonumber(L, idx);
            if (!isfinite(d)) conv_error(L, w, "a number that is not finite");
            attach(L, parent, key, cJSON_CreateNumber(d));
        }
        break;
    case LUA_TSTRING:
        s = lua_tolstring(L, idx, &len);
        if (strlen(s) != len) conv_error(L, w, "a string with a zero byte");
        attach(L, parent, key, cJSON_CreateString(s));
        break;
    case LUA_TTABLE: {
        cJSON *c = lua_rawlen(L, idx) > 0 ? cJSON_CreateArray() : cJSON_CreateObject();
        attach(L, parent, key, c);
        fill(L, idx, c, w, depth + 1);
        break;
    }
    default:
        lua_pushfstring(L, "a %s cannot be converted to JSON", luaL_typename(L, idx));
        conv_error(L, w, lua_tostring(L, -1));
    }
}

static int cmp_keys(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Fill container `into` (already created as array or object by the length
 * of the table at idx) from that table.  Object keys go in sorted order, so
 * the JSON does not depend on Lua's hash order. */
static void fill(lua_State *L, int idx, cJSON *into, walk *w, int depth) {
    idx = lua_absindex(L, idx);
    if (depth > MAX_DEPTH) conv_error(L, w, "nested too deeply (a table that contains itself?)");
    luaL_checkstack(L, 4, "scenario table");
    size_t count = 0, n = lua_rawlen(L, idx);
    bool seq = true;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        count++;
        if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) < 1 ||
            (size_t)lua_tointeger(L, -2) > n)
            seq = false;
        lua_pop(L, 1);
    }
    if (cJSON_IsArray(into)) {
        if (!seq || count != n) conv_error(L, w, "a table mixing array items and other keys");
        for (size_t i = 1; i <= n; i++) {
            size_t old = path_push(w, NULL, (lua_Integer)i);
            lua_rawgeti(L, idx, (lua_Integer)i);
            add_value(L, -1, into, NULL, w, depth);
            lua_pop(L, 1);
            path_pop(w, old);
        }
        return;
    }
    /* The key array is a userdata, so the collector frees it on error. */
    const char **keys = lua_newuserdatauv(L, (count ? count : 1) * sizeof *keys, 0);
    size_t k = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_pushfstring(L, "object keys must be strings (found a %s key)",
                            luaL_typename(L, -1));
            conv_error(L, w, lua_tostring(L, -1));
        }
        size_t len;
        keys[k] = lua_tolstring(L, -1, &len); /* alive: it is a key of the table */
        if (strlen(keys[k]) != len) conv_error(L, w, "a key with a zero byte");
        k++;
    }
    qsort(keys, k, sizeof *keys, cmp_keys);
    for (size_t i = 0; i < k; i++) {
        size_t old = path_push(w, keys[i], 0);
        lua_pushstring(L, keys[i]);
        lua_rawget(L, idx);
        add_value(L, -1, into, keys[i], w, depth);
        lua_pop(L, 1);
        path_pop(w, old);
    }
    lua_pop(L, 1); /* keys */
}

/* ---- JSON -> Lua ------------------------------------------------------------ */

static void push_number(lua_State *L, double d) {
    /* Integral values within range become Lua integers: counts, bytes. */
    if (d == floor(d) && d >= -9.2e18 && d <= 9.2e18)
        lua_pushinteger(L, (lua_Integer)d);
    else
        lua_pushnumber(L, d);
}

/* Push v; returns false (pushing nothing) for JSON null. */
static bool push_json(lua_State *L, const cJSON *v, int depth) {
    luaL_checkstack(L, 3, "output document");
    if (depth > MAX_DEPTH) luaL_error(L, "output document nested too deeply");
    if (cJSON_IsNull(v) || cJSON_IsInvalid(v)) return false;
    if (cJSON_IsBool(v)) {
        lua_pushboolean(L, cJSON_IsTrue(v));
    } else if (cJSON_IsNumber(v)) {
        push_number(L, v->valuedouble);
    } else if (cJSON_IsRaw(v)) {
        /* large integers are raw text (see us_output_res) */
        char *end;
        long long i = strtoll(v->valuestring, &end, 10);
        if (*end == '\0' && end != v->valuestring)
            lua_pushinteger(L, (lua_Integer)i);
        else
            lua_pushstring(L, v->valuestring);
    } else if (cJSON_IsString(v)) {
        lua_pushstring(L, v->valuestring);
    } else if (cJSON_IsArray(v)) {
        lua_createtable(L, cJSON_GetArraySize(v), 0);
        lua_Integer i = 0;
        for (const cJSON *c = v->child; c; c = c->next) {
            i++;
            if (push_json(L, c, depth + 1)) lua_rawseti(L, -2, i);
        }
    } else {
        lua_createtable(L, 0, cJSON_GetArraySize(v));
        for (const cJSON *c = v->child; c; c = c->next)
            if (push_json(L, c, depth + 1)) lua_setfield(L, -2, c->string);
    }
    return true;
}

/* ---- simulate ---------------------------------------------------------------- */

static const char *const opt_names[] = {"policies", "plain_ties", "long_grace", "instructions",
                                        "memory", "check_invariants", "time_limit", "cycle_budget",
                                        "full_cycles", "reported_pods", NULL};

/* Reads opts (stack index idx) into o; returns the policies directory or
 * NULL.  The directory string stays on the stack, so it outlives the call. */
static const char *read_opts(lua_State *L, int idx, us_sim_opts *o) {
    const char *dir = NULL;
    if (lua_isnoneornil(L, idx)) goto defaults;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        bool known = false;
        for (int i = 0; k && opt_names[i]; i++) known |= strcmp(k, opt_names[i]) == 0;
        if (!known)
            luaL_error(L, "opts.%s: unknown option (known: policies, plain_ties, long_grace, "
                          "instructions, memory, check_invariants, time_limit, cycle_budget, "
                          "full_cycles, reported_pods)",
                       k ? k : luaL_typename(L, -1));
    }

    lua_getfield(L, idx, "plain_ties");
    if (!lua_isnil(L, -1)) {
        if (!lua_isboolean(L, -1)) luaL_error(L, "opts.plain_ties: expected a boolean");
        o->cycle.background_aware_ties = !lua_toboolean(L, -1);
    }
    lua_pop(L, 1);

    lua_getfield(L, idx, "check_invariants");
    if (!lua_isnil(L, -1)) {
        if (!lua_isboolean(L, -1)) luaL_error(L, "opts.check_invariants: expected a boolean");
        o->cycle.check_invariants = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);

    lua_getfield(L, idx, "full_cycles");
    if (!lua_isnil(L, -1)) {
        if (!lua_isboolean(L, -1)) luaL_error(L, "opts.full_cycles: expected a boolean");
        o->cycle.full_cycles = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);

    lua_getfield(L, idx, "reported_pods");
    if (!lua_isnil(L, -1)) {
        if (!lua_isboolean(L, -1)) luaL_error(L, "opts.reported_pods: expected a boolean");
        o->cycle.reported_pods = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);

    lua_getfield(L, idx, "long_grace");
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER || !(lua_tonumber(L, -1) >= 0) ||
            !isfinite(lua_tonumber(L, -1)))
            luaL_error(L, "opts.long_grace: expected a number of seconds >= 0");
        o->cycle.long_grace = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);

    lua_getfield(L, idx, "instructions");
    if (!lua_isnil(L, -1)) {
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) <= 0)
            luaL_error(L, "opts.instructions: expected a positive integer");
        o->limits.instructions = (uint64_t)lua_tointeger(L, -1);
    }
    lua_pop(L, 1);

    lua_getfield(L, idx, "cycle_budget");
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER || !(lua_tonumber(L, -1) > 0) ||
            !isfinite(lua_tonumber(L, -1)))
            luaL_error(L, "opts.cycle_budget: expected a positive number of seconds");
        o->cycle.cycle_budget = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);

    lua_getfield(L, idx, "time_limit");
    if (!lua_isnil(L, -1)) {
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) <= 0)
            luaL_error(L, "opts.time_limit: expected a positive number of milliseconds");
        o->limits.time_ms = (unsigned long)lua_tointeger(L, -1);
    }
    lua_pop(L, 1);

    lua_getfield(L, idx, "memory");
    if (!lua_isnil(L, -1)) {
        int64_t bytes = -1;
        int isint = 0;
        lua_Integer v = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
        if (isint)
            bytes = v;
        else if (lua_type(L, -1) == LUA_TSTRING && us_parse_memory(lua_tostring(L, -1), &bytes) < 0)
            bytes = -1;
        if (bytes <= 0) luaL_error(L, "opts.memory: expected bytes or a quantity such as \"64Mi\"");
        o->limits.memory = (size_t)bytes;
    }
    lua_pop(L, 1);

    lua_getfield(L, idx, "policies"); /* left on the stack: dir points into it */
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "opts.policies: expected a directory");
        dir = lua_tostring(L, -1);
    }
defaults:
    if (!dir) {
        const char *env = getenv("UNDERSTORY_POLICIES");
        if (env && *env) dir = env;
    }
    return dir;
}

static void load_scenario(lua_State *L, job *j) {
    us_err err = {0};
    if (lua_type(L, 1) == LUA_TTABLE) {
        walk w = {{0}, 0};
        j->in = lua_rawlen(L, 1) > 0 ? cJSON_CreateArray() : cJSON_CreateObject();
        if (!j->in) luaL_error(L, "out of memory");
        fill(L, 1, j->in, &w, 0);
        if (!(j->text = cJSON_PrintUnformatted(j->in))) luaL_error(L, "out of memory");
        if (us_scenario_load_string(&j->sc, j->text, strlen(j->text), NULL, &err) < 0)
            luaL_error(L, "%s", err.msg);
    } else {
        size_t len;
        const char *s = luaL_checklstring(L, 1, &len), *p = s;
        while (isspace((unsigned char)*p)) p++;
        if (*p == '{') {
            if (us_scenario_load_string(&j->sc, s, len, NULL, &err) < 0)
                luaL_error(L, "%s", err.msg);
        } else if (us_scenario_load_file(&j->sc, s, &err) < 0) {
            if (err.code == US_EIO) luaL_error(L, "%s", err.msg); /* names the file */
            luaL_error(L, "%s: %s", s, err.msg);
        }
    }
    j->loaded = true;
}

/* understory.simulate(scenario [, opts]) -> output document */
static int l_simulate(lua_State *L) {
    us_err err = {0};
    us_sim_opts o;
    luaL_argexpected(L, lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TTABLE, 1,
                     "file path, JSON string or table");
    us_sim_opts_default(&o);
    const char *dir = read_opts(L, 2, &o);
    /* the simulator's controllers name and create every pod themselves */
    if (o.cycle.reported_pods)
        luaL_error(L, "opts.reported_pods: only for understory.engine (a simulation reports no pods)");

    job *j = lua_newuserdatauv(L, sizeof *j, 0);
    memset(j, 0, sizeof *j);
    luaL_setmetatable(L, JOB_MT);

    load_scenario(L, j);
    if (dir && !(j->pol = us_policy_load(dir, &o.limits, &err)))
        luaL_error(L, "policies %s: %s", dir, err.msg);
    o.policy_dir = dir;
    j->ran = true;
    if (us_sim_run(&j->sc, j->pol, &o, &j->res, &err) < 0)
        luaL_error(L, "simulation failed: %s", err.msg);
    if (!(j->out = us_output_document(&j->res, &j->sc.state))) luaL_error(L, "out of memory");
    push_json(L, j->out, 0);
    job_release(j); /* now, rather than at the next collection */
    return 1;
}

/* ---- JSON helpers ----------------------------------------------------------- */

/* A Lua value at idx as JSON text; what names it in messages.  A table's
 * text hangs off a job userdata pushed on the stack and returned in *jp:
 * the caller releases it once done, or its __gc does after an error. */
static const char *to_json(lua_State *L, int idx, const char *what, job **jp) {
    size_t len;
    *jp = NULL;
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) == LUA_TSTRING) { /* JSON already */
        const char *s = lua_tolstring(L, idx, &len);
        if (strlen(s) != len) luaL_error(L, "%s: JSON text with a NUL byte", what);
        return s;
    }
    if (lua_type(L, idx) != LUA_TTABLE) luaL_error(L, "%s: expected a table or JSON text", what);
    job *j = *jp = lua_newuserdatauv(L, sizeof *j, 0);
    memset(j, 0, sizeof *j);
    luaL_setmetatable(L, JOB_MT);
    walk w = {{0}, 0};
    path_push(&w, what, 0);
    if (!(j->in = lua_rawlen(L, idx) > 0 ? cJSON_CreateArray() : cJSON_CreateObject()))
        luaL_error(L, "out of memory");
    fill(L, idx, j->in, &w, 0);
    if (!(j->text = cJSON_PrintUnformatted(j->in))) luaL_error(L, "out of memory");
    return j->text;
}

/* understory.json_decode(text) -> value */
static int l_json_decode(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len), *end = NULL;
    job *j = lua_newuserdatauv(L, sizeof *j, 0);
    memset(j, 0, sizeof *j);
    luaL_setmetatable(L, JOB_MT);
    if (strlen(s) != len) luaL_error(L, "invalid JSON: a NUL byte");
    if (!(j->out = cJSON_ParseWithOpts(s, &end, 1))) {
        int line = 1, col = 1;
        for (const char *p = s; end && p < end && *p; p++) {
            if (*p == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        luaL_error(L, "invalid JSON at line %d, column %d", line, col);
    }
    if (!push_json(L, j->out, 0)) lua_pushnil(L);
    return 1;
}

/* understory.json_encode(value) -> text (object keys sorted) */
static int l_json_encode(lua_State *L) {
    luaL_checkany(L, 1);
    job *j = lua_newuserdatauv(L, sizeof *j, 0);
    memset(j, 0, sizeof *j);
    luaL_setmetatable(L, JOB_MT);
    walk w = {{0}, 0};
    path_push(&w, "value", 0);
    if (!(j->in = cJSON_CreateArray())) luaL_error(L, "out of memory");
    add_value(L, 1, j->in, NULL, &w, 0);
    if (!(j->text = cJSON_PrintUnformatted(j->in->child))) luaL_error(L, "out of memory");
    lua_pushstring(L, j->text);
    return 1;
}

/* ---- the engine object --------------------------------------------------------
 * A full userdata holding the handle; its user value 1 is the on_event
 * function.  Everything the engine owns is freed by us_engine_destroy, from
 * close, __close or __gc, whichever comes first. */

#define ENGINE_MT "understory.engine"

typedef struct lengine {
    us_engine *e;
} lengine;

static us_engine *check_engine(lua_State *L) {
    lengine *le = luaL_checkudata(L, 1, ENGINE_MT);
    if (!le->e) luaL_error(L, "understory engine: used after close");
    return le->e;
}

/* Raise the engine's error as a Lua error. */
static int check(lua_State *L, int rc, const us_error *err) {
    if (rc != US_OK) luaL_error(L, "%s", err->message);
    return 0;
}

static double opt_now(lua_State *L, int idx, us_engine *e) {
    return luaL_optnumber(L, idx, us_engine_time(e));
}

/* understory.engine([opts]) -> engine */
static int l_engine(lua_State *L) {
    us_sim_opts so;
    us_engine_options o;
    us_error err;
    us_sim_opts_default(&so);
    const char *dir = read_opts(L, 1, &so);
    us_engine_options_init(&o);
    o.policies = dir;
    o.plain_ties = !so.cycle.background_aware_ties;
    o.long_grace = so.cycle.long_grace;
    o.check_invariants = so.cycle.check_invariants;
    o.instructions = so.limits.instructions;
    o.memory = so.limits.memory;
    o.time_limit_ms = so.limits.time_ms;
    o.cycle_budget = so.cycle.cycle_budget;
    o.full_cycles = so.cycle.full_cycles;
    o.reported_pods = so.cycle.reported_pods;
    lengine *le = lua_newuserdatauv(L, sizeof *le, 1);
    le->e = NULL;
    luaL_setmetatable(L, ENGINE_MT);
    check(L, us_engine_create(&o, &le->e, &err), &err);
    return 1;
}

static int l_close(lua_State *L) {
    lengine *le = luaL_checkudata(L, 1, ENGINE_MT);
    us_engine_destroy(le->e);
    le->e = NULL;
    return 0;
}

static int l_tostring(lua_State *L) {
    lengine *le = luaL_checkudata(L, 1, ENGINE_MT);
    if (!le->e) lua_pushliteral(L, "understory.engine (closed)");
    else
        lua_pushfstring(L, "understory.engine (t=%f, %d cycles)", us_engine_time(le->e),
                        (int)us_engine_cycle_count(le->e));
    return 1;
}

typedef int (*json_fn)(us_engine *, const char *, us_error *);

static int upsert(lua_State *L, json_fn fn, const char *what) {
    us_engine *e = check_engine(L);
    us_error err;
    job *j;
    const char *text = to_json(L, 2, what, &j);
    int rc = fn(e, text, &err);
    if (j) job_release(j); /* now, rather than at the next collection */
    return check(L, rc, &err);
}

static int l_upsert_node(lua_State *L) { return upsert(L, us_engine_upsert_node_json, "node"); }
static int l_upsert_queue(lua_State *L) { return upsert(L, us_engine_upsert_queue_json, "queue"); }
static int l_upsert_pod(lua_State *L) { return upsert(L, us_engine_upsert_pod_json, "pod"); }

static int l_upsert_workload(lua_State *L) {
    us_engine *e = check_engine(L);
    us_error err;
    double now = opt_now(L, 3, e);
    job *j;
    const char *text = to_json(L, 2, "workload", &j);
    int rc = us_engine_upsert_workload_json(e, text, now, &err);
    if (j) job_release(j);
    return check(L, rc, &err);
}

typedef int (*name_fn)(us_engine *, const char *, us_error *);
typedef int (*name_now_fn)(us_engine *, const char *, double, us_error *);

static int by_name(lua_State *L, name_fn fn) {
    us_engine *e = check_engine(L);
    us_error err;
    return check(L, fn(e, luaL_checkstring(L, 2), &err), &err);
}

static int by_name_now(lua_State *L, name_now_fn fn) {
    us_engine *e = check_engine(L);
    us_error err;
    return check(L, fn(e, luaL_checkstring(L, 2), opt_now(L, 3, e), &err), &err);
}

static int l_remove_node(lua_State *L) { return by_name(L, us_engine_remove_node); }
static int l_remove_queue(lua_State *L) { return by_name(L, us_engine_remove_queue); }
static int l_remove_pod(lua_State *L) { return by_name(L, us_engine_remove_pod); }
static int l_reload_policies(lua_State *L) { return by_name(L, us_engine_reload_policies); }
static int l_remove_workload(lua_State *L) { return by_name_now(L, us_engine_remove_workload); }
static int l_complete_workload(lua_State *L) { return by_name_now(L, us_engine_complete_workload); }

static int l_load_policies(lua_State *L) {
    us_engine *e = check_engine(L);
    us_error err;
    return check(L, us_engine_load_policies(e, luaL_optstring(L, 2, NULL), &err), &err);
}

static int l_policy_id(lua_State *L) {
    lua_pushstring(L, us_engine_policy_id(check_engine(L)));
    return 1;
}

static int l_time(lua_State *L) {
    lua_pushnumber(L, us_engine_time(check_engine(L)));
    return 1;
}

static int l_cycle_count(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)us_engine_cycle_count(check_engine(L)));
    return 1;
}

/* A text the library handed out, freed with us_free by close or __gc. */
#define TEXT_MT "understory.text"

static int text_gc(lua_State *L) {
    char **t = luaL_checkudata(L, 1, TEXT_MT);
    us_free(*t);
    *t = NULL;
    return 0;
}

/* e:state_json() -> the state as a scenario document (JSON text).  The
 * library's text hangs off a userdata until copied, so a Lua error while
 * copying (out of memory) does not leak it. */
static int l_state_json(lua_State *L) {
    us_engine *e = check_engine(L);
    us_error err;
    size_t len = 0;
    char **t = lua_newuserdatauv(L, sizeof *t, 0);
    *t = NULL;
    luaL_setmetatable(L, TEXT_MT);
    check(L, us_engine_state_json(e, t, &len, &err), &err);
    lua_pushlstring(L, *t, len);
    us_free(*t); /* now, rather than at the next collection */
    *t = NULL;
    return 1;
}

/* e:gpu_use() -> {capacity=, ai=, background=, external=, idle=} */
static int l_gpu_use(lua_State *L) {
    us_engine *e = check_engine(L);
    us_gpu_use g;
    if (us_engine_gpu_use(e, &g) != US_OK) luaL_error(L, "gpu_use: failed");
    lua_createtable(L, 0, 5);
    push_number(L, g.capacity);
    lua_setfield(L, -2, "capacity");
    push_number(L, g.ai);
    lua_setfield(L, -2, "ai");
    push_number(L, g.background);
    lua_setfield(L, -2, "background");
    push_number(L, g.external);
    lua_setfield(L, -2, "external");
    push_number(L, g.idle);
    lua_setfield(L, -2, "idle");
    return 1;
}

/* e:cycle_phases() -> {{name=, seconds=}, ...}: the last cycle's phases in
 * the engine's order (all 0 before the first cycle). */
static int l_cycle_phases(lua_State *L) {
    us_engine *e = check_engine(L);
    size_t n = us_engine_cycle_phase_count(e);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        us_cycle_phase_info ph;
        if (us_engine_cycle_phase(e, i, &ph) != US_OK) luaL_error(L, "cycle_phases: phase %d", (int)i);
        lua_createtable(L, 0, 2);
        lua_pushstring(L, ph.name);
        lua_setfield(L, -2, "name");
        lua_pushnumber(L, ph.seconds);
        lua_setfield(L, -2, "seconds");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* e:cycle_reuse() -> {policy_calls=, nodes_classed=, nodes_class_kept=,
 * scores_kept=}: what the last cycle reused from the one before (all 0
 * before the first cycle). */
static int l_cycle_reuse(lua_State *L) {
    us_engine *e = check_engine(L);
    us_cycle_reuse r;
    if (us_engine_cycle_reuse(e, &r) != US_OK) luaL_error(L, "cycle_reuse: no engine");
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, (lua_Integer)r.policy_calls);
    lua_setfield(L, -2, "policy_calls");
    lua_pushinteger(L, (lua_Integer)r.nodes_classed);
    lua_setfield(L, -2, "nodes_classed");
    lua_pushinteger(L, (lua_Integer)r.nodes_class_kept);
    lua_setfield(L, -2, "nodes_class_kept");
    lua_pushinteger(L, (lua_Integer)r.scores_kept);
    lua_setfield(L, -2, "scores_kept");
    return 1;
}

/* t[key] = s, when s is not NULL. */
static void set_str(lua_State *L, const char *key, const char *s) {
    if (!s) return;
    lua_pushstring(L, s);
    lua_setfield(L, -2, key);
}

static void set_res(lua_State *L, const char *key, us_resources r) {
    lua_createtable(L, 0, 3);
    push_number(L, r.gpu);
    lua_setfield(L, -2, "gpu");
    lua_pushinteger(L, (lua_Integer)r.cpu);
    lua_setfield(L, -2, "cpu");
    lua_pushinteger(L, (lua_Integer)r.memory);
    lua_setfield(L, -2, "memory");
    lua_setfield(L, -2, key);
}

static void push_event(lua_State *L, const us_event_info *ev) {
    lua_createtable(L, 0, 5);
    set_str(L, "type", ev->type);
    set_str(L, "reason", ev->reason);
    set_str(L, "object", ev->object);
    set_str(L, "message", ev->message);
    if (ev->nannotations) {
        lua_createtable(L, 0, (int)ev->nannotations);
        for (size_t k = 0; k < ev->nannotations; k++) set_str(L, ev->annotations[k].key, ev->annotations[k].value);
        lua_setfield(L, -2, "annotations");
    }
}

/* e:run_cycle(now) -> {decisions = {...}, events = {...}, log = {{file,
 * line, message}, ...}}; then the
 * on_event function, if any, once per event. */
static int l_run_cycle(lua_State *L) {
    us_engine *e = check_engine(L);
    us_error err;
    check(L, us_engine_run_cycle(e, luaL_checknumber(L, 2), &err), &err);
    size_t nd = us_engine_decision_count(e), ne = us_engine_event_count(e);
    luaL_checkstack(L, 8, "run_cycle");
    lua_createtable(L, 0, 4);
    lua_createtable(L, (int)nd, 0);
    for (size_t i = 0; i < nd; i++) {
        us_decision_info d;
        us_engine_decision(e, i, &d);
        lua_createtable(L, 0, 7);
        set_str(L, "op", d.op_name);
        set_str(L, "pod", d.pod);
        set_str(L, "workload", d.workload);
        set_str(L, "node", d.node);
        set_str(L, "action", d.action);
        set_str(L, "evictor", d.evictor);
        if (d.op == US_DECISION_PIPELINE) {
            lua_createtable(L, (int)d.nwaits_for, 0);
            for (size_t k = 0; k < d.nwaits_for; k++) {
                lua_pushstring(L, d.waits_for[k]);
                lua_rawseti(L, -2, (lua_Integer)k + 1);
            }
            lua_setfield(L, -2, "waits_for");
        }
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "decisions");
    lua_createtable(L, (int)ne, 0);
    for (size_t i = 0; i < ne; i++) {
        us_event_info ev;
        us_engine_event(e, i, &ev);
        push_event(L, &ev);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "events");
    size_t nl = us_engine_policy_log_count(e);
    lua_createtable(L, (int)nl, 0);
    for (size_t i = 0; i < nl; i++) {
        us_policy_log_info l;
        us_engine_policy_log(e, i, &l);
        lua_createtable(L, 0, 3);
        set_str(L, "file", l.file);
        lua_pushinteger(L, l.line);
        lua_setfield(L, -2, "line");
        set_str(L, "message", l.message);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "log");
    lua_pushinteger(L, (lua_Integer)us_engine_policy_log_dropped(e));
    lua_setfield(L, -2, "log_dropped");
    /* the callback runs after the cycle, outside the engine: an error in it
     * is an ordinary Lua error from run_cycle, the cycle itself done */
    if (lua_getiuservalue(L, 1, 1) == LUA_TFUNCTION) {
        lua_getfield(L, -2, "events");
        for (size_t i = 0; i < ne; i++) {
            lua_pushvalue(L, -2);
            lua_rawgeti(L, -2, (lua_Integer)i + 1);
            lua_call(L, 1, 0);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 1;
}

static int l_on_event(lua_State *L) {
    check_engine(L);
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    lua_setiuservalue(L, 1, 1);
    return 0;
}

static int l_pods(lua_State *L) {
    us_engine *e = check_engine(L);
    size_t n = us_engine_pod_count(e);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        us_pod_info p;
        us_engine_pod(e, i, &p);
        lua_createtable(L, 0, 5);
        set_str(L, "name", p.name);
        set_str(L, "workload", p.workload);
        set_str(L, "node", p.node);
        set_str(L, "state", p.phase_name);
        lua_pushboolean(L, p.background);
        lua_setfield(L, -2, "background");
        lua_pushboolean(L, p.external);
        lua_setfield(L, -2, "external");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* A node's info as a table, pushed. */
static void push_node(lua_State *L, const us_node_info *x) {
    lua_createtable(L, 0, 5);
    set_str(L, "name", x->name);
    set_str(L, "pool", x->pool);
    set_res(L, "capacity", x->capacity);
    set_res(L, "used", x->used);
    lua_pushboolean(L, x->unschedulable);
    lua_setfield(L, -2, "unschedulable");
}

static int l_nodes(lua_State *L) {
    us_engine *e = check_engine(L);
    size_t n = us_engine_node_count(e);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        us_node_info x;
        us_engine_node(e, i, &x);
        push_node(L, &x);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* e:node(name): the node named name in the cluster, or nil. */
static int l_node(lua_State *L) {
    us_engine *e = check_engine(L);
    const char *name = luaL_checkstring(L, 2);
    us_node_info x;
    int rc = us_engine_node_named(e, name, &x);
    if (rc == US_ENOMEM) return luaL_error(L, "understory: out of memory");
    if (rc != US_OK) lua_pushnil(L);
    else push_node(L, &x);
    return 1;
}

static int l_queues(lua_State *L) {
    us_engine *e = check_engine(L);
    size_t n = us_engine_queue_count(e);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        us_queue_info q;
        us_engine_queue(e, i, &q);
        lua_createtable(L, 0, 4);
        set_str(L, "name", q.name);
        set_str(L, "parent", q.parent);
        set_res(L, "allocated", q.allocated);
        set_res(L, "fair_share", q.fair_share);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int l_workloads(lua_State *L) {
    static const char *const phases[] = {"active", "completed", "deleted"};
    us_engine *e = check_engine(L);
    size_t n = us_engine_workload_count(e);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        us_workload_info w;
        us_engine_workload(e, i, &w);
        lua_createtable(L, 0, 8);
        set_str(L, "name", w.name);
        set_str(L, "queue", w.queue);
        set_str(L, "state", phases[w.phase]);
        lua_pushboolean(L, w.background);
        lua_setfield(L, -2, "background");
        lua_pushboolean(L, w.external);
        lua_setfield(L, -2, "external");
        set_str(L, "blocked", w.blocked);
        set_str(L, "pending_reason", us_engine_workload_pending_reason(e, i));
        if (w.running_since >= 0) {
            lua_pushnumber(L, w.running_since);
            lua_setfield(L, -2, "running_since");
        }
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static const luaL_Reg engine_methods[] = {
    {"upsert_node", l_upsert_node},
    {"remove_node", l_remove_node},
    {"upsert_queue", l_upsert_queue},
    {"remove_queue", l_remove_queue},
    {"upsert_workload", l_upsert_workload},
    {"remove_workload", l_remove_workload},
    {"complete_workload", l_complete_workload},
    {"upsert_pod", l_upsert_pod},
    {"remove_pod", l_remove_pod},
    {"load_policies", l_load_policies},
    {"reload_policies", l_reload_policies},
    {"policy_id", l_policy_id},
    {"run_cycle", l_run_cycle},
    {"on_event", l_on_event},
    {"pods", l_pods},
    {"nodes", l_nodes},
    {"node", l_node},
    {"queues", l_queues},
    {"workloads", l_workloads},
    {"time", l_time},
    {"cycle_count", l_cycle_count},
    {"gpu_use", l_gpu_use},
    {"cycle_phases", l_cycle_phases},
    {"cycle_reuse", l_cycle_reuse},
    {"state_json", l_state_json},
    {"close", l_close},
    {NULL, NULL}};

static const luaL_Reg funcs[] = {{"simulate", l_simulate},
                                 {"engine", l_engine},
                                 {"json_decode", l_json_decode},
                                 {"json_encode", l_json_encode},
                                 {NULL, NULL}};

/* The one symbol the module exports (the build hides the rest). */
__attribute__((visibility("default"))) int luaopen_understory(lua_State *L);

int luaopen_understory(lua_State *L) {
    if (luaL_newmetatable(L, JOB_MT)) {
        lua_pushcfunction(L, job_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, TEXT_MT)) {
        lua_pushcfunction(L, text_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, ENGINE_MT)) {
        luaL_newlib(L, engine_methods);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, l_close);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, l_close);
        lua_setfield(L, -2, "__close");
        lua_pushcfunction(L, l_tostring);
        lua_setfield(L, -2, "__tostring");
    }
    lua_pop(L, 1);
    luaL_newlib(L, funcs);
    lua_pushliteral(L, US_VERSION);
    lua_setfield(L, -2, "version");
    return 1;
}
