/*
 * test_kubeconfig.c — how `understory serve` reads a kubeconfig and the
 * in-cluster service account (serve/kubeconfig.c): the context chosen,
 * inline (-data) and file credentials (relative to the kubeconfig's
 * directory), tokens, and errors that name file, line and field.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kubeconfig.h"

static char dir[] = "/tmp/understory-kubeconfig.XXXXXX";

static const char *write_file(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

/* "-----BEGIN CERTIFICATE-----\n" in base64, so decoding is checked. */
#define PEM_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="

static const char *two_contexts =
    "apiVersion: v1\n"
    "kind: Config\n"
    "clusters:\n"
    "- name: a\n"
    "  cluster:\n"
    "    server: https://127.0.0.1:6443/\n"
    "    certificate-authority-data: " PEM_B64 "\n"
    "- name: b\n"
    "  cluster:\n"
    "    server: https://127.0.0.1:7443\n"
    "    certificate-authority: certs/ca.crt\n"
    "users:\n"
    "- name: admin\n"
    "  user:\n"
    "    client-certificate-data: " PEM_B64 "\n"
    "    client-key-data: " PEM_B64 "\n"
    "- name: robot\n"
    "  user:\n"
    "    token: abc.def\n"
    "    tokenFile: /var/run/token\n"
    "contexts:\n"
    "- name: admin@a\n"
    "  context: {cluster: a, user: admin}\n"
    "- name: robot@b\n"
    "  context: {cluster: b, user: robot}\n"
    "current-context: admin@a\n";

TEST(current_context_with_inline_credentials) {
    sv_config c;
    char err[512] = "";
    const char *p = write_file("config", two_contexts);
    CHECK(sv_kubeconfig_load(p, NULL, &c, err, sizeof err) == 0);
    CHECK_STR(c.name, "admin@a");
    CHECK_STR(c.server, "https://127.0.0.1:6443"); /* trailing slash dropped */
    CHECK(c.ca.data && c.ca.len == 28 && !c.ca.file);
    CHECK_STR((const char *)c.ca.data, "-----BEGIN CERTIFICATE-----\n");
    CHECK(c.cert.data && c.key.data && !c.token && !c.token_file);
    sv_config_free(&c);
}

TEST(named_context_with_files_relative_to_the_kubeconfig) {
    sv_config c;
    char err[512] = "", want[600];
    const char *p = write_file("config", two_contexts);
    CHECK(sv_kubeconfig_load(p, "robot@b", &c, err, sizeof err) == 0);
    CHECK_STR(c.server, "https://127.0.0.1:7443");
    snprintf(want, sizeof want, "%s/certs/ca.crt", dir);
    CHECK_STR(c.ca.file, want);
    CHECK_STR(c.token, "abc.def");
    CHECK_STR(c.token_file, "/var/run/token");
    CHECK(!c.cert.data && !c.cert.file);
    sv_config_free(&c);
}

/* Each broken kubeconfig fails with file:line and the field. */
TEST(errors_name_file_line_and_field) {
    static const struct {
        const char *text, *context, *want;
    } cases[] = {
        {"clusters: [\n", NULL, "config:2: not YAML"},
        {"- a\n- b\n", NULL, "config:1: not a kubeconfig"},
        {"contexts: []\n", NULL, "current-context: not set"},
        {"current-context: x\ncontexts:\n- name: y\n  context: {cluster: c}\n", NULL,
         "config:3: contexts: no context named \"x\""},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n", NULL,
         "config:4: contexts[0].context.cluster: no cluster named \"c\""},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n"
         "  cluster: {server: http://127.0.0.1:8080}\n",
         NULL, "config:7: clusters[0].cluster.server: http://127.0.0.1:8080 (an https:// URL is required)"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n"
         "  cluster: {server: https://h:1}\nusers:\n- name: u\n  user:\n    client-key-data: '%%%'\n",
         NULL, "config:11: users[0].user.client-key-data: not base64"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n"
         "  cluster: {server: https://h:1}\nusers:\n- name: u\n  user:\n    exec: {command: aws}\n",
         NULL, "config:11: users[0].user.exec: not supported"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n"
         "  cluster: {server: https://h:1}\nusers:\n- name: u\n  user:\n    client-key-data: " PEM_B64 "\n",
         NULL, "users[0].user: a client certificate needs its key, and a key its certificate"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: [1]}\n", NULL,
         "config:4: contexts[0].context.cluster: must be a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sv_config c;
        char err[512] = "";
        const char *p = write_file("config", cases[i].text);
        CHECK(sv_kubeconfig_load(p, cases[i].context, &c, err, sizeof err) == -1);
        CHECK_HAS(err, cases[i].want);
        CHECK_HAS(err, dir); /* the file is named */
        CHECK(c.server == NULL && c.name == NULL); /* nothing half-loaded */
    }
    sv_config c;
    char err[512] = "";
    CHECK(sv_kubeconfig_load("/nonexistent/kubeconfig", NULL, &c, err, sizeof err) == -1);
    CHECK_HAS(err, "/nonexistent/kubeconfig: No such file or directory");
}

TEST(in_cluster_service_account) {
    sv_config c;
    char err[512] = "", want[600];
    unsetenv("KUBERNETES_SERVICE_HOST");
    CHECK(sv_kubeconfig_in_cluster(dir, &c, err, sizeof err) == -1);
    CHECK_HAS(err, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set");
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    CHECK(sv_kubeconfig_in_cluster(dir, &c, err, sizeof err) == -1); /* no token file yet */
    CHECK_HAS(err, "/token: No such file or directory");
    write_file("token", "tok\n");
    CHECK(sv_kubeconfig_in_cluster(dir, &c, err, sizeof err) == 0);
    CHECK_STR(c.server, "https://127.0.0.1:443");
    snprintf(want, sizeof want, "%s/token", dir);
    CHECK_STR(c.token_file, want);
    snprintf(want, sizeof want, "%s/ca.crt", dir);
    CHECK_STR(c.ca.file, want);
    CHECK_STR(c.name, "in-cluster");
    sv_config_free(&c);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    CHECK(sv_kubeconfig_in_cluster(dir, &c, err, sizeof err) == 0);
    CHECK_STR(c.server, "https://[fd00::1]:443");
    sv_config_free(&c);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    RUN(current_context_with_inline_credentials);
    RUN(named_context_with_files_relative_to_the_kubeconfig);
    RUN(errors_name_file_line_and_field);
    RUN(in_cluster_service_account);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_report();
}
