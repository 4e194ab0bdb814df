/*
 * test_watchstream.c — the watch stream's decoding (serve/watchstream.c):
 * events whatever the split, 410 Gone stops it until a reset, other errors
 * and lines that are not events are passed over, long lines decode.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "watchstream.h"

/* What a decoding saw: "TYPE name rv;" per event. */
typedef struct got {
    char text[4096];
    int events;
} got;

static const char *const type_names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "GONE", "ERROR", "OTHER"};

static bool record(void *ud, const sv_watch_event *ev) {
    got *g = ud;
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(ev->object, "metadata");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(md, "name");
    size_t at = strlen(g->text);
    snprintf(g->text + at, sizeof g->text - at, "%s %s %s;", type_names[ev->type],
             cJSON_IsString(name) ? name->valuestring : "-", ev->rv ? ev->rv : "-");
    g->events++;
    return ev->type != SV_WATCH_GONE;
}

static const char STREAM[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"namespace\":\"d\",\"resourceVersion\":\"11\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"namespace\":\"d\",\"resourceVersion\":\"12\"}}}\n"
    "\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"15\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"namespace\":\"d\",\"resourceVersion\":\"16\"}}}\n"
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"partial\"";
static const char EXPECT[] = "ADDED a 11;MODIFIED a 12;BOOKMARK - 15;DELETED a 16;";

TEST(events_the_same_wherever_the_stream_is_split) {
    size_t n = strlen(STREAM);
    for (size_t cut = 0; cut <= n; cut++) {
        sv_watchstream w;
        got g = {{0}, 0};
        sv_watchstream_init(&w);
        CHECK(sv_watchstream_feed(&w, STREAM, cut, record, &g) == 0);
        CHECK(sv_watchstream_feed(&w, STREAM + cut, n - cut, record, &g) == 0);
        CHECK_STR(g.text, EXPECT);
        CHECK(!sv_watchstream_stopped(&w));
        sv_watchstream_free(&w);
    }
    /* one byte at a time, as the slowest connection delivers it */
    sv_watchstream w;
    got g = {{0}, 0};
    sv_watchstream_init(&w);
    for (size_t i = 0; i < n; i++) CHECK(sv_watchstream_feed(&w, STREAM + i, 1, record, &g) == 0);
    CHECK_STR(g.text, EXPECT);
    /* the partial line is whole once its newline comes */
    CHECK(sv_watchstream_feed(&w, ",\"resourceVersion\":\"17\"}}}\n", 28, record, &g) == 0);
    CHECK_HAS(g.text, "DELETED a 16;ADDED partial 17;");
    CHECK(g.events == 5);
    sv_watchstream_free(&w);
}

TEST(gone_stops_until_reset) {
    static const char s[] =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"3\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410}}\n"
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"4\"}}}\n"
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"c\"";
    sv_watchstream w;
    got g = {{0}, 0};
    sv_watchstream_init(&w);
    CHECK(sv_watchstream_feed(&w, s, strlen(s), record, &g) == 0);
    CHECK_STR(g.text, "ADDED a 3;GONE - -;");
    CHECK(sv_watchstream_stopped(&w));
    /* the rest of this watch is dropped, */
    CHECK(sv_watchstream_feed(&w, "}}\n", 3, record, &g) == 0);
    CHECK(g.events == 2);
    /* and after a reset a new stream decodes from its first byte */
    sv_watchstream_reset(&w);
    CHECK(!sv_watchstream_stopped(&w));
    static const char next[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"d\",\"resourceVersion\":\"9\"}}}\n";
    CHECK(sv_watchstream_feed(&w, next, strlen(next), record, &g) == 0);
    CHECK_STR(g.text, "ADDED a 3;GONE - -;ADDED d 9;");
    sv_watchstream_free(&w);
}

TEST(other_errors_and_non_events_are_passed_over) {
    static const char s[] =
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500,\"metadata\":{\"resourceVersion\":\"1\"}}}\n"
        "not json\n"
        "[1,2]\n"
        "{\"type\":\"ADDED\"}\n"
        "{\"object\":{\"metadata\":{\"name\":\"x\"}}}\n"
        "{\"type\":7,\"object\":{}}\n"
        "{\"type\":\"SYNC\",\"object\":{\"metadata\":{\"name\":\"y\",\"resourceVersion\":\"20\"}}}\n"
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"z\",\"resourceVersion\":\"21\"}}}\n";
    sv_watchstream w;
    got g = {{0}, 0};
    sv_watchstream_init(&w);
    CHECK(sv_watchstream_feed(&w, s, strlen(s), record, &g) == 0);
    /* an error's resourceVersion is not the stream's; an unknown type's is */
    CHECK_STR(g.text, "ERROR - -;OTHER y 20;ADDED z 21;");
    CHECK(!sv_watchstream_stopped(&w));
    sv_watchstream_free(&w);
}

TEST(a_line_longer_than_the_first_buffer) {
    size_t pad = 300000;
    const char *head = "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"big\",\"resourceVersion\":\"8\","
                       "\"annotations\":{\"a\":\"";
    const char *tail = "\"}}}}\n";
    size_t n = strlen(head) + pad + strlen(tail);
    char *s = malloc(n + 1);
    CHECK(s != NULL);
    if (!s) return;
    strcpy(s, head);
    memset(s + strlen(head), 'x', pad);
    strcpy(s + strlen(head) + pad, tail);
    sv_watchstream w;
    got g = {{0}, 0};
    sv_watchstream_init(&w);
    for (size_t at = 0; at < n; at += 1000)
        CHECK(sv_watchstream_feed(&w, s + at, n - at < 1000 ? n - at : 1000, record, &g) == 0);
    CHECK_STR(g.text, "MODIFIED big 8;");
    sv_watchstream_free(&w);
    free(s);
}

int main(void) {
    RUN(events_the_same_wherever_the_stream_is_split);
    RUN(gone_stops_until_reset);
    RUN(other_errors_and_non_events_are_passed_over);
    RUN(a_line_longer_than_the_first_buffer);
    return check_report();
}
