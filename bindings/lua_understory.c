/*
 * lua_understory.c — the Lua 5.4 module `understory` (require "understory"):
 * the simulator for Lua programs.
 *
 *   local understory = require "understory"
 *   local out = understory.simulate(scenario, opts)
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
 *   plain_ties    true: ties between equally scored nodes go by node name
 *                 only (default false: background-aware ties)
 *   long_grace    seconds of termination grace above which a background pod
 *                 draws a warning (default 30)
 *   instructions  Lua instructions a policy call may run
 *   memory        Lua heap a policy may use: bytes, or a quantity ("64Mi")
 *
 * Returns the output document of DESIGN.md as a Lua table: objects become
 * tables, arrays 1-based sequences, and JSON null is left out (a pod with no
 * node has no `node` field).  Any failure raises a Lua error with the
 * engine's message (`workloads[3].queue: "team-z" is not a queue`); errors
 * about the Lua table itself name its path Lua's way (`workloads[4].name`).
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
                                        "memory", NULL};

/* Reads opts (stack index 2) into o; returns the policies directory or NULL.
 * The directory string stays on the stack, so it outlives the call. */
static const char *read_opts(lua_State *L, us_sim_opts *o) {
    const char *dir = NULL;
    if (lua_isnoneornil(L, 2)) goto defaults;
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        lua_pop(L, 1);
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        bool known = false;
        for (int i = 0; k && opt_names[i]; i++) known |= strcmp(k, opt_names[i]) == 0;
        if (!known)
            luaL_error(L, "opts.%s: unknown option (known: policies, plain_ties, long_grace, "
                          "instructions, memory)",
                       k ? k : luaL_typename(L, -1));
    }

    lua_getfield(L, 2, "plain_ties");
    if (!lua_isnil(L, -1)) {
        if (!lua_isboolean(L, -1)) luaL_error(L, "opts.plain_ties: expected a boolean");
        o->cycle.background_aware_ties = !lua_toboolean(L, -1);
    }
    lua_pop(L, 1);

    lua_getfield(L, 2, "long_grace");
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER || !(lua_tonumber(L, -1) >= 0) ||
            !isfinite(lua_tonumber(L, -1)))
            luaL_error(L, "opts.long_grace: expected a number of seconds >= 0");
        o->cycle.long_grace = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);

    lua_getfield(L, 2, "instructions");
    if (!lua_isnil(L, -1)) {
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) <= 0)
            luaL_error(L, "opts.instructions: expected a positive integer");
        o->limits.instructions = (uint64_t)lua_tointeger(L, -1);
    }
    lua_pop(L, 1);

    lua_getfield(L, 2, "memory");
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

    lua_getfield(L, 2, "policies"); /* left on the stack: dir points into it */
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
    const char *dir = read_opts(L, &o);

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

static const luaL_Reg funcs[] = {{"simulate", l_simulate}, {NULL, NULL}};

int luaopen_understory(lua_State *L) {
    if (luaL_newmetatable(L, JOB_MT)) {
        lua_pushcfunction(L, job_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    luaL_newlib(L, funcs);
    lua_pushliteral(L, US_VERSION);
    lua_setfield(L, -2, "version");
    return 1;
}
