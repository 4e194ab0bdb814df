#!/usr/bin/env bash
# `understory serve` refuses what it cannot use before connecting anywhere:
# an unknown option or a missing value (usage, exit 2), a kubeconfig that
# does not load (exit 2, naming file, line and field), no kubeconfig
# outside a pod (exit 2, saying what is missing), and a --policies
# directory that is missing or does not load (exit 2, naming file and
# line).  --help exits 0.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

run serve --help
expect_status 0
expect_stdout_has "usage: understory serve [--kubeconfig FILE] [--context NAME]"

run serve --bogus
expect_status 2
expect_stderr_has "understory serve: unknown option --bogus"
expect_stdout_empty

run serve --kubeconfig
expect_status 2
expect_stderr_has "understory serve: missing the value of --kubeconfig"

run serve --admin-address
expect_status 2
expect_stderr_has "understory serve: missing the value of --admin-address"

# the lease timings: durations, in kube-scheduler's order
# (retry < renew deadline < lease duration), checked before connecting
run serve --help
expect_stdout_has "--leader-elect[=false]"
expect_stdout_has "--renew-deadline D"
run serve --lease-duration soon
expect_status 2
expect_stderr_has 'understory serve: --lease-duration: "soon" is not a duration (e.g. 15s, 500ms, 2m)'
run serve --lease-name
expect_status 2
expect_stderr_has "understory serve: missing the value of --lease-name"
run serve --renew-deadline 15s --kubeconfig "$TMP/none.yaml"
expect_status 2
expect_stderr_has "understory serve: --renew-deadline (15 s) must be above 0 and shorter than --lease-duration (15 s)"
expect_stdout_empty
run serve --lease-duration 30s --renew-deadline 20s --retry-period 20s --kubeconfig "$TMP/none.yaml"
expect_status 2
expect_stderr_has "understory serve: --retry-period (20 s) must be above 0 and shorter than --renew-deadline (20 s)"
run serve --lease-duration 1500ms --renew-deadline 1s --retry-period 500ms --kubeconfig "$TMP/none.yaml"
expect_status 2
expect_stderr_has "--lease-duration: 1.5 s is not a whole number of seconds"
# without election (or in a dry run) the timings are not used, so not checked
run serve --leader-elect=false --renew-deadline 15s --kubeconfig "$TMP/none.yaml"
expect_status 2
expect_stderr_has "$TMP/none.yaml: No such file or directory"
# the client's rate limit: numbers in range, the burst whole; a bad value
# is named before anything connects
for bad in 0 -1 abc 1e9 "" 5x; do
    run serve --kube-api-qps "$bad"
    expect_status 2
    expect_stderr_has "understory serve: --kube-api-qps: \"$bad\" is not a number of requests a second (above 0, at most 100000)"
    expect_stdout_empty
done
for bad in 0 2.5 -3 100001 x; do
    run serve --kube-api-burst "$bad"
    expect_status 2
    expect_stderr_has "understory serve: --kube-api-burst: \"$bad\" is not a whole number of requests (1 to 100000)"
done
run serve --kube-api-qps
expect_status 2
expect_stderr_has "understory serve: missing the value of --kube-api-qps"
run serve --help
expect_stdout_has "--kube-api-qps QPS requests a second to the API server, watches apart"
expect_stdout_has "--kube-api-burst N requests allowed at once above that rate (default 100;"
# good values pass the command line and go on to the configuration
run serve --kube-api-qps 0.5 --kube-api-burst 1 --kubeconfig "$TMP/none.yaml"
expect_status 2
expect_stderr_has "$TMP/none.yaml: No such file or directory"

run serve --kubeconfig "$TMP/none.yaml"
expect_status 2
expect_stderr_has "$TMP/none.yaml: No such file or directory"
expect_stdout_empty

cat >"$TMP/kubeconfig" <<'YAML'
apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: dev, user: dev}
clusters:
- name: dev
  cluster: {server: "http://127.0.0.1:1"}
YAML
run serve --kubeconfig "$TMP/kubeconfig"
expect_status 2
expect_stderr_has "$TMP/kubeconfig:9: clusters[0].cluster.server: http://127.0.0.1:1 (an https:// URL is required)"

run serve --kubeconfig "$TMP/kubeconfig" --context prod
expect_status 2
expect_stderr_has "contexts: no context named \"prod\""

# KUBECONFIG is read when --kubeconfig is not given
KUBECONFIG="$TMP/kubeconfig" run serve
expect_status 2
expect_stderr_has "clusters[0].cluster.server"

# neither a kubeconfig nor a pod's environment
env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT "$UNDERSTORY" serve \
    >"$TMP/out" 2>"$TMP/err" && fail "serve with no configuration succeeded"
grep -q "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set" "$TMP/err" ||
    fail "serve with no configuration did not say what is missing: $(cat "$TMP/err")"

# --policies: a directory that does not load stops serve before it
# connects (an https server nobody listens on: never reached), naming the
# file and line
cat >"$TMP/ok.kubeconfig" <<'YAML'
apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: dev, user: dev}
clusters:
- name: dev
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: dev
  user: {token: x}
YAML
run serve --policies
expect_status 2
expect_stderr_has "understory serve: missing the value of --policies"
run serve --kubeconfig "$TMP/ok.kubeconfig" --policies "$TMP/nowhere"
expect_status 2
expect_stderr_has "understory serve: --policies $TMP/nowhere: "
mkdir -p "$TMP/broken"
printf 'local M = {}\nfunction M.score(pod, node)\n  return 1 +\nend\nreturn M\n' >"$TMP/broken/placement.lua"
run serve --kubeconfig "$TMP/ok.kubeconfig" --policies "$TMP/broken"
expect_status 2
expect_stderr_has "placement.lua:4:"
expect_stdout_empty
