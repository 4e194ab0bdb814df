/*
 * policy.c — the Lua policy host (policy.h): one sandboxed Lua 5.4 state per
 * policy set, its budgets, the views it is given and the conversion of what
 * it returns.
 *
 * It owns the lua_State and everything in it.  It must never let a policy
 * reach the host (no io, os, debug, package, files, bytecode), never let one
 * run unbounded (instruction, memory and wall-clock budget per call, with
 * the work of C library functions charged to the instructions, see "C
 * library work"), never let a spent budget be caught, never let one
 * policy file change another's globals or the shared libraries, and never
 * panic or abort: whatever a policy does, the caller gets 0 or -1 with a
 * message "file:line: message", and the state stays usable.  It does not
 * judge results beyond their types; the scheduling invariants are checked
 * by the callers (the design's cycle), which fall back to builtin.c.
 *
 * Two rules make that hold (the model is Redis's function_lua.c and
 * script_lua.c):
 *  - Everything that touches Lua runs inside one protected C function
 *    (protect -> trampoline).  A failed allocation anywhere, in a policy or
 *    while building its view, becomes an error and never reaches Lua's panic
 *    handler.  C scratch memory inside it is Lua userdata, so a longjmp
 *    cannot leak it.
 *  - A policy function runs in a coroutine (invoke), not under lua_pcall.
 *    When it fails, the coroutine's stack is left as it was, so the position
 *    of the fault can be read afterwards, even for a memory error, which
 *    Lua raises without calling a message handler.
 *
 * Lua code never runs on the main thread: only in the coroutine, under the
 * count hook.  __gc metamethods are refused (finalizers would run at GC
 * points, outside any call and its budget), and conversions read results
 * with raw accesses only, so no metamethod runs while converting.
 */
#include "policy.h"
#include "policysrc.h"
#include "sort.h"

#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define DEFAULT_INSTRUCTIONS 10000000ULL
#define DEFAULT_MEMORY ((size_t)64 << 20)
/* What a call's budgets grow by per item of its view (view_end): the
 * default background.lua takes about 20 instructions and half a
 * microsecond an item at 130,000 nodes (530,000 items), so its work stays
 * a small share of what the allowance adds */
#define VIEW_STEPS ((uint64_t)64)
#define VIEW_ITEMS_PER_MS ((size_t)500)
#define DEFAULT_TIME_MS 500UL
/* VM instructions between budget checks.  Small, because the clock is read
 * there too, and some single instructions cost milliseconds (== of two
 * distinct 30 MB strings, a vararg call of a million values). */
#define HOOK_EVERY 100

enum { FS = US_POLICY_COMPUTE, PL = US_POLICY_SCORE, BG = US_POLICY_REOFFER, NMOD = US_POLICY_NFN };
const char *const us_policy_files[NMOD] = {"fairshare.lua", "placement.lua", "background.lua"};
const char *const us_policy_fns[NMOD] = {"compute", "score", "reoffer"};
static const char *const *const mod_file = us_policy_files;
static const char *const *const mod_fn = us_policy_fns;

struct us_policy {
    lua_State *L;
    char *dir;
    char id[17];
    int mod[NMOD];          /* registry refs of the module tables */
    int seed_ref;           /* registry ref of the real math.randomseed */

    /* memory budget, kept by alloc(); the view a call is given is the
     * engine's, sized by the cluster, and not charged to the policy: the
     * budget bounds what the policy allocates beyond it (view_begin) */
    size_t mem_used, mem_limit;
    size_t mem_view;        /* bytes the current call's view took */
    size_t view_from;       /* mem_used when its building began */
    bool building_view;     /* no limit while the engine builds it */
    bool gc_held;           /* collector stopped for a call with a view (view_begin) */
    bool mem_hit;           /* an allocation was refused since the call began */

    /* instruction and time budget, kept by hook() and charge() */
    uint64_t steps, step_limit;
    unsigned long time_ms;  /* wall-clock milliseconds a call may take */
    /* the running call's budgets: the above, grown by its view's size
     * (view_items, set by view_end; see invoke) */
    uint64_t call_steps;
    unsigned long call_time_ms;
    size_t view_items;
    double deadline;        /* of the current call, on the monotonic clock */
    double cycle_deadline;  /* the cycle's (us_policy_set_cycle_deadline); 0: none */
    double cycle_budget;    /* its length in seconds, for messages */
    bool capped;            /* the current call's deadline is the cycle's */
    bool cut_by_cycle;      /* ... and the cycle's deadline is what ran out */
    bool cut;               /* a budget ran out during this call */
    bool cut_by_time;       /* ... the time budget */
    char cut_at[LUA_IDSIZE + 24];  /* "file:line" where it ran out */
    char cut_in[48];        /* the library function charged last, or "" */

    us_policy *previous;    /* the last good version this one replaced; owned */
    unsigned long calls[NMOD];  /* calls of each function since load (protect) */
    bool from_default[NMOD];    /* the file is the compiled-in default (policysrc.h) */

    /* policy authoring: log(...) lines not yet taken, and the id's hash,
     * which helper modules required while loading extend */
    us_policy_log_line *log;
    size_t nlog, cap_log;
    unsigned long log_dropped;
    uint64_t hash;
    bool loading;
    /* the running call drew from math.random or logged: its answer is not
     * a function of its view alone (us_policy_last_call_pure) */
    bool impure;
    /* math.random's generator state (the userdata upvalue it shares with
     * randomseed), read as bytes: a call that changed it drew.  NULL: not
     * found, and every score call counts as impure */
    const unsigned char *rng;
    size_t rng_len;
    char **labels;          /* declared node label keys, sorted, unique */
    size_t nlabels, caplabels;
};

/* The most bytes of math.random's state read (Lua 5.4's is 32). */
#define RNG_MAX 64

/* Registry key of the set of read-only tables (see sb_rawset). */
static const char frozen_key = 'f';

/* ---- budgets ----------------------------------------------------------- */

/* The allocator counts the bytes in use and refuses any growth past the
 * budget.  Shrinking and freeing always succeed, as Lua requires. */
static void *alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    us_policy *p = ud;
    size_t old = ptr ? osize : 0;  /* with ptr NULL, osize is a type tag */
    if (nsize == 0) {
        free(ptr);
        p->mem_used -= old;
        return NULL;
    }
    size_t limit = p->building_view ? SIZE_MAX
                   : p->mem_view > SIZE_MAX - p->mem_limit ? SIZE_MAX : p->mem_limit + p->mem_view;
    if (nsize > old && (p->mem_used > limit || nsize - old > limit - p->mem_used)) {
        p->mem_hit = true;
        return NULL;
    }
    void *q = realloc(ptr, nsize);
    if (!q) return NULL;
    p->mem_used = p->mem_used - old + nsize;
    return q;
}

/* The view of one call (the queues for compute, the nodes and pods for
 * reoffer) is built between view_begin and view_end: what it takes is the
 * engine's doing and grows with the cluster (400,000 offered pods at
 * 130,000 nodes take more than the whole default budget), so it is not
 * charged; the budget bounds what the policy allocates beyond it.
 * protect() ends the allowance with the call. */
static void view_begin(us_policy *p) {
    p->building_view = true;
    p->view_from = p->mem_used;
    /* everything built is live until the call returns: a collection step
     * during the call would only walk it, again and again as it grows.
     * What the policy throws away meanwhile is still collected: an
     * allocation the budget refuses makes Lua collect in full and retry,
     * stopped or not.  protect() collects the view once the call ends. */
    lua_gc(p->L, LUA_GCSTOP);
    p->gc_held = true;
}

static void view_end(us_policy *p, size_t items) {
    p->view_items = items;
    p->building_view = false;
    p->mem_view = p->mem_used > p->view_from ? p->mem_used - p->view_from : 0;
}

static us_policy *owner(lua_State *L) {
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return ud;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The message of a spent budget, pushed on L. */
static void push_cut_message(lua_State *L, const us_policy *p) {
    if (p->cut_by_cycle)
        lua_pushfstring(L, "%s: cycle time budget exceeded (%f s)%s", p->cut_at, (lua_Number)p->cycle_budget,
                        p->cut_in);
    else if (p->cut_by_time)
        lua_pushfstring(L, "%s: time budget exceeded (%I ms)%s", p->cut_at, (lua_Integer)p->call_time_ms,
                        p->cut_in);
    else
        lua_pushfstring(L, "%s: instruction budget exceeded (%I instructions)%s", p->cut_at,
                        (lua_Integer)p->call_steps, p->cut_in);
}

static void hook(lua_State *L, lua_Debug *ar);

/* Raise the spent budget's error on thread L, and make L's hook fire at
 * every instruction.  Once a budget is spent, every thread the policy runs
 * on fails at its next instruction: this one by its hook; any other by the
 * count it reaches first, or at once when control comes back to it through
 * pcall, xpcall, coroutine.resume or coroutine.close (which re-raise, see
 * sb_rethrow). */
static int raise_cut(lua_State *L, const us_policy *p) {
    lua_sethook(L, hook, LUA_MASKCOUNT, 1);
    push_cut_message(L, p);
    return lua_error(L);
}

/* Record that a budget ran out, at the innermost Lua function of L at or
 * above stack level lv. */
static void cut(us_policy *p, lua_State *L, int lv, bool by_time) {
    lua_Debug ar;
    p->cut = true;
    p->cut_by_time = by_time;
    p->cut_by_cycle = by_time && p->capped;
    snprintf(p->cut_at, sizeof p->cut_at, "?");
    for (; lua_getstack(L, lv, &ar); lv++)
        if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
            snprintf(p->cut_at, sizeof p->cut_at, "%s:%d", ar.short_src, ar.currentline);
            break;
        }
}

/* Count hook: charges the instructions run since the last call and reads
 * the clock.  Once a budget is spent it fires at every instruction and
 * raises every time, so a policy that catches the error with pcall cannot
 * run on: the next instruction of the catching function raises again, until
 * the error leaves the policy. */
static void hook(lua_State *L, lua_Debug *ar) {
    us_policy *p = owner(L);
    (void)ar;
    if (!p->cut) {
        p->steps += (uint64_t)lua_gethookcount(L);
        if (p->steps < p->call_steps && now_seconds() < p->deadline) return;
        cut(p, L, 0, p->steps < p->call_steps);
    }
    raise_cut(L, p);
}

/* Charge the work of a library function (in instructions' worth, see
 * "C library work" below) to the running call's budget; raises when it
 * does not fit.  what names the function for the message. */
static void charge(lua_State *L, double units, const char *what) {
    us_policy *p = owner(L);
    if (!p->cut) {
        double left = p->steps < p->call_steps ? (double)(p->call_steps - p->steps) : 0;
        if (units < left) {
            p->steps += (uint64_t)units;
            if (now_seconds() < p->deadline) return;
        }
        cut(p, L, 1, units < left);
        snprintf(p->cut_in, sizeof p->cut_in, " in %s", what);
    }
    raise_cut(L, p);
}

/* ---- one protected task ----------------------------------------------- */

typedef struct task task;
struct task {
    us_policy *p;
    const char *file;       /* the policy file being run, for messages */
    int (*run)(task *t, lua_State *L, lua_State *co);
    void *ud;
    us_err *err;
    int rc;
};

/* Position of the innermost Lua function on co's stack: its line, and its
 * source in src; 0 and "" when there is none. */
static int where(lua_State *co, char *src, size_t n) {
    lua_Debug ar;
    for (int lv = 0; lua_getstack(co, lv, &ar); lv++)
        if (lua_getinfo(co, "Sl", &ar) && ar.currentline > 0) {
            snprintf(src, n, "%s", ar.short_src);
            return ar.currentline;
        }
    src[0] = '\0';
    return 0;
}

static bool has_prefix(const char *s, const char *src) {
    size_t n = strlen(src);
    return n > 0 && strncmp(s, src, n) == 0 && s[n] == ':';
}

/* Fill t->err from a failed resume of co (status st): "file:line: message".
 * Reads only; allocates nothing in Lua, so it works with the budget spent. */
static int fault(task *t, lua_State *co, int st, const char *what) {
    us_policy *p = t->p;
    char src[LUA_IDSIZE], pos[LUA_IDSIZE + 24], num[64];
    int line = where(co, src, sizeof src);
    const char *msg;

    if (line > 0) snprintf(pos, sizeof pos, "%s:%d", src, line);
    else snprintf(pos, sizeof pos, "%s", t->file);

    if (p->cut) {
        if (p->cut_by_cycle)
            return us_err_set(t->err, US_EPOLICY, "%s: cycle time budget exceeded (%g s)%s", p->cut_at,
                              p->cycle_budget, p->cut_in);
        if (p->cut_by_time)
            return us_err_set(t->err, US_EPOLICY, "%s: time budget exceeded (%lu ms)%s", p->cut_at,
                              p->call_time_ms, p->cut_in);
        return us_err_set(t->err, US_EPOLICY, "%s: instruction budget exceeded (%llu instructions)%s",
                          p->cut_at, (unsigned long long)p->call_steps, p->cut_in);
    }
    if (st == LUA_ERRMEM) {
        if (p->mem_hit)
            return us_err_set(t->err, US_EPOLICY, "%s: memory budget exceeded (%zu bytes)", pos,
                              p->mem_limit);
        return us_err_set(t->err, US_ENOMEM, "%s: out of memory", pos);
    }
    if (st == LUA_YIELD)
        return us_err_set(t->err, US_EPOLICY, "%s: %s yielded outside a coroutine", pos, what);

    switch (lua_type(co, -1)) {
    case LUA_TSTRING:
        msg = lua_tostring(co, -1);
        break;
    case LUA_TNUMBER:  /* lua_tostring would convert in place, and allocate */
        if (lua_isinteger(co, -1)) snprintf(num, sizeof num, "%lld", (long long)lua_tointeger(co, -1));
        else snprintf(num, sizeof num, "%.14g", lua_tonumber(co, -1));
        msg = num;
        break;
    default:
        snprintf(num, sizeof num, "(error object is a %s value)", luaL_typename(co, -1));
        msg = num;
        break;
    }
    /* Runtime errors already read "file:line: ..."; add a position only to
     * those that lack one (error("x", 0), error objects that are not strings). */
    if (line > 0 ? has_prefix(msg, src) : has_prefix(msg, t->file))
        return us_err_set(t->err, US_EPOLICY, "%s", msg);
    return us_err_set(t->err, US_EPOLICY, "%s: %s", pos, msg);
}

/* The one way a policy function runs.  The function and its nargs arguments
 * are on top of L; they are moved to the coroutine co and run there under a
 * fresh instruction budget.  On success the first result (nil if none) is
 * left on top of L and 0 returned; otherwise t->err is filled, -1 returned,
 * and co is dead: the task must stop. */
static int invoke(task *t, lua_State *L, lua_State *co, int nargs, const char *what) {
    us_policy *p = t->p;
    int nres = 0, st;

    if (!lua_checkstack(co, nargs + 1 + LUA_MINSTACK) || !lua_checkstack(L, 2)) {
        lua_settop(L, lua_gettop(L) - nargs - 1);
        return us_err_set(t->err, US_EPOLICY, "%s: memory budget exceeded (%zu bytes)", t->file,
                          p->mem_limit);
    }
    lua_settop(co, 0);
    lua_xmove(L, co, nargs + 1);
    p->steps = 0;
    p->cut = false;
    p->cut_in[0] = '\0';
    p->mem_hit = false;
    /* a view of n items (nodes, pods, queues) takes work to read whatever
     * the policy does with it: the budgets grow with it */
    p->call_steps = p->step_limit > UINT64_MAX - VIEW_STEPS * (uint64_t)p->view_items
                        ? UINT64_MAX : p->step_limit + VIEW_STEPS * (uint64_t)p->view_items;
    p->call_time_ms = p->time_ms + (unsigned long)(p->view_items / VIEW_ITEMS_PER_MS);
    p->deadline = now_seconds() + (double)p->call_time_ms / 1000.0;
    p->capped = p->cycle_deadline > 0 && p->cycle_deadline < p->deadline;
    if (p->capped) p->deadline = p->cycle_deadline;
    lua_sethook(co, hook, LUA_MASKCOUNT, HOOK_EVERY);
    st = lua_resume(co, L, nargs, &nres);
    if (st != LUA_OK || p->cut) return fault(t, co, st, what);
    if (nres == 0) {
        lua_pushnil(L);
    } else {
        lua_pop(co, nres - 1);
        lua_xmove(co, L, 1);
    }
    lua_settop(co, 0);
    return 0;
}

static int trampoline(lua_State *L) {
    task *t = lua_touserdata(L, 1);
    luaL_checkstack(L, 40, "policy host");
    lua_State *co = lua_newthread(L);  /* anchored on L's stack for the task */
    t->rc = t->run(t, L, co);
    return 0;
}

/* Run t->run(t, L, co) protected.  Returns its result, or -1 with err
 * filled when it raised (a memory error while building a view, say).  After
 * a failure the garbage of the call is collected at once, so the next call
 * starts with the memory budget the policy had before. */
static int protect(us_policy *p, const char *file, int (*run)(task *, lua_State *, lua_State *),
                   void *ud, us_err *err) {
    lua_State *L = p->L;
    int top = lua_gettop(L), st, rc;
    task t = {p, file, run, ud, err, -1};

    p->mem_hit = false;
    for (int m = 0; m < NMOD; m++)
        if (file == mod_file[m]) p->calls[m]++;
    lua_pushcfunction(L, trampoline);
    lua_pushlightuserdata(L, &t);
    st = lua_pcall(L, 1, 0, 0);
    if (st == LUA_OK) {
        rc = t.rc;
    } else if (st == LUA_ERRMEM) {
        if (p->mem_hit)
            rc = us_err_set(err, US_EPOLICY, "%s: memory budget exceeded (%zu bytes)", t.file,
                            p->mem_limit);
        else
            rc = us_err_set(err, US_ENOMEM, "%s: out of memory", t.file);
    } else {
        const char *m = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error";
        rc = us_err_set(err, US_EPOLICY, "%s: %s", t.file, m);
    }
    lua_settop(L, top);
    p->building_view = false;
    p->mem_view = 0;
    p->view_items = 0;
    /* a view is garbage now, and so is all a failed call made: collected
     * at once, so the next call starts where the last good one ended (an
     * incremental collector would walk a large view again and again over
     * the next calls while freeing it) */
    if (p->gc_held) lua_gc(L, LUA_GCRESTART);
    if (rc < 0 || p->gc_held) {
        p->steps = 0;
        p->cut = false;
        lua_gc(L, LUA_GCCOLLECT);
    }
    p->gc_held = false;
    return rc;
}

/* Push the required function of module m; -1 with err when the policy has
 * since replaced it with something else. */
static int push_fn(task *t, lua_State *L, int m) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->p->mod[m]);
    lua_pushstring(L, mod_fn[m]);
    if (lua_rawget(L, -2) != LUA_TFUNCTION) {
        lua_pop(L, 2);
        return us_err_set(t->err, US_EPOLICY, "%s: the module's \"%s\" is no longer a function",
                          mod_file[m], mod_fn[m]);
    }
    lua_remove(L, -2);
    return 0;
}

/* ---- the sandbox ------------------------------------------------------- */

static int sb_readonly(lua_State *L) {
    return luaL_error(L, "attempt to modify a read-only table");
}

/* rawset, except on the read-only tables: rawset would bypass __newindex. */
static int sb_rawset(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    luaL_checkany(L, 3);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &frozen_key);
    lua_pushvalue(L, 1);
    if (lua_rawget(L, -2) != LUA_TNIL) return sb_readonly(L);
    lua_settop(L, 3);
    lua_rawset(L, 1);
    return 1;
}

/* setmetatable, refusing __gc: a finalizer would run at some later GC
 * point, outside the call that created it and outside its budget. */
static int sb_setmetatable(lua_State *L) {
    int t = lua_type(L, 2);
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    if (t == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "__gc metamethods are not allowed in policies");
        lua_pop(L, 1);
    }
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

/* ---- C library work ------------------------------------------------------
 * The count hook fires only between VM instructions, never inside a C
 * function, and the memory budget bounds what a call may keep, not the work
 * it does: s:find(p, 1, true) with an 8 MB pattern, a backtracking pattern,
 * table.sort of millions of numbers, load of megabytes of source, each run
 * for seconds to hours, and a loop repeats them.  So every library function
 * whose work grows with its input is wrapped: before it runs, an upper
 * bound of its work, computed from the sizes of its arguments, is charged
 * to the call's instruction budget (charge), and a call that does not fit
 * cuts the budget like the hook does.  Units: one instruction's worth is
 * BYTES_PER_UNIT bytes copied or compared, MATCH_STEPS_PER_UNIT steps of
 * the pattern matcher, one comparison of table.sort, or LOAD_BYTES_PER_UNIT
 * bytes of source compiled.
 *
 * What no wrapper can see is a single VM instruction over a long string
 * (==, <, ..) or a call with a huge number of arguments; the wall-clock
 * deadline, read by the hook every HOOK_EVERY instructions, bounds those. */
#define BYTES_PER_UNIT 64.0
#define MATCH_STEPS_PER_UNIT 10.0
#define LOAD_BYTES_PER_UNIT 1.0

typedef enum cost_kind {
    COST_LINEAR,    /* the bytes of its string arguments, and their number */
    COST_REP,       /* string.rep: the bytes it writes */
    COST_FIND,      /* string.find: the matcher, or a plain search */
    COST_MATCH,     /* string.match, string.gsub: the matcher ('^' anchors) */
    COST_GMATCH,    /* string.gmatch: the matcher, never anchored */
    COST_SORT,      /* table.sort: n log n comparisons, of strings by length */
    COST_CONCAT,    /* table.concat: the elements it joins */
    COST_RANGE,     /* table.move, table.unpack: the elements from i to j */
    COST_SHIFT      /* table.insert, table.remove: the elements they shift */
} cost_kind;

/* Index just past the set [...] that starts at i, as lstrlib reads it. */
static size_t skip_set(const char *p, size_t len, size_t i) {
    i++;
    if (i < len && p[i] == '^') i++;
    do {
        if (i >= len) return len;
        if (p[i++] == '%') i++;
    } while (i < len && p[i] != ']');
    return i < len ? i + 1 : len;
}

/* log10 of an upper bound of the matcher's steps for pattern p on a
 * subject of n bytes: each start position (one when anchored) walks the
 * pattern, each single-character item costing up to its own length (a
 * set is scanned), each repetition (*, +, -, %b, a back reference) may try
 * every position of the subject, and an optional item (?) doubles the
 * tries. */
static double pattern_cost(const char *p, size_t len, size_t n, bool anchorable) {
    double lg = log10((double)n + 1), cost = log10((double)len + 1);
    size_t i = 0;
    if (anchorable && len > 0 && p[0] == '^') i = 1;
    else cost += lg;
    while (i < len) {
        size_t end = i + 1;  /* just past this single-character class */
        if (p[i] == '(' || p[i] == ')') {
            i++;
            continue;
        }
        if (p[i] == '%' && i + 1 < len) {
            char d = p[i + 1];
            if (d == 'b') {
                cost += lg;
                i += 4;
                continue;
            }
            if (d == 'f') {
                i = skip_set(p, len, i + 2);
                continue;
            }
            if (d >= '0' && d <= '9') {
                cost += lg;
                i += 2;
                continue;
            }
            end = i + 2;
        } else if (p[i] == '[') {
            end = skip_set(p, len, i);
        }
        if (end < len && (p[end] == '*' || p[end] == '+' || p[end] == '-')) {
            cost += lg;
            end++;
        } else if (end < len && p[end] == '?') {
            cost += log10(2.0);
            end++;
        }
        i = end;
    }
    return cost;
}

/* Units of a search for p (len bytes) in a subject of n bytes.  A plain
 * search (find with `plain`, or a pattern without special characters, as
 * lstrlib decides) compares up to len bytes at each position. */
static double search_units(lua_State *L, const char *p, size_t len, size_t n, bool anchorable,
                           bool plain) {
    if (plain || (anchorable && !strpbrk(p, "^$*+?.([%-") && strlen(p) == len))
        return len > n ? 1 : ((double)(n - len) + 1) * ((double)len + 1) / BYTES_PER_UNIT;
    (void)L;
    return pow(10.0, pattern_cost(p, len, n, anchorable)) / MATCH_STEPS_PER_UNIT;
}

/* The bytes of the string arguments from first on, and their number. */
static double linear_units(lua_State *L, int first) {
    double bytes = 0;
    int top = lua_gettop(L);
    for (int i = first; i <= top; i++)
        if (lua_type(L, i) == LUA_TSTRING) {
            size_t l;
            lua_tolstring(L, i, &l);
            bytes += (double)l;
        }
    return 1 + (double)(top - first + 1) + bytes / BYTES_PER_UNIT;
}

/* #t as the library function reads it (__len may run: Lua code, counted). */
static double length_of(lua_State *L, int idx) {
    lua_Integer n = lua_type(L, idx) == LUA_TTABLE ? luaL_len(L, idx) : 0;
    return n > 0 ? (double)n : 0;
}

/* Instructions left in the running call's budget. */
static double budget_left(lua_State *L) {
    const us_policy *p = owner(L);
    return p->steps < p->call_steps ? (double)(p->call_steps - p->steps) : 0;
}

/* Raw string lengths of t[1..n], the elements a sort or concat reads. */
static double element_bytes(lua_State *L, int idx, lua_Integer from, lua_Integer to) {
    double bytes = 0;
    for (lua_Integer i = from; i <= to; i++) {
        size_t l = 0;
        if (lua_rawgeti(L, idx, i) == LUA_TSTRING) lua_tolstring(L, -1, &l);
        bytes += (double)l;
        lua_pop(L, 1);
    }
    return bytes;
}

/* Upper bound of the work the wrapped function will do on these arguments. */
static double cost_of(lua_State *L, cost_kind kind, const char *name) {
    size_t n = 0, len = 0, lsep = 0;
    double units = 1, count;
    switch (kind) {
    case COST_LINEAR:
        return linear_units(L, 1);
    case COST_REP: {
        luaL_checklstring(L, 1, &n);
        lua_Integer times = luaL_checkinteger(L, 2);
        if (!lua_isnoneornil(L, 3)) luaL_checklstring(L, 3, &lsep);
        /* a result larger than the heap fails at its allocation, at once */
        double bytes = (double)times * (double)(n + lsep);
        if (times <= 0 || bytes > (double)owner(L)->mem_limit) return 1;
        return 1 + (bytes + (double)times) / BYTES_PER_UNIT;
    }
    case COST_FIND:
    case COST_MATCH:
    case COST_GMATCH: {
        luaL_checklstring(L, 1, &n);
        const char *p = luaL_checklstring(L, 2, &len);
        bool plain = kind == COST_FIND && lua_toboolean(L, 4);
        units = search_units(L, p, len, n, kind != COST_GMATCH, plain);
        /* gsub's replacement string may be copied once per match */
        if (strcmp(name, "string.gsub") == 0 && lua_type(L, 3) == LUA_TSTRING) {
            lua_tolstring(L, 3, &lsep);
            units += ((double)n + 1) * (double)lsep / BYTES_PER_UNIT;
        }
        return units + (double)n / BYTES_PER_UNIT;
    }
    case COST_SORT: {
        luaL_checktype(L, 1, LUA_TTABLE);
        count = length_of(L, 1);
        units = 1 + count * log2(count + 2);
        if (units < budget_left(L))  /* else it is cut without a scan */
            units += units * element_bytes(L, 1, 1, (lua_Integer)count) / (count + 1) / BYTES_PER_UNIT;
        return units;
    }
    case COST_CONCAT: {
        luaL_checktype(L, 1, LUA_TTABLE);
        if (!lua_isnoneornil(L, 2)) luaL_checklstring(L, 2, &lsep);
        lua_Integer i = luaL_optinteger(L, 3, 1);
        lua_Integer j = lua_isnoneornil(L, 4) ? (lua_Integer)length_of(L, 1) : luaL_checkinteger(L, 4);
        count = i > j ? 0 : (double)j - (double)i + 1;
        units = 1 + count * (1 + (double)lsep / BYTES_PER_UNIT);
        if (count > 0 && units < budget_left(L))
            units += element_bytes(L, 1, i, j) / BYTES_PER_UNIT;
        return units;
    }
    case COST_RANGE: {
        /* table.move(a1, f, e, t): f..e; table.unpack(t, i, j): i..j (j: #t) */
        bool move = strcmp(name, "table.move") == 0;
        lua_Integer i = move ? luaL_checkinteger(L, 2) : luaL_optinteger(L, 2, 1);
        lua_Integer j = move ? luaL_checkinteger(L, 3)
                        : lua_isnoneornil(L, 3) ? (lua_Integer)length_of(L, 1) : luaL_checkinteger(L, 3);
        return i > j ? 1 : 1 + ((double)j - (double)i + 1);
    }
    case COST_SHIFT: {
        /* insert(t, pos, v) and remove(t, pos) move #t - pos elements;
         * insert(t, v) and remove(t) none */
        int shifting = strcmp(name, "table.insert") == 0 ? lua_gettop(L) >= 3 : lua_gettop(L) >= 2;
        if (!shifting) return 1;
        count = length_of(L, 1);
        double pos = lua_isinteger(L, 2) ? (double)lua_tointeger(L, 2) : 1;
        return 1 + (count - pos > 0 ? count - pos : 0);
    }
    }
    return units;
}

/* A library function, wrapped: charge its work, then run it.  Upvalues:
 * the original (a C function without upvalues, called in this frame, so
 * its argument errors read as before), its cost kind, its name. */
static int sb_charged(lua_State *L) {
    cost_kind kind = (cost_kind)lua_tointeger(L, lua_upvalueindex(2));
    const char *name = lua_tostring(L, lua_upvalueindex(3));
    int top = lua_gettop(L);
    size_t l = 0, lsep = 0;
    /* string.rep with nothing to copy: the original would loop n times */
    int isint = 0;
    if (kind == COST_REP && lua_type(L, 1) == LUA_TSTRING &&
        (lua_tointegerx(L, 2, &isint), isint) && lua_tointeger(L, 2) > 0 &&
        (lua_tolstring(L, 1, &l), l == 0) &&
        (lua_isnoneornil(L, 3) || (lua_type(L, 3) == LUA_TSTRING && (lua_tolstring(L, 3, &lsep), lsep == 0)))) {
        lua_pushliteral(L, "");
        return 1;
    }
    charge(L, cost_of(L, kind, name), name);
    lua_settop(L, top);
    return lua_tocfunction(L, lua_upvalueindex(1))(L);
}

/* pcall, xpcall, coroutine.resume, coroutine.close (which returns the error
 * of a __close handler): the ways to catch an error.  Once a
 * budget is spent, the error they caught is raised again at once, so not
 * one more instruction of the catching code runs.  Upvalue: the original. */
static int rethrow_k(lua_State *L, int status, lua_KContext ctx) {
    (void)status, (void)ctx;
    if (owner(L)->cut) return raise_cut(L, owner(L));
    return lua_gettop(L);
}

static int sb_rethrow(lua_State *L) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    /* with a continuation, so a coroutine may still yield across pcall */
    lua_callk(L, lua_gettop(L) - 1, LUA_MULTRET, 0, rethrow_k);
    return rethrow_k(L, LUA_OK, 0);
}

/* xpcall's message handler, guarded (upvalue: the policy's handler).  The
 * error of a spent budget is raised from inside the count hook, where Lua
 * runs no hooks, and Lua calls the message handler right there: the
 * handler would run unbounded.  So once a budget is spent the handler is
 * skipped and the error passed on as it is. */
static int sb_handler(lua_State *L) {
    if (owner(L)->cut) return 1;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* xpcall(f, handler, ...): the handler guarded, then as sb_rethrow. */
static int sb_xpcall(lua_State *L) {
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, sb_handler, 1);
    lua_replace(L, 2);
    return sb_rethrow(L);
}

/* load(chunk [, chunkname [, mode [, env]]]): text chunks only, whatever
 * mode says; the environment defaults to the calling file's globals
 * (upvalue 1), like the standard load's global table.  Compiling is
 * charged by the size of the source. */
static int sb_load(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    const char *name = luaL_optstring(L, 2, s);
    int env = lua_isnone(L, 4) ? lua_upvalueindex(1) : 4;
    charge(L, 1 + (double)len / LOAD_BYTES_PER_UNIT, "load");
    if (luaL_loadbufferx(L, s, len, name, "t") != LUA_OK) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    lua_pushvalue(L, env);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
    return 1;
}

/* The wrapped functions of the shared libraries.  Left as they are: those
 * whose work does not grow with their input (math, type, next, rawget,
 * coroutine.create, ...), and string.len. */
static const struct charged {
    const char *lib, *name;
    cost_kind kind;
} charged_fns[] = {
    {LUA_STRLIBNAME, "rep", COST_REP},       {LUA_STRLIBNAME, "find", COST_FIND},
    {LUA_STRLIBNAME, "match", COST_MATCH},   {LUA_STRLIBNAME, "gsub", COST_MATCH},
    {LUA_STRLIBNAME, "gmatch", COST_GMATCH}, {LUA_STRLIBNAME, "byte", COST_LINEAR},
    {LUA_STRLIBNAME, "char", COST_LINEAR},   {LUA_STRLIBNAME, "format", COST_LINEAR},
    {LUA_STRLIBNAME, "lower", COST_LINEAR},  {LUA_STRLIBNAME, "upper", COST_LINEAR},
    {LUA_STRLIBNAME, "reverse", COST_LINEAR}, {LUA_STRLIBNAME, "sub", COST_LINEAR},
    {LUA_STRLIBNAME, "pack", COST_LINEAR},   {LUA_STRLIBNAME, "unpack", COST_LINEAR},
    {LUA_STRLIBNAME, "packsize", COST_LINEAR},
    {LUA_TABLIBNAME, "sort", COST_SORT},     {LUA_TABLIBNAME, "concat", COST_CONCAT},
    {LUA_TABLIBNAME, "move", COST_RANGE},    {LUA_TABLIBNAME, "unpack", COST_RANGE},
    {LUA_TABLIBNAME, "insert", COST_SHIFT},  {LUA_TABLIBNAME, "remove", COST_SHIFT},
    {LUA_TABLIBNAME, "pack", COST_LINEAR},
    {LUA_UTF8LIBNAME, "char", COST_LINEAR},  {LUA_UTF8LIBNAME, "codepoint", COST_LINEAR},
    {LUA_UTF8LIBNAME, "len", COST_LINEAR},   {LUA_UTF8LIBNAME, "offset", COST_LINEAR},
    {LUA_GNAME, "tonumber", COST_LINEAR},    {LUA_GNAME, "tostring", COST_LINEAR},
    {LUA_GNAME, "select", COST_LINEAR},      {LUA_GNAME, "rawequal", COST_LINEAR},
};

/* Wrap, in the real library tables (s:find() reads the string table through
 * the string metatable), every function of charged_fns and the catching
 * functions.  g is the real global table. */
static void charge_libraries(lua_State *L, int g) {
    for (size_t i = 0; i < sizeof charged_fns / sizeof *charged_fns; i++) {
        const struct charged *c = &charged_fns[i];
        char full[48];
        if (strcmp(c->lib, LUA_GNAME) == 0) lua_pushvalue(L, g);
        else lua_getfield(L, g, c->lib);
        snprintf(full, sizeof full, "%s%s%s", strcmp(c->lib, LUA_GNAME) ? c->lib : "",
                 strcmp(c->lib, LUA_GNAME) ? "." : "", c->name);
        lua_getfield(L, -1, c->name);
        lua_pushinteger(L, c->kind);
        lua_pushstring(L, full);
        lua_pushcclosure(L, sb_charged, 3);
        lua_setfield(L, -2, c->name);
        lua_pop(L, 1);
    }
    static const struct {
        const char *lib, *name;
        lua_CFunction fn;
    } catching[] = {{LUA_GNAME, "pcall", sb_rethrow}, {LUA_GNAME, "xpcall", sb_xpcall},
                    {LUA_COLIBNAME, "resume", sb_rethrow}, {LUA_COLIBNAME, "close", sb_rethrow}};
    for (size_t i = 0; i < sizeof catching / sizeof *catching; i++) {
        if (strcmp(catching[i].lib, LUA_GNAME) == 0) lua_pushvalue(L, g);
        else lua_getfield(L, g, catching[i].lib);
        lua_getfield(L, -1, catching[i].name);
        lua_pushcclosure(L, catching[i].fn, 1);
        lua_setfield(L, -2, catching[i].name);
        lua_pop(L, 1);
    }
}

/* Replace the table at idx by a read-only proxy of it: empty, reading
 * through __index, refusing writes, its metatable hidden. */
static void push_proxy(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    lua_newtable(L);
    lua_createtable(L, 0, 3);
    lua_pushvalue(L, idx);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, sb_readonly);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &frozen_key);
    lua_pushvalue(L, -2);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

static const luaL_Reg safe_libs[] = {
    {LUA_GNAME, luaopen_base},         {LUA_TABLIBNAME, luaopen_table},
    {LUA_STRLIBNAME, luaopen_string},  {LUA_MATHLIBNAME, luaopen_math},
    {LUA_UTF8LIBNAME, luaopen_utf8},   {LUA_COLIBNAME, luaopen_coroutine},
    {NULL, NULL}};

/* Base functions a policy may use.  Left out: print (stdout carries the
 * simulator's JSON), dofile, loadfile, load (replaced per file),
 * collectgarbage, warn, and rawset/setmetatable (replaced above). */
static const char *const safe_base[] = {"assert", "error",  "getmetatable", "ipairs",
                                        "next",   "pairs",  "pcall",        "rawequal",
                                        "rawget", "rawlen", "select",       "tonumber",
                                        "tostring", "type", "xpcall",       "_VERSION",
                                        NULL};

/* ---- policy authoring: require and log ---------------------------------- */

/* Registry key of the table of helper modules loaded so far (name -> value;
 * false while one loads, to catch a require loop). */
static const char modules_key = 'm';

static void push_env(lua_State *L, int base);

static void fold_hash(us_policy *p, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) p->hash = (p->hash ^ (unsigned char)s[i]) * 0x100000001b3ULL;
}

/* require(name): the helper module name.lua of the policy's own directory,
 * run once in an environment of its own (like a policy file), its value
 * cached.  Names are letters, digits, '_' and '-': nothing outside the
 * directory can be named.  The file's bytes are read into Lua memory, so
 * the memory budget covers them and an error cannot leak them. */
static int sb_require(lua_State *L) {
    us_policy *p = owner(L);
    size_t nlen;
    const char *name = luaL_checklstring(L, 1, &nlen);
    bool ok = nlen > 0 && nlen <= 64;
    for (size_t i = 0; ok && i < nlen; i++)
        ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
             (name[i] >= '0' && name[i] <= '9') || name[i] == '_' || name[i] == '-';
    if (!ok)
        return luaL_error(L, "require \"%s\": not a module name (a helper is NAME.lua in the policy "
                          "directory; NAME has letters, digits, '_' and '-' only)", name);
    lua_settop(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &modules_key); /* 2: modules */
    lua_pushvalue(L, 1);
    int kind = lua_rawget(L, 2);
    if (kind == LUA_TBOOLEAN && !lua_toboolean(L, -1))
        return luaL_error(L, "require \"%s\": a require loop (the module requires itself, maybe "
                          "through others)", name);
    if (kind != LUA_TNIL) return 1;
    lua_pop(L, 1);

    char path[4096], chunk[80];
    struct stat sb;
    if (snprintf(path, sizeof path, "%s/%s.lua", p->dir, name) >= (int)sizeof path)
        return luaL_error(L, "require \"%s\": path too long", name);
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT)
            return luaL_error(L, "require \"%s\": no %s.lua in the policy directory %s", name, name, p->dir);
        return luaL_error(L, "require \"%s\": cannot read %s: %s", name, path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode) || (size_t)sb.st_size > US_POLICYSRC_MAX)
        return luaL_error(L, "require \"%s\": %s is not a file of at most %d bytes", name, path,
                          (int)US_POLICYSRC_MAX);
    size_t size = (size_t)sb.st_size;
    /* Lua memory, allocated before the file is opened: nothing can raise
     * while it is open */
    char *buf = lua_newuserdatauv(L, size + 1, 0);
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(buf, 1, size, f) : 0;
    if (f) fclose(f);
    if (!f || got != size) return luaL_error(L, "require \"%s\": cannot read %s", name, path);
    if (p->loading) fold_hash(p, buf, size);
    snprintf(chunk, sizeof chunk, "@%s.lua", name);
    if (luaL_loadbufferx(L, buf, size, chunk, "t") != LUA_OK) return lua_error(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    push_env(L, lua_gettop(L));
    lua_remove(L, -2);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
    lua_pushvalue(L, 1);
    lua_pushboolean(L, 0);
    lua_rawset(L, 2); /* loading */
    if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
        /* not loaded: the next require runs it again (and fails the same
         * way) rather than reporting a loop */
        lua_pushvalue(L, 1);
        lua_pushnil(L);
        lua_rawset(L, 2);
        return lua_error(L);
    }
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, 1);
    lua_pushvalue(L, -2);
    lua_rawset(L, 2);
    return 1;
}

/* log(...): its arguments, as tostring shows them, tab-separated, kept
 * with the file and line that called it until the cycle takes them
 * (us_policy_log_take).  A line is cut at US_POLICY_LOG_TEXT bytes; past
 * US_POLICY_LOG_MAX lines waiting, lines are counted as dropped. */
static int sb_log(lua_State *L) {
    us_policy *p = owner(L);
    int n = lua_gettop(L);
    p->impure = true;
    if (p->nlog >= US_POLICY_LOG_MAX) {
        p->log_dropped++;
        return 0;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1) luaL_addchar(&b, ' ');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    lua_Debug ar;
    char file[LUA_IDSIZE] = "?";
    int line = 0;
    if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar)) {
        snprintf(file, sizeof file, "%s", ar.short_src);
        line = ar.currentline;
    }
    if (us_grow((void **)&p->log, &p->cap_log, p->nlog, sizeof *p->log) < 0) {
        p->log_dropped++;
        return 0;
    }
    us_policy_log_line *l = &p->log[p->nlog];
    size_t keep = len > US_POLICY_LOG_TEXT ? US_POLICY_LOG_TEXT : len;
    l->file = strdup(file);
    l->text = malloc(keep + 4);
    l->line = line;
    if (!l->file || !l->text) {
        free(l->file);
        free(l->text);
        p->log_dropped++;
        return 0;
    }
    memcpy(l->text, text, keep);
    strcpy(l->text + keep, keep < len ? "..." : "");
    p->nlog++;
    return 0;
}

/* Put require and log in the base environment (index base). */
static void add_authoring(lua_State *L, int base) {
    lua_newtable(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &modules_key);
    lua_pushcfunction(L, sb_require);
    lua_setfield(L, base, "require");
    lua_pushcfunction(L, sb_log);
    lua_setfield(L, base, "log");
}

size_t us_policy_log_count(const us_policy *p) { return p ? p->nlog : 0; }

size_t us_policy_memory(const us_policy *p) { return p ? p->mem_used : 0; }

const us_policy_log_line *us_policy_log_at(const us_policy *p, size_t i) {
    return p && i < p->nlog ? &p->log[i] : NULL;
}
unsigned long us_policy_log_dropped(const us_policy *p) { return p ? p->log_dropped : 0; }

void us_policy_log_clear(us_policy *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nlog; i++) {
        free(p->log[i].file);
        free(p->log[i].text);
    }
    p->nlog = 0;
    p->log_dropped = 0;
}

/* Open the safe libraries and leave the shared, read-only base environment
 * on top of L. */
static void push_sandbox(us_policy *p, lua_State *L) {
    int g, base;

    lua_newtable(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &frozen_key);
    for (const luaL_Reg *lib = safe_libs; lib->func; lib++) {
        luaL_requiref(L, lib->name, lib->func, 1);
        lua_pop(L, 1);
    }
    lua_pushglobaltable(L);
    g = lua_gettop(L);

    /* string.dump would hand out bytecode; math.randomseed would let a
     * policy break determinism (the engine seeds per cycle instead). */
    lua_getfield(L, g, LUA_STRLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
    charge_libraries(L, g);
    lua_getfield(L, g, LUA_MATHLIBNAME);
    lua_getfield(L, -1, "randomseed");
    p->seed_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushnil(L);
    lua_setfield(L, -2, "randomseed");
    /* where math.random keeps its state, to tell a call that drew (its
     * answer may not be kept for a later cycle, whose draws differ:
     * us_policy_last_call_pure); math.random itself stays as it is, so
     * its errors still name it */
    lua_getfield(L, -1, "random");           /* math, random */
    if (lua_getupvalue(L, -1, 1)) {          /* math, random, its state */
        if (lua_type(L, -1) == LUA_TUSERDATA && lua_rawlen(L, -1) <= RNG_MAX) {
            p->rng = lua_touserdata(L, -1);  /* kept alive by math.random */
            p->rng_len = lua_rawlen(L, -1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 2);

    /* Hide the string metatable: its __index is the real string table. */
    lua_pushliteral(L, "");
    lua_getmetatable(L, -1);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 2);

    lua_newtable(L);
    base = lua_gettop(L);
    for (const char *const *name = safe_base; *name; name++) {
        lua_getfield(L, g, *name);
        lua_setfield(L, base, *name);
    }
    lua_pushcfunction(L, sb_rawset);
    lua_setfield(L, base, "rawset");
    lua_pushcfunction(L, sb_setmetatable);
    lua_setfield(L, base, "setmetatable");
    for (const luaL_Reg *lib = safe_libs + 1; lib->func; lib++) {
        lua_getfield(L, g, lib->name);
        push_proxy(L, -1);
        lua_setfield(L, base, lib->name);
        lua_pop(L, 1);
    }
    add_authoring(L, base);
    push_proxy(L, base);

    /* The old global table holds the unsafe base functions; nothing may
     * reach it, not even a chunk loaded with the default environment. */
    lua_pushvalue(L, -1);
    lua_rawseti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_replace(L, g);
    lua_settop(L, g);
}

/* A file's own global table on top of L: reads fall through to the base
 * environment at index base, writes stay in the file. */
static void push_env(lua_State *L, int base) {
    lua_newtable(L);
    lua_createtable(L, 0, 2);
    lua_pushvalue(L, base);
    lua_setfield(L, -2, "__index");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, -2, "_G");
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, sb_load, 1);
    lua_setfield(L, -2, "load");
}

/* ---- loading ----------------------------------------------------------- */

typedef struct load_task {
    const char *buf[NMOD];
    size_t len[NMOD];
} load_task;

static int by_cstr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The module table's `labels` (top of L): nil, or a list of the node label
 * keys the file reads; added to t->p's declared keys.  Only raw reads on
 * strings already made, so nothing here raises: every key is owned by p
 * as soon as it is copied. */
static int read_labels(task *t, lua_State *L) {
    us_policy *p = t->p;
    int ty;
    lua_pushliteral(L, "labels");
    ty = lua_rawget(L, -2);
    if (ty == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (ty != LUA_TTABLE)
        return us_err_set(t->err, US_EPOLICY, "%s: labels must be a list of node label keys "
                          "(strings), got a %s", t->file, lua_typename(L, ty));
    for (lua_Integer i = 1;; i++) {
        ty = lua_rawgeti(L, -1, i);
        if (ty == LUA_TNIL) break;
        if (ty != LUA_TSTRING || lua_rawlen(L, -1) == 0)
            return us_err_set(t->err, US_EPOLICY, "%s: labels[%lld] must be a non-empty label key "
                              "string, got %s", t->file, (long long)i,
                              ty == LUA_TSTRING ? "\"\"" : lua_typename(L, ty));
        const char *key = lua_tostring(L, -1);
        bool dup = false;
        for (size_t j = 0; j < p->nlabels && !dup; j++) dup = strcmp(p->labels[j], key) == 0;
        if (!dup) {
            if (p->nlabels == p->caplabels) {
                size_t ncap = p->caplabels ? p->caplabels * 2 : 8;
                char **x = realloc(p->labels, ncap * sizeof *x);
                if (!x) return us_err_nomem(t->err);
                p->labels = x;
                p->caplabels = ncap;
            }
            if (!(p->labels[p->nlabels] = strdup(key))) return us_err_nomem(t->err);
            p->nlabels++;
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    qsort(p->labels, p->nlabels, sizeof *p->labels, by_cstr);
    return 0;
}

const char *const *us_policy_labels(const us_policy *p, size_t *n) {
    *n = p->nlabels;
    return (const char *const *)p->labels;
}

static int load_run(task *t, lua_State *L, lua_State *co) {
    us_policy *p = t->p;
    load_task *lt = t->ud;
    int base, st;

    push_sandbox(p, L);
    base = lua_gettop(L);
    for (int m = 0; m < NMOD; m++) {
        char chunk[64];
        t->file = mod_file[m];
        push_env(L, base);
        snprintf(chunk, sizeof chunk, "@%s", mod_file[m]);
        st = luaL_loadbufferx(L, lt->buf[m], lt->len[m], chunk, "t");
        if (st != LUA_OK) {
            const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error";
            if (st == LUA_ERRMEM && p->mem_hit)
                return us_err_set(t->err, US_EPOLICY, "%s: memory budget exceeded (%zu bytes)",
                                  mod_file[m], p->mem_limit);
            if (has_prefix(msg, mod_file[m])) return us_err_set(t->err, US_EPOLICY, "%s", msg);
            return us_err_set(t->err, US_EPOLICY, "%s: %s", mod_file[m], msg);
        }
        lua_pushvalue(L, -2);
        if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
        if (invoke(t, L, co, 0, "main chunk") < 0) return -1;
        lua_pushstring(L, mod_fn[m]);
        if (!lua_istable(L, -2) || lua_rawget(L, -2) != LUA_TFUNCTION)
            return us_err_set(t->err, US_EPOLICY, "%s: must return a table with a function \"%s\"",
                              mod_file[m], mod_fn[m]);
        lua_pop(L, 1);
        if (read_labels(t, L) < 0) return -1;
        p->mod[m] = luaL_ref(L, LUA_REGISTRYINDEX);
        lua_pop(L, 1);  /* the file's environment lives on in its functions */
    }
    /* math.random is seeded from the clock when the library opens */
    lua_rawgeti(L, LUA_REGISTRYINDEX, p->seed_ref);
    lua_pushinteger(L, 0);
    lua_call(L, 1, 0);
    return 0;
}

/* FNV-1a 64 over each file's name, a NUL, and its bytes. */
static void make_id(us_policy *p, char *const *buf, const size_t *len) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int m = 0; m < NMOD; m++) {
        const unsigned char *s = (const unsigned char *)mod_file[m];
        for (size_t i = 0; i <= strlen(mod_file[m]); i++) h = (h ^ s[i]) * 0x100000001b3ULL;
        s = (const unsigned char *)buf[m];
        for (size_t i = 0; i < len[m]; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    }
    p->hash = h;
    snprintf(p->id, sizeof p->id, "%016llx", (unsigned long long)h);
}

us_policy *us_policy_load(const char *dir, const us_policy_limits *lim, us_err *err) {
    us_policy *p = NULL;
    char *buf[NMOD] = {NULL};
    size_t len[NMOD] = {0};
    load_task lt;

    p = calloc(1, sizeof *p);
    if (!p || !(p->dir = strdup(dir))) {
        us_err_nomem(err);
        goto fail;
    }
    for (int m = 0; m < NMOD; m++) p->mod[m] = LUA_NOREF;
    p->seed_ref = LUA_NOREF;
    p->step_limit = lim && lim->instructions ? lim->instructions : DEFAULT_INSTRUCTIONS;
    p->time_ms = lim && lim->time_ms ? lim->time_ms : DEFAULT_TIME_MS;
    p->call_steps = p->step_limit;  /* invoke sets each call's */
    p->call_time_ms = p->time_ms;
    p->mem_limit = lim && lim->memory ? lim->memory : DEFAULT_MEMORY;
    snprintf(p->cut_at, sizeof p->cut_at, "?");

    /* a directory holds only the files it changes: the rest are the defaults */
    if (us_policysrc_check_dir(dir, err) < 0) goto fail;
    for (int m = 0; m < NMOD; m++)
        if (us_policysrc_read(dir, m, &buf[m], &len[m], &p->from_default[m], err) < 0) goto fail;
    make_id(p, buf, len);

    p->L = lua_newstate(alloc, p);
    if (!p->L) {
        us_err_set(err, US_EPOLICY, "%s: cannot create a Lua state within the memory budget "
                   "(%zu bytes)", dir, p->mem_limit);
        goto fail;
    }
    /* Lua code runs only in coroutines, which get their own hook; this one
     * is a backstop should any ever run on the main thread. */
    lua_sethook(p->L, hook, LUA_MASKCOUNT, HOOK_EVERY);
    for (int m = 0; m < NMOD; m++) {
        lt.buf[m] = buf[m];
        lt.len[m] = len[m];
    }
    p->loading = true; /* helpers required while loading are part of the id */
    if (protect(p, "sandbox", load_run, &lt, err) < 0) goto fail;
    p->loading = false;
    snprintf(p->id, sizeof p->id, "%016llx", (unsigned long long)p->hash);
    for (int m = 0; m < NMOD; m++) free(buf[m]);
    return p;
fail:
    for (int m = 0; m < NMOD; m++) free(buf[m]);
    us_policy_free(p);
    return NULL;
}

void us_policy_free(us_policy *p) {
    if (!p) return;
    us_policy_free(p->previous);
    if (p->L) lua_close(p->L);
    us_policy_log_clear(p);
    free(p->log);
    for (size_t i = 0; i < p->nlabels; i++) free(p->labels[i]);
    free(p->labels);
    free(p->dir);
    free(p);
}

void us_policy_set_previous(us_policy *p, us_policy *previous) {
    if (previous) {
        us_policy_free(previous->previous);
        previous->previous = NULL;
    }
    us_policy_free(p->previous);
    p->previous = previous;
}

us_policy *us_policy_previous(const us_policy *p) { return p->previous; }

us_policy *us_policy_take_previous(us_policy *p) {
    us_policy *prev = p->previous;
    p->previous = NULL;
    return prev;
}

void us_policy_set_cycle_deadline(us_policy *p, double deadline, double budget) {
    p->cycle_deadline = deadline;
    p->cycle_budget = budget;
}

unsigned long us_policy_calls(const us_policy *p, us_policy_fn fn) {
    return fn >= 0 && fn < US_POLICY_NFN ? p->calls[fn] : 0;
}

const char *us_policy_dir(const us_policy *p) { return p->dir; }

bool us_policy_file_is_default(const us_policy *p, us_policy_fn fn) {
    return fn >= 0 && fn < US_POLICY_NFN && p->from_default[fn];
}
const char *us_policy_id(const us_policy *p) { return p->id; }

static int seed_run(task *t, lua_State *L, lua_State *co) {
    (void)co;
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->p->seed_ref);
    lua_pushinteger(L, (lua_Integer)*(const uint64_t *)t->ud);
    lua_call(L, 1, 0);
    return 0;
}

void us_policy_seed(us_policy *p, uint64_t seed) {
    /* It can only fail for want of memory; math.random then keeps its
     * previous sequence, which is still deterministic. */
    (void)protect(p, "sandbox", seed_run, &seed, NULL);
}

/* ---- views ------------------------------------------------------------- */

static double gpus(int64_t milli) { return (double)milli / US_GPU_UNIT; }

static void set_str(lua_State *L, const char *key, const char *s) {
    if (!s) return;
    lua_pushstring(L, s);
    lua_setfield(L, -2, key);
}

static void set_int(lua_State *L, const char *key, lua_Integer v) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, key);
}

static void set_bool(lua_State *L, const char *key, bool v) {
    lua_pushboolean(L, v);
    lua_setfield(L, -2, key);
}

/* {gpu = devices (float), cpu = millicores, memory = bytes} */
static void push_res(lua_State *L, us_res r) {
    lua_createtable(L, 0, US_NRES);
    lua_pushnumber(L, gpus(r.v[US_GPU]));
    lua_setfield(L, -2, us_res_names[US_GPU]);
    lua_pushinteger(L, r.v[US_CPU]);
    lua_setfield(L, -2, us_res_names[US_CPU]);
    lua_pushinteger(L, r.v[US_MEM]);
    lua_setfield(L, -2, us_res_names[US_MEM]);
}

/* quotas (limit false) or limits (limit true), same units; -1 stays -1 */
static void push_bounds(lua_State *L, const us_qres *res, bool limit) {
    lua_createtable(L, 0, US_NRES);
    for (int r = 0; r < US_NRES; r++) {
        int64_t v = limit ? res[r].limit : res[r].quota;
        if (v == US_UNLIMITED) lua_pushinteger(L, -1);
        else if (r == US_GPU) lua_pushnumber(L, gpus(v));
        else lua_pushinteger(L, v);
        lua_setfield(L, -2, us_res_names[r]);
    }
}

static void push_labels(lua_State *L, const us_labels *l) {
    lua_createtable(L, 0, l->n > INT_MAX ? 0 : (int)l->n);
    for (size_t i = 0; i < l->n; i++) set_str(L, l->items[i].key, l->items[i].value);
}

/* A list of names (a sequence of strings) on top of L */
static void append_name(lua_State *L, int list, const char *name) {
    lua_pushstring(L, name);
    lua_rawseti(L, list, (lua_Integer)lua_rawlen(L, list) + 1);
}

static int by_queue_name(const void *a, const void *b) {
    const us_fs_queue *x = *(const us_fs_queue *const *)a;
    const us_fs_queue *y = *(const us_fs_queue *const *)b;
    return strcmp(x->name, y->name);
}

static void push_fs_queue(lua_State *L, const us_fs_input *in, const us_fs_queue *q) {
    double w;
    lua_createtable(L, 0, 11);
    set_str(L, "name", q->name);
    if (q->parent >= 0) set_str(L, "parent", in->queues[q->parent].name);
    set_int(L, "priority", q->priority);
    lua_pushnumber(L, q->created_at);
    lua_setfield(L, -2, "created_at");
    push_bounds(L, q->res, false);
    lua_setfield(L, -2, "quota");
    push_bounds(L, q->res, true);
    lua_setfield(L, -2, "limit");
    lua_createtable(L, 0, US_NRES);
    for (int r = 0; r < US_NRES; r++) {
        w = q->res[r].over_quota_weight;
        lua_pushnumber(L, w);
        lua_setfield(L, -2, us_res_names[r]);
    }
    lua_setfield(L, -2, "over_quota_weight");
    push_res(L, q->demand);
    lua_setfield(L, -2, "demand");
    push_res(L, q->allocated);
    lua_setfield(L, -2, "allocated");
    lua_newtable(L);
    lua_setfield(L, -2, "children");
}

/* The fair-share view (policies/fairshare.lua documents it) on top of L. */
static void push_fs_view(lua_State *L, const us_fs_input *in) {
    size_t n = in->nqueues;
    int view, qs, byname;
    const us_fs_queue **sorted = lua_newuserdatauv(L, (n + 1) * sizeof *sorted, 0);

    lua_createtable(L, 0, 4);
    view = lua_gettop(L);
    set_str(L, "pool", in->pool);
    push_res(L, in->capacity);
    lua_setfield(L, view, "capacity");
    lua_createtable(L, n > INT_MAX ? 0 : (int)n, 0);
    qs = lua_gettop(L);
    lua_createtable(L, 0, n > INT_MAX ? 0 : (int)n);
    byname = lua_gettop(L);
    for (size_t i = 0; i < n; i++) {
        push_fs_queue(L, in, &in->queues[i]);
        lua_pushvalue(L, -1);
        lua_setfield(L, byname, in->queues[i].name);
        lua_rawseti(L, qs, (lua_Integer)i + 1);
    }
    /* children lists in name order: the same order builtin.c divides in */
    for (size_t i = 0; i < n; i++) sorted[i] = &in->queues[i];
    qsort(sorted, n, sizeof *sorted, by_queue_name);
    for (size_t i = 0; i < n; i++) {
        if (sorted[i]->parent < 0) continue;
        lua_rawgeti(L, qs, (lua_Integer)sorted[i]->parent + 1);
        lua_getfield(L, -1, "children");
        append_name(L, lua_gettop(L), sorted[i]->name);
        lua_pop(L, 2);
    }
    lua_setfield(L, view, "queues_by_name");
    lua_setfield(L, view, "queues");
    lua_remove(L, view - 1);  /* the scratch userdata */
}

static void push_pod(lua_State *L, const us_pod *pod, const us_workload *wl) {
    lua_createtable(L, 0, 8);
    set_str(L, "name", pod->name);
    set_str(L, "workload", wl->name);
    set_int(L, "priority", wl->priority);
    push_res(L, wl->request);
    lua_setfield(L, -2, "requests");
    push_labels(L, &wl->labels);
    lua_setfield(L, -2, "labels");
}

/* Labels shared between nodes whose label sets are equal: the last few
 * distinct sets are remembered (a pool usually has a handful: zones, node
 * kinds), so a view of 10,000 nodes holds a few label tables, not 10,000. */
static void push_shared_labels(lua_State *L, const us_labels *l, int cache,
                               const us_labels **recent, size_t *nrecent) {
    for (size_t i = 0; i < *nrecent; i++)
        if (us_labels_equal(recent[i], l)) {
            lua_rawgetp(L, cache, recent[i]);
            return;
        }
    push_labels(L, l);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, cache, l);
    if (*nrecent < 8) {
        recent[(*nrecent)++] = l;
    } else {
        memmove(recent, recent + 1, 7 * sizeof *recent);
        recent[7] = l;
    }
}

static void push_pl_pod(lua_State *L, const us_pod_view *v) {
    push_pod(L, v->pod, v->wl);
    set_str(L, "queue", v->queue);
    set_bool(L, "background", v->wl->background);
}

static void push_pl_node(lua_State *L, const us_node_view *v) {
    const us_node *n = v->node;
    lua_createtable(L, 0, 9);
    set_str(L, "name", n->name);
    set_str(L, "pool", n->pool);
    push_labels(L, v->labels ? v->labels : &n->labels);
    lua_setfield(L, -2, "labels");
    push_res(L, n->cap);
    lua_setfield(L, -2, "capacity");
    push_res(L, v->allocated);
    lua_setfield(L, -2, "allocated");
    push_res(L, us_res_sub(n->cap, v->allocated));
    lua_setfield(L, -2, "free");
    set_int(L, "free_gpus", v->free_gpus);
    set_bool(L, "unschedulable", n->unschedulable);
}

/* ---- fair share -------------------------------------------------------- */

typedef struct fs_task {
    const us_fs_input *in;
    double *fair;
} fs_task;

/* Read the result of fairshare.compute (top of L) into fair. */
static int fs_convert(task *t, lua_State *L, const us_fs_input *in, double *fair) {
    int res = lua_gettop(L);
    const char *f = mod_file[FS];

    if (!lua_istable(L, res))
        return us_err_set(t->err, US_EPOLICY, "%s: compute must return a table, got %s", f,
                          luaL_typename(L, res));
    for (size_t i = 0; i < in->nqueues; i++) {
        const char *name = in->queues[i].name;
        lua_pushstring(L, name);
        int ty = lua_rawget(L, res);
        if (ty == LUA_TNIL)
            return us_err_set(t->err, US_EPOLICY, "%s: compute returned no share for queue \"%s\"",
                              f, name);
        if (ty != LUA_TTABLE)
            return us_err_set(t->err, US_EPOLICY, "%s: compute returned a %s for queue \"%s\", "
                              "not a {gpu=, cpu=, memory=} table", f, lua_typename(L, ty), name);
        for (int r = 0; r < US_NRES; r++) {
            lua_pushstring(L, us_res_names[r]);
            ty = lua_rawget(L, -2);
            if (ty != LUA_TNUMBER)
                return us_err_set(t->err, US_EPOLICY, "%s: compute returned a non-number %s share "
                                  "for queue \"%s\" (got %s)", f, us_res_names[r], name,
                                  lua_typename(L, ty));
            double v = lua_tonumber(L, -1);
            if (!isfinite(v))
                return us_err_set(t->err, US_EPOLICY, "%s: compute returned a non-finite %s share "
                                  "for queue \"%s\"", f, us_res_names[r], name);
            fair[i * US_NRES + r] = r == US_GPU ? v * US_GPU_UNIT : v;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    return 0;
}

static int fs_run(task *t, lua_State *L, lua_State *co) {
    fs_task *ft = t->ud;
    if (push_fn(t, L, FS) < 0) return -1;
    view_begin(t->p);
    push_fs_view(L, ft->in);
    view_end(t->p, ft->in->nqueues);
    if (invoke(t, L, co, 1, mod_fn[FS]) < 0) return -1;
    return fs_convert(t, L, ft->in, ft->fair);
}

int us_policy_fairshare(us_policy *p, const us_fs_input *in, double *fair, us_err *err) {
    fs_task ft = {in, fair};
    for (size_t i = 0; i < in->nqueues; i++) {
        int par = in->queues[i].parent;
        if (!in->queues[i].name)
            return us_err_set(err, US_EINVAL, "fair share input: queue %zu has no name", i);
        if (par < -1 || par >= (long long)in->nqueues || (size_t)par == i)
            return us_err_set(err, US_EINVAL, "fair share input: queue \"%s\" has an invalid "
                              "parent (%d)", in->queues[i].name, par);
    }
    return protect(p, mod_file[FS], fs_run, &ft, err);
}

/* ---- placement --------------------------------------------------------- */

typedef struct pl_task {
    const us_pod_view *pod;
    const us_node_view *nodes;
    size_t n;
    double *scores;
} pl_task;

static int pl_run(task *t, lua_State *L, lua_State *co) {
    pl_task *pt = t->ud;
    int fn, pod;

    if (push_fn(t, L, PL) < 0) return -1;
    fn = lua_gettop(L);
    /* one pod table for every node: scoring is the hot loop of a cycle */
    push_pl_pod(L, pt->pod);
    pod = lua_gettop(L);
    for (size_t i = 0; i < pt->n; i++) {
        lua_pushvalue(L, fn);
        lua_pushvalue(L, pod);
        push_pl_node(L, &pt->nodes[i]);
        if (invoke(t, L, co, 2, mod_fn[PL]) < 0) return -1;
        if (lua_type(L, -1) != LUA_TNUMBER || !isfinite(lua_tonumber(L, -1))) {
            char got[64];
            if (lua_type(L, -1) == LUA_TNUMBER) snprintf(got, sizeof got, "%g", lua_tonumber(L, -1));
            else snprintf(got, sizeof got, "%s", luaL_typename(L, -1));
            return us_err_set(t->err, US_EPOLICY, "%s: score must return a finite number, got %s "
                              "(pod \"%s\", node \"%s\")", mod_file[PL], got, pt->pod->pod->name,
                              pt->nodes[i].node->name);
        }
        pt->scores[i] = lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    return 0;
}

int us_policy_score(us_policy *p, const us_pod_view *pod, const us_node_view *nodes, size_t n,
                    double *scores, us_err *err) {
    pl_task pt = {pod, nodes, n, scores};
    unsigned char before[RNG_MAX];
    p->impure = false;
    if (n == 0) return 0;
    if (p->rng) memcpy(before, p->rng, p->rng_len);
    int rc = protect(p, mod_file[PL], pl_run, &pt, err);
    if (!p->rng || memcmp(before, p->rng, p->rng_len) != 0) p->impure = true;
    return rc;
}

bool us_policy_last_call_pure(const us_policy *p) { return !p->impure; }

/* ---- background re-offer ------------------------------------------------ */

typedef struct bg_task {
    const us_bg_input *in;
    bool *keep;
    int *place;
    int nidx, ridx, pidx;   /* private name -> index tables on L's stack */
} bg_task;

/* The field names of the re-offer view.  Each is pushed once per view and
 * set with lua_rawset: lua_setfield would look its C string up again for
 * every field of every table (Lua's string cache compares with strcmp),
 * some two million times in a view of 165,000 running pods. */
enum {
    K_NAME, K_WORKLOAD, K_PRIORITY, K_REQUESTS, K_LABELS, K_NODE, K_CANDIDATES,
    K_CAPACITY, K_FREE, K_FREE_GPUS, K_FREE_AT_END, K_FREE_GPUS_AT_END, K_IDLE, K_IDLE_GPUS,
    K_GPU, K_CPU, K_MEMORY, NKEYS
};
static const char *const bg_keys[NKEYS] = {
    "name", "workload", "priority", "requests", "labels", "node", "candidates",
    "capacity", "free", "free_gpus", "free_at_end", "free_gpus_at_end", "idle", "idle_gpus",
    "gpu", "cpu", "memory",
};

typedef struct bg_builder {
    lua_State *L;
    int keys;   /* stack index of bg_keys[0]; the others follow it */
    int cache;  /* per workload: {requests, labels, name}; per candidate list: names */
    int names;  /* node names by view index: each interned once */
} bg_builder;

/* t[key] = the value on top (popped), t the table below it */
static void bg_set(const bg_builder *b, int key) {
    lua_pushvalue(b->L, b->keys + key);
    lua_insert(b->L, -2);
    lua_rawset(b->L, -3);
}

static void bg_set_int(const bg_builder *b, int key, lua_Integer v) {
    lua_pushinteger(b->L, v);
    bg_set(b, key);
}

/* {gpu = devices (float), cpu = millicores, memory = bytes}, as push_res */
static void bg_push_res(const bg_builder *b, us_res r) {
    lua_createtable(b->L, 0, US_NRES);
    lua_pushnumber(b->L, gpus(r.v[US_GPU]));
    bg_set(b, K_GPU);
    bg_set_int(b, K_CPU, r.v[US_CPU]);
    bg_set_int(b, K_MEMORY, r.v[US_MEM]);
}

/* r as bg_push_res does, or, when it equals same, the table already at
 * field key of the table on top (shared: views are read-only) */
static void bg_push_same_or_res(const bg_builder *b, int key, us_res same, us_res r) {
    if (memcmp(&same, &r, sizeof r) != 0) {
        bg_push_res(b, r);
        return;
    }
    lua_pushvalue(b->L, b->keys + key);
    lua_rawget(b->L, -2);
}

/* A background pod in a re-offer view.  Pods of one workload share one
 * `requests` and one `labels` table and the workload's name string (cached
 * by workload): a view of tens of thousands of pods is built several times
 * faster, and policies see the same values.  The pod's own name is pushed
 * with its length, past Lua's string cache (a miss for every pod). */
static void bg_push_pod(const bg_builder *b, const us_pod *pod, const us_workload *wl) {
    lua_State *L = b->L;
    if (lua_rawgetp(L, b->cache, wl) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_createtable(L, 3, 0);
        push_res(L, wl->request);
        lua_rawseti(L, -2, 1);
        push_labels(L, &wl->labels);
        lua_rawseti(L, -2, 2);
        lua_pushstring(L, wl->name);
        lua_rawseti(L, -2, 3);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, b->cache, wl);
    }
    int entry = lua_gettop(L);
    /* the fields in the order they always had: a policy that walks a pod
     * with pairs() meets them as before */
    lua_createtable(L, 0, 8);
    lua_pushlstring(L, pod->name, strlen(pod->name));
    bg_set(b, K_NAME);
    lua_rawgeti(L, entry, 3);
    bg_set(b, K_WORKLOAD);
    bg_set_int(b, K_PRIORITY, wl->priority);
    lua_rawgeti(L, entry, 1);
    bg_set(b, K_REQUESTS);
    lua_rawgeti(L, entry, 2);
    bg_set(b, K_LABELS);
    lua_remove(L, entry);
}

/* name -> 0-based index, in the table at idx, for the table on top of the
 * stack, whose `name` is already a Lua string */
static void index_own_name(const bg_builder *b, int idx, size_t i) {
    lua_pushvalue(b->L, b->keys + K_NAME);
    lua_rawget(b->L, -2);
    lua_pushinteger(b->L, (lua_Integer)i);
    lua_rawset(b->L, idx);
}

static int table_size(size_t n) { return n > INT_MAX ? 0 : (int)n; }

/* The re-offer view (policies/background.lua documents it) on top of L.
 * Also leaves three private name -> index tables below it, which the
 * conversion reads: the policy may have changed the view's own. */
static void push_bg_view(lua_State *L, bg_task *bt) {
    const us_bg_input *in = bt->in;
    int view, list, byname;
    const us_bg_node *last_cap = NULL;
    const us_labels *recent[8] = {0};  /* label sets pushed lately, keyed in cache */
    size_t nrecent = 0;
    bg_builder b = {L, 0, 0, 0};

    lua_createtable(L, 0, table_size(in->nnodes));
    bt->nidx = lua_gettop(L);
    lua_createtable(L, 0, table_size(in->nrunning));
    bt->ridx = lua_gettop(L);
    lua_createtable(L, 0, table_size(in->npending));
    bt->pidx = lua_gettop(L);

    luaL_checkstack(L, NKEYS + 16, "re-offer view");
    b.keys = lua_gettop(L) + 1;
    for (int k = 0; k < NKEYS; k++) lua_pushstring(L, bg_keys[k]);
    lua_newtable(L);
    b.cache = lua_gettop(L);
    lua_createtable(L, table_size(in->nnodes), 0);
    b.names = lua_gettop(L);

    lua_createtable(L, 0, 4);
    view = lua_gettop(L);
    lua_createtable(L, table_size(in->nnodes), 0);
    list = lua_gettop(L);
    lua_createtable(L, 0, table_size(in->nnodes));
    byname = lua_gettop(L);
    for (size_t k = 0; k < in->nnodes; k++) {
        const us_bg_node *bn = &in->nodes[k];
        lua_createtable(L, 0, 9);
        lua_pushstring(L, bn->node->name);
        lua_pushvalue(L, -1);
        lua_rawseti(L, b.names, (lua_Integer)k + 1);
        bg_set(&b, K_NAME);
        push_shared_labels(L, bn->labels ? bn->labels : &bn->node->labels, b.cache, recent, &nrecent);
        bg_set(&b, K_LABELS);
        /* nodes of one kind share one capacity table */
        if (k == 0 || memcmp(&bn->node->cap, &in->nodes[k - 1].node->cap, sizeof bn->node->cap)) {
            bg_push_res(&b, bn->node->cap);
            lua_pushvalue(L, -1);
            lua_rawsetp(L, b.cache, &in->nodes[k]);  /* keyed by this node: reused while equal */
            last_cap = &in->nodes[k];
        } else {
            lua_rawgetp(L, b.cache, last_cap);
        }
        bg_set(&b, K_CAPACITY);
        /* a node no offered pod runs on, with nothing terminating or
         * pipelined there (most candidates of a pending pod), has one
         * room for all three: they share its `free` table */
        bg_push_res(&b, bn->free);
        bg_set(&b, K_FREE);
        bg_set_int(&b, K_FREE_GPUS, bn->free_gpus);
        bg_push_same_or_res(&b, K_FREE, bn->free, bn->free_at_end);
        bg_set(&b, K_FREE_AT_END);
        bg_set_int(&b, K_FREE_GPUS_AT_END, bn->free_gpus_at_end);
        bg_push_same_or_res(&b, K_FREE, bn->free, bn->idle);
        bg_set(&b, K_IDLE);
        bg_set_int(&b, K_IDLE_GPUS, bn->idle_gpus);
        /* nodes_by_name[name] = node, and the private index of name */
        lua_rawgeti(L, b.names, (lua_Integer)k + 1);
        lua_pushvalue(L, -1);
        lua_pushvalue(L, -3);
        lua_rawset(L, byname);
        lua_pushinteger(L, (lua_Integer)k);
        lua_rawset(L, bt->nidx);
        lua_rawseti(L, list, (lua_Integer)k + 1);
    }
    lua_setfield(L, view, "nodes_by_name");
    lua_setfield(L, view, "nodes");

    lua_createtable(L, table_size(in->nrunning), 0);
    list = lua_gettop(L);
    for (size_t i = 0; i < in->nrunning; i++) {
        const us_bg_pod *bp = &in->running[i];
        bg_push_pod(&b, bp->pod, bp->wl);
        lua_rawgeti(L, b.names, (lua_Integer)bp->node + 1);
        bg_set(&b, K_NODE);
        index_own_name(&b, bt->ridx, i);
        lua_rawseti(L, list, (lua_Integer)i + 1);
    }
    lua_setfield(L, view, "running");

    lua_createtable(L, table_size(in->npending), 0);
    list = lua_gettop(L);
    for (size_t j = 0; j < in->npending; j++) {
        const us_bg_pod *bp = &in->pending[j];
        bg_push_pod(&b, bp->pod, bp->wl);
        /* pods given the same candidate array share one list */
        if (lua_rawgetp(L, b.cache, bp->candidates) != LUA_TTABLE) {
            lua_pop(L, 1);
            lua_createtable(L, table_size(bp->ncandidates), 0);
            for (size_t c = 0; c < bp->ncandidates; c++) {
                lua_rawgeti(L, b.names, (lua_Integer)bp->candidates[c] + 1);
                lua_rawseti(L, -2, (lua_Integer)c + 1);
            }
            lua_pushvalue(L, -1);
            lua_rawsetp(L, b.cache, bp->candidates);
        }
        bg_set(&b, K_CANDIDATES);
        index_own_name(&b, bt->pidx, j);
        lua_rawseti(L, list, (lua_Integer)j + 1);
    }
    lua_setfield(L, view, "pending");
    /* the keys, the cache and the names go; the view stays on top */
    lua_rotate(L, b.keys, -(NKEYS + 2));
    lua_pop(L, NKEYS + 2);
}

/* Index that name has in the private table at idx, or -1. */
static long lookup(lua_State *L, int idx, int name) {
    long i = -1;
    lua_pushvalue(L, name);
    if (lua_rawget(L, idx) == LUA_TNUMBER) i = (long)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return i;
}

static int bg_keep(task *t, bg_task *bt, lua_State *L, int keep) {
    const char *f = mod_file[BG];
    lua_Integer n = (lua_Integer)lua_rawlen(L, keep);
    for (lua_Integer i = 1; i <= n; i++) {
        int ty = lua_rawgeti(L, keep, i);
        if (ty != LUA_TSTRING)
            return us_err_set(t->err, US_EPOLICY, "%s: reoffer keep[%lld] must be a pod name, got %s",
                              f, (long long)i, lua_typename(L, ty));
        long r = lookup(L, bt->ridx, lua_gettop(L));
        if (r < 0)
            return us_err_set(t->err, US_EPOLICY, "%s: reoffer kept \"%s\", which is not a running "
                              "background pod", f, lua_tostring(L, -1));
        bt->keep[r] = true;
        lua_pop(L, 1);
    }
    return 0;
}

static int bg_place(task *t, bg_task *bt, lua_State *L, int place) {
    const us_bg_input *in = bt->in;
    const char *f = mod_file[BG];
    const char *stray = NULL, *stray_type = NULL;
    size_t matched = 0, keys = 0;

    /* In input order, so the first error reported is the same every run. */
    for (size_t j = 0; j < in->npending; j++) {
        const us_bg_pod *bp = &in->pending[j];
        lua_pushstring(L, bp->pod->name);
        int ty = lua_rawget(L, place);
        if (ty == LUA_TNIL) {
            lua_pop(L, 1);
            continue;
        }
        if (ty != LUA_TSTRING)
            return us_err_set(t->err, US_EPOLICY, "%s: reoffer place[\"%s\"] must be a node name, "
                              "got %s", f, bp->pod->name, lua_typename(L, ty));
        long k = lookup(L, bt->nidx, lua_gettop(L));
        if (k < 0)
            return us_err_set(t->err, US_EPOLICY, "%s: reoffer placed pod \"%s\" on \"%s\", which "
                              "is not a node", f, bp->pod->name, lua_tostring(L, -1));
        /* candidate lists are in ascending order (policy.h) */
        size_t lo = us_ints_below(bp->candidates, bp->ncandidates, k);
        if (lo == bp->ncandidates || bp->candidates[lo] != k)
            return us_err_set(t->err, US_EPOLICY, "%s: reoffer placed pod \"%s\" on node \"%s\", "
                              "which is not among its candidates", f, bp->pod->name,
                              lua_tostring(L, -1));
        bt->place[j] = (int)k;
        matched++;
        lua_pop(L, 1);
    }

    /* Any other key names no pending pod.  Report the least such name, so
     * the message does not depend on the table's iteration order. */
    lua_pushnil(L);
    while (lua_next(L, place)) {
        keys++;
        if (lua_type(L, -2) != LUA_TSTRING) {
            stray_type = luaL_typename(L, -2);
        } else if (lookup(L, bt->pidx, lua_gettop(L) - 1) < 0) {
            const char *s = lua_tostring(L, -2);  /* kept alive by the table */
            if (!stray || strcmp(s, stray) < 0) stray = s;
        }
        lua_pop(L, 1);
    }
    if (stray)
        return us_err_set(t->err, US_EPOLICY, "%s: reoffer placed \"%s\", which is not a pending "
                          "background pod", f, stray);
    if (stray_type || keys != matched)
        return us_err_set(t->err, US_EPOLICY, "%s: reoffer place has a %s key; keys must be pending "
                          "pod names", f, stray_type ? stray_type : "stray");
    return 0;
}

static int bg_convert(task *t, bg_task *bt, lua_State *L) {
    int res = lua_gettop(L), ty;
    const char *f = mod_file[BG];

    for (size_t i = 0; i < bt->in->nrunning; i++) bt->keep[i] = false;
    for (size_t j = 0; j < bt->in->npending; j++) bt->place[j] = -1;
    if (!lua_istable(L, res))
        return us_err_set(t->err, US_EPOLICY, "%s: reoffer must return a table, got %s", f,
                          luaL_typename(L, res));
    /* a missing list is an empty one: a policy that keeps nothing may say so */
    lua_pushliteral(L, "keep");
    ty = lua_rawget(L, res);
    if (ty != LUA_TNIL && ty != LUA_TTABLE)
        return us_err_set(t->err, US_EPOLICY, "%s: reoffer keep must be a list of pod names, got %s",
                          f, lua_typename(L, ty));
    if (ty == LUA_TTABLE && bg_keep(t, bt, L, lua_gettop(L)) < 0) return -1;
    lua_pushliteral(L, "place");
    ty = lua_rawget(L, res);
    if (ty != LUA_TNIL && ty != LUA_TTABLE)
        return us_err_set(t->err, US_EPOLICY, "%s: reoffer place must be a table of pod name = node "
                          "name, got %s", f, lua_typename(L, ty));
    if (ty == LUA_TTABLE && bg_place(t, bt, L, lua_gettop(L)) < 0) return -1;
    return 0;
}

static int bg_run(task *t, lua_State *L, lua_State *co) {
    bg_task *bt = t->ud;
    int view;
    view_begin(t->p);
    push_bg_view(L, bt);
    view_end(t->p, bt->in->nnodes + bt->in->nrunning + bt->in->npending);
    view = lua_gettop(L);
    if (push_fn(t, L, BG) < 0) return -1;
    lua_pushvalue(L, view);
    if (invoke(t, L, co, 1, mod_fn[BG]) < 0) return -1;
    return bg_convert(t, bt, L);
}

int us_policy_reoffer(us_policy *p, const us_bg_input *in, bool *keep, int *place, us_err *err) {
    bg_task bt = {in, keep, place, 0, 0, 0};
    for (size_t i = 0; i < in->nrunning; i++)
        if (in->running[i].node < 0 || (size_t)in->running[i].node >= in->nnodes)
            return us_err_set(err, US_EINVAL, "re-offer input: running pod \"%s\" is on no listed "
                              "node", in->running[i].pod->name);
    for (size_t j = 0; j < in->npending; j++) {
        /* pods often share one list: check each list once */
        if (j > 0 && in->pending[j].candidates == in->pending[j - 1].candidates) continue;
        for (size_t c = 0; c < in->pending[j].ncandidates; c++)
            if (in->pending[j].candidates[c] < 0 ||
                (size_t)in->pending[j].candidates[c] >= in->nnodes ||
                (c > 0 && in->pending[j].candidates[c] <= in->pending[j].candidates[c - 1]))
                return us_err_set(err, US_EINVAL, "re-offer input: pending pod \"%s\" has a "
                                  "candidate list that is not ascending listed nodes",
                                  in->pending[j].pod->name);
    }
    return protect(p, mod_file[BG], bg_run, &bt, err);
}
