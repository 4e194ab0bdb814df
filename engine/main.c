/*
 * main.c — the `understory` command line: parses arguments, finds the
 * policies, and hands over to the loader, the simulator and the renderer.
 *
 * Owns only argument parsing, locating files and the exit status.  It must
 * never schedule, interpret a scenario or format output itself; those belong
 * to scenario.c, sim.c, output.c, check.c, diff.c and watch.c, and the
 * reading of Kubernetes objects to kube/objects.c.
 *
 * Exit status: 0 success; 1 the simulation or its output failed, or (check)
 * a policy failed a check; 2 bad usage, a scenario that does not load, or
 * (simulate, diff) policies that do not load.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "diff.h"
#include "figures.h"
#include "objects.h"
#include "readfile.h"
#include "output.h"
#include "policy.h"
#include "report.h"
#include "scenario.h"
#include "statejson.h"
#include "serve.h"
#include "sim.h"
#include "watch.h"

#define EXIT_USAGE 2
#define PATH_BUF 4096

static void usage(FILE *f) {
    fputs("usage: understory <command> [options]\n"
          "\n"
          "commands:\n"
          "  simulate FILE    run a scenario in virtual time and report what the\n"
          "                   scheduler decided, cycle by cycle (--watch: again on\n"
          "                   every save)\n"
          "  check DIR        lint a policy directory: syntax, required functions and\n"
          "                   the result contract on a scenario; exit 0 only if all pass\n"
          "  diff --from DIR --to DIR FILE\n"
          "                   run two policy versions on one scenario and show the\n"
          "                   decisions and summary figures that differ\n"
          "  serve            connect to a Kubernetes cluster and keep its nodes and\n"
          "                   queues in the engine's view (README: Kubernetes)\n"
          "  import FILE      turn a Kubernetes List (kubectl get nodes,pods,namespaces,\n"
          "                   queues,podgroups,priorityclasses -A -o json) into a\n"
          "                   scenario document on stdout\n"
          "\n"
          "options:\n"
          "  -h, --help       show this help\n"
          "  --version        print the version\n"
          "\n"
          "Run 'understory <command> --help' for a command's options.  The scenario\n"
          "format and the output document: docs/scenario.md in the repository.\n",
          f);
}

/* Options every command that runs policies takes. */
#define POLICY_OPTION_HELP                                                               \
    "  --plain-ties          plain invisible planning: new AI pods stay where\n"         \
    "                        placement put them (ties by node name); by default\n"       \
    "                        they may move to an identical node where they displace\n"   \
    "                        less background work\n"                                     \
    "  --check-invariants    check the engine's invariants after every cycle; a\n"       \
    "                        broken one stops the run with an error naming it\n"         \
    "  --full-cycles         every cycle recomputes everything instead of reusing\n"     \
    "                        what the last one left (the same output; to compare)\n"    \
    "  --long-grace SECONDS  warn about background pods whose termination grace\n"       \
    "                        exceeds SECONDS, since it delays AI work (default %g)\n"    \
    "  --instructions N      Lua instructions a policy call may run (default\n"          \
    "                        10000000)\n"                                                \
    "  --memory BYTES        Lua heap the policies may use, in bytes or as a\n"          \
    "                        quantity such as 64Mi (default 64Mi)\n"                    \
    "  --time-limit MS       wall-clock milliseconds a policy call may take\n"          \
    "                        (default 500)\n"                                           \
    "  --cycle-budget SECONDS  wall-clock seconds a whole cycle's policy calls may\n"  \
    "                        run to; past it the rest of the cycle uses the\n"          \
    "                        built-in policies, with a warning (default %g)\n"

/* The line after an error in a scenario's content: where the format is. */
#define FORMAT_HINT "understory: the scenario format: docs/scenario.md\n"

static void usage_simulate(FILE *f) {
    us_sim_opts d;
    us_sim_opts_default(&d);
    fprintf(f,
            "usage: understory simulate FILE [options]\n"
            "\n"
            "Runs the scenario FILE (JSON) cycle by cycle in virtual time and prints\n"
            "what the scheduler decided: a readable account by default, or the JSON\n"
            "output document with --json.  The same input always gives the same\n"
            "output.  docs/scenario.md in the repository describes every field of\n"
            "the scenario and of the output document.\n"
            "\n"
            "options:\n"
            "  --json                print the JSON output document instead of text\n"
            "  --timings             print wall-clock figures (load, cycles by phase,\n"
            "                        output) to stderr; stdout is unchanged\n"
            "  --verbose             list every decision and pod on a line of its own\n"
            "                        (default: rolled up per workload and node)\n"
            "  --report FILE         also write an HTML report to FILE: the figures, GPU\n"
            "                        use per pool, evictions, pending pods, queues\n"
            "                        against fair share, a per-node heat strip (one\n"
            "                        self-contained page, no script, nothing fetched)\n"
            "  --csv DIR             also write the per-cycle figures (pools.csv,\n"
            "                        queues.csv, nodes.csv) and the run's (summary.csv)\n"
            "                        to DIR, created when missing\n"
            "  --policies DIR        load fairshare.lua, placement.lua and background.lua\n"
            "                        from DIR; default: policies/ next to the executable,\n"
            "                        then ../share/understory/policies relative to it,\n"
            "                        then ./policies\n"
            POLICY_OPTION_HELP
            "  --watch               after the run, watch FILE, the policy files and the\n"
            "                        directories the timeline reloads from; on every save\n"
            "                        run again and print what changed in the decisions\n"
            "                        and the summary since the run before (with --json:\n"
            "                        the output document, then diff documents)\n"
            "  --watch-max-runs N    with --watch: stop after N runs (for scripts and\n"
            "                        tests; default: until interrupted)\n"
            "  -h, --help            show this help\n"
            "\n"
            "exit status: 0 done; 1 the simulation failed; 2 bad usage, or a scenario or\n"
            "policies that do not load.\n",
            d.cycle.long_grace, d.cycle.cycle_budget);
}

static void usage_check(FILE *f) {
    us_sim_opts d;
    us_sim_opts_default(&d);
    fprintf(f,
            "usage: understory check DIR [options]\n"
            "\n"
            "Lints the policy directory DIR before it goes live: the syntax of\n"
            "fairshare.lua, placement.lua and background.lua (those DIR does not hold\n"
            "are the defaults); that each returns a table with its function (compute,\n"
            "score, reoffer); that the score does not depend on node or pod names (the\n"
            "same decisions with every (pod, node) pair scored on its own); and the\n"
            "result contract: the policy alone runs a scenario, and every call that\n"
            "fails or result that breaks a scheduling rule is a problem, reported as\n"
            "path:line: message.  DIR is a directory: a file there is a usage error.\n"
            "\n"
            "options:\n"
            "  --scenario FILE       check the contract on FILE; default: a built-in\n"
            "                        scenario that calls every function (it is also run\n"
            "                        when FILE leaves a function uncalled)\n"
            POLICY_OPTION_HELP
            "  -h, --help            show this help\n"
            "\n"
            "exit status: 0 every check passed; 1 a check failed; 2 bad usage, or a\n"
            "scenario that does not load.\n",
            d.cycle.long_grace, d.cycle.cycle_budget);
}

static void usage_diff(FILE *f) {
    us_sim_opts d;
    us_sim_opts_default(&d);
    fprintf(f,
            "usage: understory diff --from DIR --to DIR FILE [options]\n"
            "\n"
            "Runs the scenario FILE once with the policies in each DIR (timeline reloads\n"
            "ignored) and prints the decisions that differ, cycle by cycle (- only\n"
            "with --from, + only with --to), then the summary figures of both and the\n"
            "change: evictions by action, AI pods pending, policy warnings, and the\n"
            "fair share of every queue at the end.\n"
            "\n"
            "options:\n"
            "  --from DIR            the policies in force (the baseline)\n"
            "  --to DIR              the policies to compare with them\n"
            "  --json                print the comparison as a JSON document\n"
            POLICY_OPTION_HELP
            "  -h, --help            show this help\n"
            "\n"
            "exit status: 0 done, whether or not anything differs; 1 a simulation\n"
            "failed; 2 bad usage, or a scenario or policies that do not load.\n",
            d.cycle.long_grace, d.cycle.cycle_budget);
}

/* Short forms for errors: the full help would bury the message. */
static void brief_usage(FILE *f) {
    fputs("usage: understory simulate FILE [options]\n"
          "       understory check DIR [--scenario FILE] [options]\n"
          "       understory diff --from DIR --to DIR FILE [--json] [options]\n"
          "       understory --help | --version\n"
          "Run 'understory --help' for more.\n",
          f);
}

static void brief_usage_simulate(FILE *f) {
    fputs("usage: understory simulate FILE [--json] [--verbose] [--timings] [--csv DIR]\n"
          "                           [--report FILE] [--policies DIR] [--plain-ties] [--full-cycles]\n"
          "                           [--long-grace SECONDS] [--instructions N] [--memory BYTES]\n"
          "                           [--time-limit MS] [--cycle-budget SECONDS]\n"
          "                           [--watch [--watch-max-runs N]]\n"
          "Run 'understory simulate --help' for what each option does.\n",
          f);
}

static void brief_usage_check(FILE *f) {
    fputs("usage: understory check DIR [--scenario FILE] [--plain-ties] [--long-grace SECONDS]\n"
          "                           [--instructions N] [--memory BYTES] [--time-limit MS]\n"
          "                           [--cycle-budget SECONDS]\n"
          "Run 'understory check --help' for what each option does.\n",
          f);
}

static void brief_usage_diff(FILE *f) {
    fputs("usage: understory diff --from DIR --to DIR FILE [--json] [--plain-ties]\n"
          "                       [--long-grace SECONDS] [--instructions N] [--memory BYTES]\n"
          "                       [--time-limit MS] [--cycle-budget SECONDS]\n"
          "Run 'understory diff --help' for what each option does.\n",
          f);
}

static int bad_usage(void (*show)(FILE *), const char *fmt, const char *arg) {
    fputs("understory: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    show(stderr);
    return EXIT_USAGE;
}

static bool policy_dir_ok(const char *dir) {
    char path[PATH_BUF];
    int n = snprintf(path, sizeof path, "%s/fairshare.lua", dir);
    return n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0;
}

/* The default policies directory (see usage_simulate), copied into out. */
static int find_policies(char *out, size_t n) {
    char exe[PATH_BUF];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        static const char *const rel[] = {"policies", "../share/understory/policies"};
        for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
            int k = snprintf(out, n, "%s/%s", exe, rel[i]);
            if (k > 0 && (size_t)k < n && policy_dir_ok(out)) return 0;
        }
    }
    snprintf(out, n, "policies");
    return policy_dir_ok(out) ? 0 : -1;
}

/* --name VALUE or --name=VALUE.  Returns the value (advancing *i past it),
 * or NULL when argv[*i] is not this option; *missing when it has no value. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, bool *missing) {
    size_t len = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, len) != 0) return NULL;
    if (a[len] == '=') return a + len + 1;
    if (a[len] != '\0') return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

static int parse_seconds(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < 0) return -1;
    *out = v;
    return 0;
}

static int parse_count(const char *s, uint64_t *out) {
    char *end;
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || v == 0) return -1;
    *out = v;
    return 0;
}

/* Wall-clock figures go to stderr, so stdout stays the same for the same
 * input, byte for byte. */
static void print_timings(const us_sim_result *res, const us_cycle_profile *p, double load,
                          double run, double output) {
    fprintf(stderr,
            "timings: load %.3f s (scenario and policies), %zu cycles %.3f s (%.3f s a cycle), "
            "output %.3f s\n"
            "  phases: snapshot+evict %.3f  fairshare %.3f  allocate %.3f  "
            "reclaim+preempt %.3f  re-offer %.3f  commit %.3f s\n"
            "  policies: %llu Lua calls, %.3f s\n",
            load, res->ncycles, run, res->ncycles ? run / (double)res->ncycles : 0, output,
            p->snapshot, p->fairshare, p->allocate, p->victims, p->reoffer, p->commit,
            p->policy_calls, p->policy_seconds);
}

/* The progress line: on stderr, only when it is a terminal and the run has
 * taken longer than a while (UNDERSTORY_PROGRESS_AFTER seconds, default 1),
 * redrawn at most ten times a second and erased at the end, so stdout and
 * a redirected stderr stay the same for the same input. */
typedef struct progress {
    const char *file;
    double start, after, last;
    bool shown;
} progress;

static void progress_cycle(void *ctx, int cycle, double time, int most) {
    progress *p = ctx;
    double now = us_cycle_clock();
    if (now - p->start < p->after || (p->shown && now - p->last < 0.1)) return;
    fprintf(stderr, "\r%s: cycle %d of at most %d, t=%gs", p->file, cycle, most, time);
    fflush(stderr);
    p->last = now;
    p->shown = true;
}

static void progress_end(progress *p) {
    if (p->shown) fputs("\r\033[K", stderr);
}

static void progress_start(progress *p, const char *file, us_sim_opts *o) {
    memset(p, 0, sizeof *p);
    if (!isatty(STDERR_FILENO)) return;
    const char *env = getenv("UNDERSTORY_PROGRESS_AFTER");
    p->file = file;
    p->start = us_cycle_clock();
    p->after = 1.0;
    if (env && parse_seconds(env, &p->after) < 0) p->after = 1.0;
    o->progress = progress_cycle;
    o->progress_ctx = p;
}

/* Everything a command line may say; each command reads its part. */
typedef struct cli {
    const char *file;           /* simulate, diff: the scenario; check: DIR */
    const char *policies;
    const char *scenario;       /* check --scenario */
    const char *csv;            /* simulate --csv DIR */
    const char *report;         /* simulate --report FILE */
    const char *from, *to;      /* diff */
    bool json, watch, timings, verbose;
    uint64_t max_runs;
    us_sim_opts sim;
} cli;

/* Which options a command takes. */
enum { O_JSON = 1, O_POLICIES = 2, O_WATCH = 4, O_SCENARIO = 8, O_FROM_TO = 16, O_TIMINGS = 32, O_OUTPUTS = 64 };

/* Parses argv[2..] for a command taking the options in `allowed` and one
 * positional argument (what: the message when it is missing; one: what
 * there is one of).  Returns -1 to go on, or an exit status
 * (0 after --help). */
static int parse(int argc, char **argv, int allowed, const char *what, const char *one,
                 void (*help)(FILE *), void (*brief)(FILE *), cli *c) {
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        bool missing = false;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if ((allowed & O_JSON) && !strcmp(a, "--json")) {
            c->json = true;
        } else if ((allowed & O_WATCH) && !strcmp(a, "--watch")) {
            c->watch = true;
        } else if ((allowed & O_TIMINGS) && !strcmp(a, "--timings")) {
            c->timings = true;
        } else if (!strcmp(a, "--plain-ties")) {
            c->sim.cycle.background_aware_ties = false;
        } else if (!strcmp(a, "--full-cycles")) {
            c->sim.cycle.full_cycles = true;
        } else if (!strcmp(a, "--check-invariants")) {
            c->sim.cycle.check_invariants = true;
        } else if ((allowed & O_POLICIES) && (v = opt_value(argc, argv, &i, "--policies", &missing))) {
            if (!*v) return bad_usage(brief, "%s: needs a directory", "--policies");
            c->policies = v;
        } else if ((allowed & O_OUTPUTS) && !strcmp(a, "--verbose")) {
            c->verbose = true;
        } else if ((allowed & O_OUTPUTS) && (v = opt_value(argc, argv, &i, "--report", &missing))) {
            if (!*v) return bad_usage(brief, "%s: needs a file", "--report");
            c->report = v;
        } else if ((allowed & O_OUTPUTS) && (v = opt_value(argc, argv, &i, "--csv", &missing))) {
            if (!*v) return bad_usage(brief, "%s: needs a directory", "--csv");
            c->csv = v;
        } else if ((allowed & O_SCENARIO) && (v = opt_value(argc, argv, &i, "--scenario", &missing))) {
            if (!*v) return bad_usage(brief, "%s: needs a file", "--scenario");
            c->scenario = v;
        } else if ((allowed & O_FROM_TO) && (v = opt_value(argc, argv, &i, "--from", &missing))) {
            if (!*v) return bad_usage(brief, "%s: needs a directory", "--from");
            c->from = v;
        } else if ((allowed & O_FROM_TO) && (v = opt_value(argc, argv, &i, "--to", &missing))) {
            if (!*v) return bad_usage(brief, "%s: needs a directory", "--to");
            c->to = v;
        } else if ((allowed & O_WATCH) && (v = opt_value(argc, argv, &i, "--watch-max-runs", &missing))) {
            if (parse_count(v, &c->max_runs) < 0 || c->max_runs > INT_MAX)
                return bad_usage(brief, "--watch-max-runs: \"%s\" is not a positive integer", v);
        } else if ((v = opt_value(argc, argv, &i, "--long-grace", &missing))) {
            if (parse_seconds(v, &c->sim.cycle.long_grace) < 0)
                return bad_usage(brief, "--long-grace: \"%s\" is not a number of seconds (>= 0)", v);
        } else if ((v = opt_value(argc, argv, &i, "--instructions", &missing))) {
            if (parse_count(v, &c->sim.limits.instructions) < 0)
                return bad_usage(brief, "--instructions: \"%s\" is not a positive integer", v);
        } else if ((v = opt_value(argc, argv, &i, "--cycle-budget", &missing))) {
            double secs;
            if (parse_seconds(v, &secs) < 0 || secs <= 0)
                return bad_usage(brief, "--cycle-budget: \"%s\" is not a positive number of seconds", v);
            c->sim.cycle.cycle_budget = secs;
        } else if ((v = opt_value(argc, argv, &i, "--time-limit", &missing))) {
            uint64_t ms;
            if (parse_count(v, &ms) < 0 || ms > ULONG_MAX)
                return bad_usage(brief, "--time-limit: \"%s\" is not a positive number of milliseconds", v);
            c->sim.limits.time_ms = (unsigned long)ms;
        } else if ((v = opt_value(argc, argv, &i, "--memory", &missing))) {
            int64_t bytes;
            if (us_parse_memory(v, &bytes) < 0 || bytes <= 0)
                return bad_usage(brief, "--memory: \"%s\" is not a positive number of bytes", v);
            c->sim.limits.memory = (size_t)bytes;
        } else if (missing) {
            return bad_usage(brief, "%s needs a value", a);
        } else if (a[0] == '-' && a[1] != '\0') {
            return bad_usage(brief, "unknown option %s", a);
        } else if (c->file) {
            fprintf(stderr, "understory: unexpected argument \"%s\" (%s at a time)\n", a, one);
            brief(stderr);
            return EXIT_USAGE;
        } else {
            c->file = a;
        }
    }
    if (!c->file) return bad_usage(brief, "%s", what);
    return -1;
}

/* --policies DIR, or the default directory; 0, or -1 with a message. */
static int policies_dir(const cli *c, char *dir, size_t n) {
    if (c->policies) {
        snprintf(dir, n, "%s", c->policies);
        return 0;
    }
    if (find_policies(dir, n) == 0) return 0;
    fprintf(stderr,
            "understory: no policies directory found (looked next to the executable, in "
            "../share/understory/policies and in ./policies); use --policies DIR\n");
    return -1;
}

static int simulate(int argc, char **argv) {
    int status = EXIT_USAGE;
    cli c = {0};
    us_scenario sc;
    us_sim_result res;
    us_policy *pol = NULL;
    us_err err = {0};
    char dir[PATH_BUF];
    bool loaded = false, ran = false;

    memset(&sc, 0, sizeof sc);
    memset(&res, 0, sizeof res);
    us_sim_opts_default(&c.sim);
    int rc = parse(argc, argv, O_JSON | O_POLICIES | O_WATCH | O_TIMINGS | O_OUTPUTS, "simulate: missing the scenario FILE",
                   "one scenario", usage_simulate, brief_usage_simulate, &c);
    if (rc >= 0) {
        status = rc;
        goto cleanup;
    }
    if (c.max_runs && !c.watch) {
        status = bad_usage(brief_usage_simulate, "%s only goes with --watch", "--watch-max-runs");
        goto cleanup;
    }
    if ((c.csv || c.report) && c.watch) {
        status = bad_usage(brief_usage_simulate, "%s does not go with --watch", c.csv ? "--csv" : "--report");
        goto cleanup;
    }
    if (policies_dir(&c, dir, sizeof dir) < 0) goto cleanup;
    c.sim.policy_dir = dir;

    if (c.watch) {
        /* files that do not load are reported and watched until they do */
        us_watch_opts wo;
        us_watch_opts_default(&wo);
        wo.scenario = c.file;
        wo.policy_dir = dir;
        wo.sim = c.sim;
        wo.json = c.json;
        wo.verbose = c.verbose;
        wo.max_runs = (int)c.max_runs;
        status = EXIT_FAILURE;
        if (us_watch_run(stdout, &wo, &err) < 0) {
            fprintf(stderr, "understory: %s\n", err.msg);
            goto cleanup;
        }
        status = EXIT_SUCCESS;
        goto cleanup;
    }

    us_cycle_profile prof = {0};
    double t_start = us_cycle_clock(), t_loaded = 0, t_ran = 0;
    if (c.timings) c.sim.cycle.profile = &prof;
    if (us_scenario_load_file(&sc, c.file, &err) < 0) {
        /* a read error already names the file */
        if (err.code == US_EIO)
            fprintf(stderr, "understory: %s\n", err.msg);
        else
            fprintf(stderr, "understory: %s: %s\n%s", c.file, err.msg, FORMAT_HINT);
        goto cleanup;
    }
    loaded = true;
    if (!(pol = us_policy_load(dir, &c.sim.limits, &err))) {
        fprintf(stderr, "understory: policies %s: %s\n", dir, err.msg);
        goto cleanup;
    }

    status = EXIT_FAILURE;
    ran = true;
    t_loaded = us_cycle_clock();
    progress prog;
    progress_start(&prog, c.file, &c.sim);
    rc = us_sim_run(&sc, pol, &c.sim, &res, &err);
    progress_end(&prog);
    if (rc < 0) {
        fprintf(stderr, "understory: %s: simulation failed: %s\n", c.file, err.msg);
        goto cleanup;
    }
    t_ran = us_cycle_clock();
    rc = c.json ? us_output_json(stdout, &res, &sc.state, &err)
                : us_output_account(stdout, &res, &sc.state, c.verbose, &err);
    if (rc == 0 && c.csv) rc = us_fig_csv(c.csv, &res, &sc.state, &err);
    if (rc == 0 && c.report) rc = us_report_write(c.report, &res, &sc.state, &err);
    if (rc < 0) {
        fprintf(stderr, "understory: %s\n", err.msg);
        goto cleanup;
    }
    if (c.timings) print_timings(&res, &prof, t_loaded - t_start, t_ran - t_loaded,
                                 us_cycle_clock() - t_ran);
    status = EXIT_SUCCESS;
cleanup:
    if (ran) us_sim_result_free(&res);
    if (pol) us_policy_free(pol);
    if (loaded) us_scenario_free(&sc);
    return status;
}

static int check(int argc, char **argv) {
    cli c = {0};
    us_check_opts o;
    us_err err = {0};

    us_sim_opts_default(&c.sim);
    int rc = parse(argc, argv, O_SCENARIO, "check: missing the policy directory DIR",
                   "one policy directory", usage_check,
                   brief_usage_check, &c);
    if (rc >= 0) return rc;
    struct stat sb;
    if (stat(c.file, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        fprintf(stderr,
                "understory: check: %s is a file, not a policy directory: check takes the directory "
                "that holds the policy files (understory check DIR), and a scenario to check them on "
                "with --scenario FILE\n",
                c.file);
        brief_usage_check(stderr);
        return EXIT_USAGE;
    }
    us_check_opts_default(&o);
    o.scenario = c.scenario;
    o.limits = c.sim.limits;
    o.cycle = c.sim.cycle;
    int problems = us_check_dir(stdout, c.file, &o, &err);
    fflush(stdout);
    if (problems < 0) {
        if (err.code == US_ENOMEM) {
            fprintf(stderr, "understory: check %s: %s\n", c.file, err.msg);
            return EXIT_FAILURE;
        }
        /* the scenario did not load: the check could not run */
        if (err.code == US_EIO) fprintf(stderr, "understory: %s\n", err.msg);
        else fprintf(stderr, "understory: %s: %s\n%s", c.scenario ? c.scenario : "built-in scenario",
                     err.msg, FORMAT_HINT);
        return EXIT_USAGE;
    }
    return problems ? EXIT_FAILURE : EXIT_SUCCESS;
}

static int diff(int argc, char **argv) {
    int status = EXIT_USAGE;
    cli c = {0};
    us_diff_run a, b;
    us_err err = {0};
    char *text = NULL;
    cJSON *doc = NULL;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    us_sim_opts_default(&c.sim);
    int rc = parse(argc, argv, O_JSON | O_FROM_TO, "diff: missing the scenario FILE",
                   "one scenario", usage_diff,
                   brief_usage_diff, &c);
    if (rc >= 0) {
        status = rc;
        goto cleanup;
    }
    if (!c.from || !c.to) {
        status = bad_usage(brief_usage_diff, "diff: %s", !c.from ? "missing --from DIR" : "missing --to DIR");
        goto cleanup;
    }
    if (us_diff_run_file(&a, c.file, c.from, &c.sim, &err) < 0 ||
        us_diff_run_file(&b, c.file, c.to, &c.sim, &err) < 0) {
        fprintf(stderr, "understory: %s\n", err.msg);
        status = err.code == US_ENOMEM ? EXIT_FAILURE : EXIT_USAGE;
        goto cleanup;
    }
    status = EXIT_FAILURE;
    if (c.json) {
        if (!(doc = us_diff_document(&a, &b)) || !(text = cJSON_Print(doc))) {
            fprintf(stderr, "understory: out of memory\n");
            goto cleanup;
        }
        if (puts(text) == EOF || fflush(stdout) == EOF) {
            fprintf(stderr, "understory: cannot write the output\n");
            goto cleanup;
        }
    } else {
        printf("understory diff: %s\n", a.res.scenario ? a.res.scenario : "(unnamed)");
        printf("  from  %s  (policy %s)\n", c.from, a.id);
        printf("  to    %s  (policy %s)\n\n", c.to, b.id);
        if (us_diff_text(stdout, &a, &b, "from", "to", &err) < 0) {
            fprintf(stderr, "understory: %s\n", err.msg);
            goto cleanup;
        }
    }
    status = EXIT_SUCCESS;
cleanup:
    free(text);
    cJSON_Delete(doc);
    us_diff_run_free(&a);
    us_diff_run_free(&b);
    return status;
}

static void usage_import(FILE *f) {
    fputs("usage: understory import FILE [--scheduler-name NAME] [--canonical]\n"
          "\n"
          "Read FILE (- for standard input), the List that\n"
          "  kubectl get nodes,pods,namespaces,queues.scheduling.run.ai,\\\n"
          "    podgroups.scheduling.run.ai,priorityclasses -A -o json\n"
          "prints, and write the cluster as a scenario document on stdout, for\n"
          "understory simulate and understory diff (docs/kubernetes-import.md).\n"
          "\n"
          "options:\n"
          "  --scheduler-name NAME  the spec.schedulerName of the pods understory\n"
          "                         schedules (default " KUBE_DEFAULT_SCHEDULER "); other pods are\n"
          "                         external workloads that hold their room\n"
          "  --canonical            write the document as the engine writes its state\n"
          "                         (serve's /debug/state): every field written out,\n"
          "                         quantities in engine units, times relative to t=0\n"
          "  -h, --help             show this help\n"
          "\n"
          "exit status: 0 done; 1 out of memory or output failed; 2 bad usage, or a\n"
          "file that is not such a List (the message names the JSON path).\n",
          f);
}

static void brief_usage_import(FILE *f) {
    fputs("usage: understory import FILE [--scheduler-name NAME] [--canonical]\n"
          "Run 'understory import --help' for details.\n",
          f);
}

/* All of f into a malloc'd, NUL-terminated buffer of at most max bytes;
 * 0, or -1 with why filled. */
static int read_stream(FILE *f, size_t max, char **buf, size_t *len, char *why, size_t nwhy) {
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    *buf = NULL;
    if (!b) goto nomem;
    for (;;) {
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
        if (n == cap) {
            char *nb;
            if (cap >= max) {
                snprintf(why, nwhy, "larger than %zu bytes", max);
                free(b);
                return -1;
            }
            cap *= 2;
            if (!(nb = realloc(b, cap + 1))) goto nomem;
            b = nb;
        }
    }
    if (ferror(f)) {
        snprintf(why, nwhy, "cannot read: %s", strerror(errno));
        free(b);
        return -1;
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
nomem:
    free(b);
    snprintf(why, nwhy, "out of memory");
    return -1;
}

/* understory import FILE: a Kubernetes List to a scenario document.  The
 * document is loaded back before it is printed, so what is printed runs. */
static int import(int argc, char **argv) {
    const char *file = NULL, *sched = NULL;
    char *text = NULL, *out = NULL, why[256];
    size_t len = 0;
    cJSON *list = NULL, *doc = NULL;
    kube_cluster kc;
    us_scenario sc;
    us_err err = {0};
    int status = EXIT_USAGE;
    bool canonical = false;
    memset(&kc, 0, sizeof kc);
    memset(&sc, 0, sizeof sc);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_import(stdout);
            return 0;
        }
        if (!strcmp(a, "--canonical")) {
            canonical = true;
        } else if (!strcmp(a, "--scheduler-name")) {
            if (i + 1 >= argc || !*argv[i + 1]) return bad_usage(brief_usage_import, "%s: needs a name", a);
            sched = argv[++i];
        } else if (!strncmp(a, "--scheduler-name=", 17)) {
            if (!a[17]) return bad_usage(brief_usage_import, "%s: needs a name", "--scheduler-name");
            sched = a + 17;
        } else if (a[0] == '-' && a[1]) {
            return bad_usage(brief_usage_import, "unknown option %s", a);
        } else if (file) {
            return bad_usage(brief_usage_import, "import: %s", "one FILE only");
        } else {
            file = a;
        }
    }
    if (!file) return bad_usage(brief_usage_import, "%s", "import: missing the FILE");
    if (!strcmp(file, "-")) {
        /* kubectl get ... -o json | understory import - */
        if (read_stream(stdin, (size_t)1 << 31, &text, &len, why, sizeof why) < 0) {
            fprintf(stderr, "understory: standard input: %s\n", why);
            goto cleanup;
        }
        file = "standard input";
    } else if (us_read_regular(file, (size_t)1 << 31, &text, &len, why, sizeof why) < 0) {
        fprintf(stderr, "understory: %s: %s\n", file, why);
        goto cleanup;
    }
    if (!(list = cJSON_ParseWithLength(text, len))) {
        const char *at = cJSON_GetErrorPtr();
        fprintf(stderr, "understory: %s: not JSON (at byte %td)\n", file, at && at >= text ? at - text : (ptrdiff_t)0);
        goto cleanup;
    }
    const char *base = strrchr(file, '/');
    kube_opts ko = {sched, base ? base + 1 : file, 0, 0, 0};
    if (kube_cluster_from_list(list, &kc, &err) < 0 || kube_scenario(&kc, &ko, &doc, &err) < 0) {
        fprintf(stderr, "understory: %s: %s\n", file, err.msg);
        if (err.code == US_ENOMEM) status = EXIT_FAILURE;
        goto cleanup;
    }
    status = EXIT_FAILURE;
    if (!(out = cJSON_Print(doc))) goto cleanup;
    if (us_scenario_load_string(&sc, out, strlen(out), NULL, &err) < 0) {
        fprintf(stderr, "understory: %s: the imported scenario does not load: %s\n", file, err.msg);
        status = err.code == US_ENOMEM ? EXIT_FAILURE : EXIT_USAGE;
        goto cleanup;
    }
    if (canonical) {
        /* the loaded state as the engine writes it: what /debug/state shows */
        cJSON *c = NULL;
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(doc, "name");
        int rc = us_statejson_write(&sc.state, 0, cJSON_IsString(nm) ? nm->valuestring : file, &c);
        free(out);
        out = rc == 0 ? cJSON_Print(c) : NULL;
        cJSON_Delete(c);
        if (!out) {
            us_scenario_free(&sc);
            fprintf(stderr, "understory: %s: out of memory\n", file);
            goto cleanup;
        }
    }
    us_scenario_free(&sc);
    if (puts(out) == EOF || fflush(stdout) != 0) goto cleanup;
    status = 0;
cleanup:
    kube_cluster_free(&kc);
    cJSON_Delete(doc);
    cJSON_Delete(list);
    free(out);
    free(text);
    return status;
}

int main(int argc, char **argv) {
    if (argc < 2) return bad_usage(brief_usage, "%s", "missing a command");
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("understory %s\n", US_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "simulate")) return simulate(argc, argv);
    if (!strcmp(cmd, "check")) return check(argc, argv);
    if (!strcmp(cmd, "diff")) return diff(argc, argv);
    if (!strcmp(cmd, "serve")) return sv_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "import")) return import(argc, argv);
    if (cmd[0] == '-') return bad_usage(brief_usage, "unknown option %s", cmd);
    return bad_usage(brief_usage, "unknown command \"%s\"", cmd);
}
