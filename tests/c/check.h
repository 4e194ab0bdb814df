/*
 * check.h — a minimal C unit-test harness.
 *
 *   TEST(name) { CHECK(x == 1); CHECK_STR(a, "b"); }
 *   int main(void) { RUN(name); return check_report(); }
 *
 * Each TEST is one counted test: it passes when none of its checks fail.
 * check_report prints "N passed, N failed" (read by tests/run.sh) and
 * returns the exit status.
 */
#ifndef US_CHECK_H
#define US_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_passed, check_failed, check_cur_failed;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__,         \
                    __LINE__, #cond);                                        \
            check_cur_failed = 1;                                            \
        }                                                                    \
    } while (0)

#define CHECK_STR(a, b)                                                      \
    do {                                                                     \
        const char *check_a_ = (a), *check_b_ = (b);                         \
        if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {    \
            fprintf(stderr, "  %s:%d: \"%s\" != \"%s\"\n", __FILE__,         \
                    __LINE__, check_a_ ? check_a_ : "(null)",                \
                    check_b_ ? check_b_ : "(null)");                         \
            check_cur_failed = 1;                                            \
        }                                                                    \
    } while (0)

/* a contains b */
#define CHECK_HAS(a, b)                                                      \
    do {                                                                     \
        const char *check_a_ = (a), *check_b_ = (b);                         \
        if (!check_a_ || !strstr(check_a_, check_b_)) {                      \
            fprintf(stderr, "  %s:%d: \"%s\" does not contain \"%s\"\n",     \
                    __FILE__, __LINE__, check_a_ ? check_a_ : "(null)",      \
                    check_b_);                                               \
            check_cur_failed = 1;                                            \
        }                                                                    \
    } while (0)

#define TEST(name) static void test_##name(void)

#define RUN(name)                                                            \
    do {                                                                     \
        check_cur_failed = 0;                                                \
        test_##name();                                                       \
        if (check_cur_failed) {                                              \
            check_failed++;                                                  \
            printf("FAIL %s\n", #name);                                      \
        } else {                                                             \
            check_passed++;                                                  \
            printf("ok   %s\n", #name);                                      \
        }                                                                    \
    } while (0)

static inline int check_report(void) {
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
