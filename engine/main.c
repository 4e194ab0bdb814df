/*
 * main.c — the `understory` command line: parses arguments, finds the
 * policies, and hands over to the loader, the simulator and the renderer.
 *
 * Owns only argument parsing, locating files and the exit status.  It must
 * never schedule, interpret a scenario or format output itself; those belong
 * to scenario.c, sim.c and output.c.
 *
 * Exit status: 0 success; 1 the simulation or its output failed; 2 bad
 * usage, a scenario that does not load, or policies that do not load.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output.h"
#include "policy.h"
#include "scenario.h"
#include "sim.h"

#define EXIT_USAGE 2
#define PATH_BUF 4096

static void usage(FILE *f) {
    fputs("usage: understory <command> [options]\n"
          "\n"
          "commands:\n"
          "  simulate FILE    run a scenario in virtual time and report what the\n"
          "                   scheduler decided, cycle by cycle\n"
          "\n"
          "options:\n"
          "  -h, --help       show this help\n"
          "  --version        print the version\n"
          "\n"
          "Run 'understory simulate --help' for the simulator's options.\n",
          f);
}

static void usage_simulate(FILE *f) {
    us_sim_opts d;
    us_sim_opts_default(&d);
    fprintf(f,
            "usage: understory simulate FILE [options]\n"
            "\n"
            "Runs the scenario FILE (JSON; see \"Scenario format\" in the design) cycle\n"
            "by cycle in virtual time and prints what the scheduler decided: a readable\n"
            "account by default, or the JSON output document with --json.  The same\n"
            "input always gives the same output.\n"
            "\n"
            "options:\n"
            "  --json                print the JSON output document instead of text\n"
            "  --policies DIR        load fairshare.lua, placement.lua and background.lua\n"
            "                        from DIR; default: policies/ next to the executable,\n"
            "                        then ../share/understory/policies relative to it,\n"
            "                        then ./policies\n"
            "  --plain-ties          break ties between equally scored nodes by node name\n"
            "                        only (plain invisible planning); by default the node\n"
            "                        whose use displaces the least background work wins,\n"
            "                        then the name\n"
            "  --long-grace SECONDS  warn about background pods whose termination grace\n"
            "                        exceeds SECONDS, since it delays AI work (default %g)\n"
            "  --instructions N      Lua instructions a policy call may run (default\n"
            "                        10000000)\n"
            "  --memory BYTES        Lua heap the policies may use, in bytes or as a\n"
            "                        quantity such as 64Mi (default 64Mi)\n"
            "  -h, --help            show this help\n"
            "\n"
            "exit status: 0 done; 1 the simulation failed; 2 bad usage, or a scenario or\n"
            "policies that do not load.\n",
            d.cycle.long_grace);
}

/* Short forms for errors: the full help would bury the message. */
static void brief_usage(FILE *f) {
    fputs("usage: understory simulate FILE [options]\n"
          "       understory --help | --version\n"
          "Run 'understory --help' for more.\n",
          f);
}

static void brief_usage_simulate(FILE *f) {
    fputs("usage: understory simulate FILE [--json] [--policies DIR] [--plain-ties]\n"
          "                           [--long-grace SECONDS] [--instructions N] [--memory BYTES]\n"
          "Run 'understory simulate --help' for what each option does.\n",
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

typedef struct cli {
    const char *file;
    const char *policies;
    bool json;
} cli;

/* Parses the arguments after "simulate".  Returns -1 to go on, or an exit
 * status. */
static int parse_simulate(int argc, char **argv, cli *c, us_sim_opts *o) {
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        bool missing = false;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_simulate(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            c->json = true;
        } else if (!strcmp(a, "--plain-ties")) {
            o->cycle.background_aware_ties = false;
        } else if ((v = opt_value(argc, argv, &i, "--policies", &missing))) {
            if (!*v) return bad_usage(brief_usage_simulate, "%s: needs a directory", "--policies");
            c->policies = v;
        } else if ((v = opt_value(argc, argv, &i, "--long-grace", &missing))) {
            if (parse_seconds(v, &o->cycle.long_grace) < 0)
                return bad_usage(brief_usage_simulate,
                                 "--long-grace: \"%s\" is not a number of seconds (>= 0)", v);
        } else if ((v = opt_value(argc, argv, &i, "--instructions", &missing))) {
            if (parse_count(v, &o->limits.instructions) < 0)
                return bad_usage(brief_usage_simulate, "--instructions: \"%s\" is not a positive integer",
                                 v);
        } else if ((v = opt_value(argc, argv, &i, "--memory", &missing))) {
            int64_t bytes;
            if (us_parse_memory(v, &bytes) < 0 || bytes <= 0)
                return bad_usage(brief_usage_simulate,
                                 "--memory: \"%s\" is not a positive number of bytes", v);
            o->limits.memory = (size_t)bytes;
        } else if (missing) {
            return bad_usage(brief_usage_simulate, "%s needs a value", a);
        } else if (a[0] == '-' && a[1] != '\0') {
            return bad_usage(brief_usage_simulate, "unknown option %s", a);
        } else if (c->file) {
            return bad_usage(brief_usage_simulate, "unexpected argument \"%s\" (one scenario at a time)", a);
        } else {
            c->file = a;
        }
    }
    if (!c->file) return bad_usage(brief_usage_simulate, "%s: missing the scenario FILE", "simulate");
    return -1;
}

static int simulate(int argc, char **argv) {
    int status = EXIT_USAGE;
    cli c = {0};
    us_sim_opts opts;
    us_scenario sc;
    us_sim_result res;
    us_policy *pol = NULL;
    us_err err = {0};
    char dir[PATH_BUF];
    bool loaded = false, ran = false;

    memset(&sc, 0, sizeof sc);
    memset(&res, 0, sizeof res);
    us_sim_opts_default(&opts);
    int rc = parse_simulate(argc, argv, &c, &opts);
    if (rc >= 0) {
        status = rc;
        goto cleanup;
    }

    if (us_scenario_load_file(&sc, c.file, &err) < 0) {
        /* a read error already names the file */
        if (err.code == US_EIO)
            fprintf(stderr, "understory: %s\n", err.msg);
        else
            fprintf(stderr, "understory: %s: %s\n", c.file, err.msg);
        goto cleanup;
    }
    loaded = true;

    if (c.policies) {
        snprintf(dir, sizeof dir, "%s", c.policies);
    } else if (find_policies(dir, sizeof dir) < 0) {
        fprintf(stderr,
                "understory: no policies directory found (looked next to the executable, in "
                "../share/understory/policies and in ./policies); use --policies DIR\n");
        goto cleanup;
    }
    if (!(pol = us_policy_load(dir, &opts.limits, &err))) {
        fprintf(stderr, "understory: policies %s: %s\n", dir, err.msg);
        goto cleanup;
    }
    opts.policy_dir = dir;

    status = EXIT_FAILURE;
    ran = true;
    if (us_sim_run(&sc, pol, &opts, &res, &err) < 0) {
        fprintf(stderr, "understory: %s: simulation failed: %s\n", c.file, err.msg);
        goto cleanup;
    }
    rc = c.json ? us_output_json(stdout, &res, &sc.state, &err)
                : us_output_text(stdout, &res, &sc.state, &err);
    if (rc < 0) {
        fprintf(stderr, "understory: %s\n", err.msg);
        goto cleanup;
    }
    status = EXIT_SUCCESS;
cleanup:
    if (ran) us_sim_result_free(&res);
    if (pol) us_policy_free(pol);
    if (loaded) us_scenario_free(&sc);
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
    if (cmd[0] == '-') return bad_usage(brief_usage, "unknown option %s", cmd);
    return bad_usage(brief_usage, "unknown command \"%s\"", cmd);
}
