/*
 * serve.h — the `understory serve` command (serve.c): the daemon that
 * schedules a Kubernetes cluster.  engine/main.c dispatches to it; it uses
 * the engine only through bindings/understory.h.
 */
#ifndef SV_SERVE_H
#define SV_SERVE_H

/* argv[0] is "serve".  Returns the process exit status. */
int sv_main(int argc, char **argv);

#endif
