/*
 * fuzz_scenario.c — libFuzzer target: the scenario loader, then the
 * simulation of what loaded (make fuzz; docs/testing.md).
 *
 * Any input: the loader accepts it or refuses it with a message, never
 * crashes, leaks or reads out of bounds (ASan + UBSan).  What loads and is
 * small enough to simulate in milliseconds runs with the built-in policies
 * and the invariant checker on: a violated invariant is a finding (abort).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario.h"
#include "sim.h"

/* What a run may cost: larger inputs are only loaded. */
#define MAX_PODS 400
#define MAX_NODES 64
#define MAX_CYCLES 12

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long pods_asked(const us_scenario *sc) {
    long n = 0;
    for (size_t i = 0; i < sc->state.nworkloads; i++) {
        int r = sc->state.workloads[i].replicas;
        n += r > 0 ? r : 0;
        if (sc->state.workloads[i].controller == US_CTRL_DAEMONSET) n += (long)sc->state.nnodes;
    }
    return n + (long)sc->state.npods;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    us_scenario sc;
    us_err err = {0};
    if (us_scenario_load_string(&sc, (const char *)data, size, "fuzz.json", &err) < 0) {
        if (!err.msg[0]) abort(); /* a refusal always says why */
        return 0;
    }
    if (pods_asked(&sc) <= MAX_PODS && sc.state.nnodes <= MAX_NODES && sc.cycle_interval > 0) {
        us_sim_opts o;
        us_sim_result res;
        us_err rerr = {0};
        us_sim_opts_default(&o);
        o.cycle.check_invariants = true;
        /* at most MAX_CYCLES cycles */
        if (sc.horizon < 0 || sc.horizon > sc.cycle_interval * (MAX_CYCLES - 1))
            sc.horizon = sc.cycle_interval * (MAX_CYCLES - 1);
        memset(&res, 0, sizeof res);
        if (us_sim_run(&sc, NULL, &o, &res, &rerr) < 0 && rerr.code != US_ENOMEM) {
            fprintf(stderr, "simulation failed: %s\n", rerr.msg);
            abort(); /* built-in policies on loaded input: only an invariant can fail */
        }
        us_sim_result_free(&res);
    }
    us_scenario_free(&sc);
    return 0;
}
