/*
 * test_jsonw.c — the JSON the engine reads a piece at a time (jsonsplit.h)
 * and writes value by value (jsonw.h), against cJSON: the output document
 * streamed is byte for byte cJSON_Print of the same document as a tree, on
 * every example; the writer prints any tree as cJSON_Print does; a text
 * split into pieces makes the tree cJSON makes of it whole, and what the
 * splitter refuses is loaded by cJSON whole, exactly as before.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json_agree.h"
#include "output.h"
#include "scenario.h"
#include "sim.h"

static const char *root(void) {
    const char *r = getenv("UNDERSTORY_ROOT");
    return r && *r ? r : ".";
}

/* The text us_output_json writes for res. */
static char *streamed(const us_sim_result *res, const us_state *st) {
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    us_err err = {0};
    if (!f) return NULL;
    int rc = us_output_json(f, res, st, &err);
    fclose(f);
    if (rc < 0) {
        free(text);
        return NULL;
    }
    return text;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

TEST(output_streamed_is_cjson_print_on_every_example) {
    char dir[512], path[1024], *names[64];
    int n = 0;
    snprintf(dir, sizeof dir, "%s/examples", root());
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) && n < 64;) {
        size_t k = strlen(e->d_name);
        if (k > 5 && strcmp(e->d_name + k - 5, ".json") == 0) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    CHECK(n >= 10); /* the examples are there: this test compares something */
    for (int i = 0; i < n; i++) {
        us_scenario sc;
        us_sim_result res;
        us_err err = {0};
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        CHECK(us_scenario_load_file(&sc, path, &err) == 0);
        if (err.msg[0]) fprintf(stderr, "  %s: %s\n", names[i], err.msg);
        int ran = us_sim_run(&sc, NULL, NULL, &res, &err);
        CHECK(ran == 0);
        if (ran != 0) {  /* nothing to compare: the result is empty */
            fprintf(stderr, "  %s: %s\n", names[i], err.msg);
            us_scenario_free(&sc);
            free(names[i]);
            continue;
        }
        cJSON *doc = us_output_document(&res, &sc.state);
        char *tree = doc ? cJSON_Print(doc) : NULL, *text = streamed(&res, &sc.state);
        CHECK(tree && text);
        if (tree && text) {
            size_t k = strlen(tree);
            bool same = strlen(text) == k + 1 && memcmp(text, tree, k) == 0 && text[k] == '\n';
            if (!same) fprintf(stderr, "  %s: the streamed document differs\n", names[i]);
            CHECK(same);
            CHECK(k > 1000); /* a whole document, pods and all */
        }
        free(tree);
        free(text);
        cJSON_Delete(doc);
        us_sim_result_free(&res);
        us_scenario_free(&sc);
        free(names[i]);
    }
}

TEST(output_write_error_is_reported) {
    us_scenario sc;
    us_sim_result res;
    us_err err = {0};
    char path[600];
    snprintf(path, sizeof path, "%s/examples/seed-story.json", root());
    CHECK(us_scenario_load_file(&sc, path, &err) == 0);
    CHECK(us_sim_run(&sc, NULL, NULL, &res, &err) == 0);
    FILE *f = fopen("/dev/full", "w");
    CHECK(f != NULL);
    if (f) {
        CHECK(us_output_json(f, &res, &sc.state, &err) == -1);
        CHECK(err.code == US_EIO);
        CHECK_STR(err.msg, "cannot write the output");
        fclose(f);
    }
    us_sim_result_free(&res);
    us_scenario_free(&sc);
}

/* ---- the writer against cJSON_Print ------------------------------------- */

static uint64_t rng = 7;
static uint64_t next(void) { /* splitmix64 */
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Plain characters, every control character, quotes, backslashes and
 * two-byte UTF-8. */
static cJSON *random_string(void) {
    char s[48];
    int n = (int)(next() % 20), k = 0;
    for (int i = 0; i < n; i++) {
        int c = (int)(next() % 140);
        if (c >= 128) {
            s[k++] = (char)0xc3;
            s[k++] = (char)0xa9;
        } else {
            s[k++] = (char)(c ? c : 'x');
        }
    }
    s[k] = '\0';
    return cJSON_CreateString(s);
}

static cJSON *random_number(void) {
    static const double special[] = {0.0, -0.0, 1.0, -1.0, 0.1, 1e15, 1e16, 123456789012345678.0,
                                     2147483647.0, 2147483648.0, -2147483649.0, 1e-7, 3.14159,
                                     1.0 / 3.0, 1e300, INFINITY, NAN};
    uint64_t r = next();
    if (r % 3 == 0) return cJSON_CreateNumber(special[next() % (sizeof special / sizeof special[0])]);
    if (r % 3 == 1) return cJSON_CreateNumber((double)(int64_t)(next() % 2000001) - 1000000);
    return cJSON_CreateNumber(((double)(next() % 1000000) - 500000) / (double)(1 + next() % 1000));
}

static cJSON *random_value(int depth) {
    switch (next() % (depth > 5 ? 6 : 9)) {
    case 0: case 1: return random_string();
    case 2: case 3: return random_number();
    case 4: return cJSON_CreateBool(next() % 2);
    case 5: return cJSON_CreateNull();
    case 6: return us_jw_int_item((int64_t)(next() >> 1) * (next() % 2 ? 1 : -1));
    default: {
        bool obj = next() % 2;
        cJSON *c = obj ? cJSON_CreateObject() : cJSON_CreateArray();
        int n = (int)(next() % 5);
        for (int i = 0; c && i < n; i++) {
            cJSON *v = random_value(depth + 1);
            char key[16];
            snprintf(key, sizeof key, "k\"%d\\", i);
            if (obj) cJSON_AddItemToObject(c, i % 2 ? key : "plain", v);
            else cJSON_AddItemToArray(c, v);
        }
        return c;
    }
    }
}

TEST(writer_prints_any_tree_as_cjson_print) {
    for (int i = 0; i < 2000; i++) {
        cJSON *t = random_value(0);
        const char *why = t ? json_print_agrees(t) : NULL;
        if (why) {
            char *s = cJSON_PrintUnformatted(t);
            fprintf(stderr, "  tree %d %s: %s\n", i, s ? s : "?", why);
            free(s);
        }
        CHECK(t && !why);
        cJSON_Delete(t);
    }
}

TEST(writer_sinks_agree_and_refuse_bad_nesting) {
    us_jw w;
    cJSON *tree = NULL;
    us_err err = {0};
    us_jw_tree(&w);
    us_jw_begin_object(&w, NULL);
    us_jw_string(&w, "s", "a\tb");
    us_jw_int(&w, "big", INT64_MAX);
    us_jw_begin_array(&w, "empty");
    us_jw_end(&w);
    us_jw_begin_object(&w, "o");
    us_jw_end(&w);
    us_jw_end(&w);
    CHECK(us_jw_finish(&w, &tree, &err) == 0);
    char *p = tree ? cJSON_Print(tree) : NULL;
    CHECK_STR(p, "{\n\t\"s\":\t\"a\\tb\",\n\t\"big\":\t9223372036854775807,\n\t\"empty\":\t[],\n\t\"o\":\t{\n\t}\n}");
    free(p);
    cJSON_Delete(tree);

    us_jw_tree(&w); /* a member without a key, a container left open */
    us_jw_begin_object(&w, NULL);
    us_jw_string(&w, NULL, "x");
    CHECK(us_jw_finish(&w, &tree, &err) == -1);
    CHECK(tree == NULL);
    CHECK(err.code == US_EINVAL);
}

/* ---- the splitter --------------------------------------------------------- */

TEST(split_accepts_strict_json_and_notes_elements) {
    const char *t = " {\"name\": \"x\", \"nodes\": [{\"name\": \"a\"}, {\"name\": \"b\", \"gpu\": 8}] ,"
                    "\"workloads\": [], \"no\\u0064es\": [1], \"queues\": [[1, 2e3, -0.5, true, null]]} ";
    us_jdoc d;
    CHECK(us_jsplit(t, strlen(t), agree_split_keys, &d) == 1);
    CHECK(d.n == 5);
    if (d.n == 5) {
        CHECK(d.members[1].split && d.members[1].nitems == 2);
        CHECK(strncmp(t + d.members[1].items[1].off, "{\"name\": \"b\", \"gpu\": 8}", d.members[1].items[1].len) == 0);
        CHECK(d.members[2].split && d.members[2].nitems == 0);
        CHECK(!d.members[3].split); /* a key with an escape is never split */
        CHECK(!d.members[4].split);
    }
    us_jdoc_free(&d);
    CHECK(json_split_agrees(t, strlen(t)) == NULL);
}

TEST(split_refuses_what_is_not_strict) {
    static const char *const bad[] = {
        "{\"a\": 01}", "{\"a\": 1.}", "{\"a\": .5}", "{\"a\": +1}", "{\"a\": [1,]}", "{\"a\": 1,}",
        "\xef\xbb\xbf{}", "{\"a\": \"tab\there\"}", "{\"a\": \"\\x\"}", "{\"a\": \"\\u12\"}",
        "{\"a\": \"\\udc00\"}", "{\"a\": \"\\ud800x\"}", "{\"a\": \"\\ud800\\u0041\"}", "{\"a\"\v: 1}",
        "{\"a\": 1} x", "[1]", "\"s\"", "", "{", "{\"a\": nul}", "{\"a\": 1e}",
        "{\"a\": 1234567890123456789012345678901234567890123456789012345678901234}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        us_jdoc d;
        int rc = us_jsplit(bad[i], strlen(bad[i]), agree_split_keys, &d);
        if (rc != 0) fprintf(stderr, "  accepted: %s\n", bad[i]);
        CHECK(rc == 0);
        CHECK(d.n == 0 && d.members == NULL);
    }
    /* nesting: 200 levels pass, 300 do not */
    char deep[700];
    for (int depth = 200; depth <= 300; depth += 100) {
        int n = 0;
        n += snprintf(deep + n, sizeof deep - (size_t)n, "{\"a\": ");
        for (int k = 1; k < depth; k++) deep[n++] = '[';
        for (int k = 1; k < depth; k++) deep[n++] = ']';
        deep[n++] = '}';
        us_jdoc d;
        CHECK(us_jsplit(deep, (size_t)n, agree_split_keys, &d) == (depth == 200));
        us_jdoc_free(&d);
    }
}

/* What cJSON alone accepts still loads, through the whole-document parse. */
TEST(loader_takes_what_only_cjson_takes) {
    const char *t = "{\"nodes\": [{\"name\": \"n1\", \"gpu\": 08, \"cpu\": \"\x01" "8\"}]}";
    us_scenario sc;
    us_err err = {0};
    int rc = us_scenario_load_string(&sc, t, strlen(t), NULL, &err);
    /* cJSON reads 08 as 8; the control character reaches the quantity check */
    CHECK(rc == -1);
    CHECK_HAS(err.msg, "nodes[0].cpu: ");
    t = "{\"nodes\": [{\"name\": \"n1\", \"gpu\": 08}]}";
    CHECK(us_scenario_load_string(&sc, t, strlen(t), NULL, &err) == 0);
    CHECK(sc.state.nnodes == 1 && sc.state.nodes[0].gpus == 8);
    us_scenario_free(&sc);
    /* strict, split, and a piece's error names its element */
    t = "{\"nodes\": [{\"name\": \"n1\", \"gpu\": 8}, {\"name\": \"n2\", \"gpus\": 8}]}";
    CHECK(us_scenario_load_string(&sc, t, strlen(t), NULL, &err) == -1);
    CHECK_STR(err.msg, "nodes[1].gpus: unknown field (did you mean \"gpu\"?)");
    CHECK(sc.state.nnodes == 0); /* no partial effect */
}

/* Random texts near JSON: whatever the splitter accepts, cJSON makes the
 * same tree of. */
TEST(split_agrees_with_cjson_on_near_json) {
    static const char *const atoms[] = {"{", "}", "[", "]", ",", ":", " ", "\"a\"", "\"nodes\"",
                                        "\"workloads\"", "1", "-0.5e3", "01", "true", "null",
                                        "\"\\u00e9\"", "\"\\ud83d\\ude00\"", "\"x\\\"y\"", "\n"};
    int accepted = 0;
    for (int i = 0; i < 20000; i++) {
        char t[256];
        size_t n = 0;
        /* half start as an object with a split member, so that many parse */
        if (next() % 2) n += (size_t)snprintf(t, sizeof t, "{\"%s\": [", next() % 2 ? "nodes" : "a");
        int k = (int)(next() % 12);
        for (int j = 0; j < k; j++) {
            const char *a = atoms[next() % (sizeof atoms / sizeof atoms[0])];
            size_t l = strlen(a);
            if (n + l + 3 >= sizeof t) break;
            memcpy(t + n, a, l);
            n += l;
        }
        if (next() % 2 && n + 2 < sizeof t) t[n++] = ']', t[n++] = '}';
        us_jdoc d;
        if (us_jsplit(t, n, agree_split_keys, &d) == 1) accepted++;
        us_jdoc_free(&d);
        const char *why = json_split_agrees(t, n);
        if (why) fprintf(stderr, "  %.*s: %s\n", (int)n, t, why);
        CHECK(!why);
    }
    CHECK(accepted > 100); /* the comparison was made, not skipped */
}

int main(void) {
    RUN(output_streamed_is_cjson_print_on_every_example);
    RUN(output_write_error_is_reported);
    RUN(writer_prints_any_tree_as_cjson_print);
    RUN(writer_sinks_agree_and_refuse_bad_nesting);
    RUN(split_accepts_strict_json_and_notes_elements);
    RUN(split_refuses_what_is_not_strict);
    RUN(loader_takes_what_only_cjson_takes);
    RUN(split_agrees_with_cjson_on_near_json);
    return check_report();
}
