/* SPDX-License-Identifier: MIT */
/* hakmem only.  Options and profiles as a user sets them: the program runs
 * itself again with variables set and reads what hakmem says on stderr
 * (HAKMEM_VERBOSE=1 prints every option in force and where its value came
 * from).
 *
 * - each profile's settings are in force, an explicit variable beats its
 *   profile, an unknown profile is reported and runs as speed;
 * - the usual spellings are read (on/off, yes/no, true/false, sizes with K/M/G);
 * - every option given a value it cannot take gets one line on stderr naming
 *   the variable and the value used instead, and the program runs on;
 * - a HAKMEM_ variable that is no option (a misspelt one) gets a line too. */
#include "testutil.h"

typedef struct setting {
  const char *var, *value;
} setting_t;

/* Runs the program as a child that only allocates a little, with `env`; its
 * stderr in res. */
static void run_with(const char *const *env, child_result_t *res) {
  run_self("child", env, 30, res);
  CHECK_MSG(WIFEXITED(res->status) && WEXITSTATUS(res->status) == 0, "child %s:\n%s",
            describe_status(res->status), res->err);
}

/* The value the verbose dump gives `var` and its source ("default",
 * "profile", "environment"), or fails. */
static void dumped(const char *err, const char *var, char *value, char *source) {
  char key[96];
  snprintf(key, sizeof key, "  %s=", var);
  const char *line = strstr(err, key);
  CHECK_MSG(line != NULL, "%s is not in the dump:\n%s", var, err);
  CHECK(sscanf(line + strlen(key), "%63s (%31[a-z])", value, source) == 2);
}

static void expect(const char *err, const setting_t *want, const char *source) {
  char value[64], src[32];
  dumped(err, want->var, value, src);
  CHECK_MSG(strcmp(value, want->value) == 0, "%s=%s, expected %s\n%s", want->var, value, want->value, err);
  CHECK_MSG(strcmp(src, source) == 0, "%s comes from %s, expected %s", want->var, src, source);
}

static void profiles_set_their_options(void) {
  static const setting_t balanced[] = {
      {"HAKMEM_BACKGROUND_PURGE", "1"}, {"HAKMEM_WARM_POOL_SIZE", "2"}, {"HAKMEM_LARGE_CACHE", "32M"}};
  static const setting_t lean[] = {{"HAKMEM_SS_MEM_LEAN", "1"},      {"HAKMEM_PURGE_DELAY_MS", "20"},
                                   {"HAKMEM_BACKGROUND_PURGE", "1"}, {"HAKMEM_WARM_POOL_SIZE", "0"},
                                   {"HAKMEM_LARGE_CACHE", "8M"},     {"HAKMEM_HUGE_THP", "0"}};
  static const setting_t speed[] = {{"HAKMEM_SS_MEM_LEAN", "0"}, {"HAKMEM_BACKGROUND_PURGE", "0"},
                                    {"HAKMEM_PURGE_DELAY_MS", "1000"}};
  child_result_t res;
  const char *env_b[] = {"HAKMEM_VERBOSE=1", "HAKMEM_PROFILE=balanced", NULL};
  run_with(env_b, &res);
  CHECK_MSG(strstr(res.err, "profile balanced") != NULL, "%s", res.err);
  for (size_t i = 0; i < sizeof balanced / sizeof *balanced; i++) expect(res.err, &balanced[i], "profile");
  const char *env_l[] = {"HAKMEM_VERBOSE=1", "HAKMEM_PROFILE=LEAN", NULL};
  run_with(env_l, &res);
  CHECK_MSG(strstr(res.err, "profile lean") != NULL, "%s", res.err);
  for (size_t i = 0; i < sizeof lean / sizeof *lean; i++) expect(res.err, &lean[i], "profile");
  const char *env_s[] = {"HAKMEM_VERBOSE=1", NULL};
  run_with(env_s, &res);
  CHECK_MSG(strstr(res.err, "profile speed") != NULL, "%s", res.err);
  for (size_t i = 0; i < sizeof speed / sizeof *speed; i++) expect(res.err, &speed[i], "default");
}

static void a_variable_beats_its_profile(void) {
  child_result_t res;
  const char *env[] = {"HAKMEM_VERBOSE=1", "HAKMEM_PROFILE=lean", "HAKMEM_PURGE_DELAY_MS=500",
                       "HAKMEM_HUGE_THP=yes", NULL};
  run_with(env, &res);
  setting_t delay = {"HAKMEM_PURGE_DELAY_MS", "500"}, thp = {"HAKMEM_HUGE_THP", "1"},
            lean = {"HAKMEM_SS_MEM_LEAN", "1"};
  expect(res.err, &delay, "environment");
  expect(res.err, &thp, "environment");
  expect(res.err, &lean, "profile");
}

/* Lean mode prewarms nothing: the dump says so of a prewarm set all the same. */
static void lean_ignores_prewarm(void) {
  child_result_t res;
  const char *env[] = {"HAKMEM_PROFILE=lean", "HAKMEM_TINY_PREWARM_C2=8", "HAKMEM_VERBOSE=1", NULL};
  run_with(env, &res);
  CHECK_MSG(strstr(res.err, "HAKMEM_TINY_PREWARM_C2=8 (ignored: lean mode prewarms nothing)"), "%s", res.err);
}

static void unknown_profile_runs_as_speed(void) {
  child_result_t res;
  const char *env[] = {"HAKMEM_VERBOSE=1", "HAKMEM_PROFILE=turbo", NULL};
  run_with(env, &res);
  CHECK_MSG(strstr(res.err, "hakmem: ignoring HAKMEM_PROFILE=turbo") != NULL, "%s", res.err);
  CHECK_MSG(strstr(res.err, "using speed") != NULL, "%s", res.err);
  CHECK_MSG(strstr(res.err, "profile speed") != NULL, "%s", res.err);
}

static void spellings(void) {
  static const struct {
    const char *set;
    setting_t want;
  } cases[] = {
      {"HAKMEM_BACKGROUND_PURGE=on", {"HAKMEM_BACKGROUND_PURGE", "1"}},
      {"HAKMEM_BACKGROUND_PURGE=TRUE", {"HAKMEM_BACKGROUND_PURGE", "1"}},
      {"HAKMEM_HUGE_THP=off", {"HAKMEM_HUGE_THP", "0"}},
      {"HAKMEM_HUGE_THP=no", {"HAKMEM_HUGE_THP", "0"}},
      {"HAKMEM_LARGE_CACHE=16m", {"HAKMEM_LARGE_CACHE", "16M"}},
      {"HAKMEM_LARGE_CACHE=3GiB", {"HAKMEM_LARGE_CACHE", "3G"}},
      {"HAKMEM_LARGE_CACHE=1000", {"HAKMEM_LARGE_CACHE", "1000"}},
      {"HAKMEM_SS_MEM_LEAN_DECOMMIT=free", {"HAKMEM_SS_MEM_LEAN_DECOMMIT", "FREE"}},
      {"HAKMEM_TINY_PREWARM_C3=64", {"HAKMEM_TINY_PREWARM_C3", "64"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    child_result_t res;
    const char *env[] = {"HAKMEM_VERBOSE=1", cases[i].set, NULL};
    run_with(env, &res);
    CHECK_MSG(strstr(res.err, "ignoring") == NULL, "%s:\n%s", cases[i].set, res.err);
    expect(res.err, &cases[i].want, "environment");
  }
}

/* Every variable the dump lists but the path HAKMEM_PROF, given a value none of them takes. */
static void every_bad_value_is_reported(void) {
  child_result_t res;
  const char *env[] = {"HAKMEM_VERBOSE=1", NULL};
  run_with(env, &res);
  char dump[sizeof res.err];
  memcpy(dump, res.err, sizeof dump);
  int n = 0;
  for (const char *line = strstr(dump, "  HAKMEM_"); line; line = strstr(line + 1, "  HAKMEM_")) {
    char var[64], value[64], source[32], set[96], want[160];
    CHECK(sscanf(line + 2, "%63[A-Z0-9_]=%63s (%31[a-z])", var, value, source) == 3);
    if (!strcmp(var, "HAKMEM_PROF")) continue;  /* a file's path: any string names one */
    snprintf(set, sizeof set, "%s=-1x", var);
    const char *bad[] = {set, NULL};
    run_with(bad, &res);
    snprintf(want, sizeof want, "hakmem: ignoring %s=-1x (expected ", var);
    const char *msg = strstr(res.err, want);
    CHECK_MSG(msg != NULL, "no warning for %s:\n%s", set, res.err);
    /* the dump ran with HAKMEM_VERBOSE=1: its default is 0 */
    snprintf(want, sizeof want, "; using %s\n", strcmp(source, "environment") ? value : "0");
    CHECK_MSG(strstr(msg, want) != NULL, "%s: the warning does not say `using %s`:\n%s", set, value, res.err);
    CHECK_MSG(strchr(msg, '\n') == strrchr(res.err, '\n'), "more than one line for %s:\n%s", set, res.err);
    n++;
  }
  printf("  %d variables, each warned about\n", n);
  CHECK(n >= 19);
  const char *too_big[] = {"HAKMEM_WARM_POOL_SIZE=99999", NULL};
  run_with(too_big, &res);
  CHECK_MSG(strstr(res.err, "hakmem: ignoring HAKMEM_WARM_POOL_SIZE=99999 (expected a whole number, at most 1024)"
                               "; using 4") != NULL, "%s", res.err);
  /* a size with a character after its digits that is no unit */
  const char *trailing_space[] = {"HAKMEM_LARGE_CACHE=1 ", NULL};
  run_with(trailing_space, &res);
  CHECK_MSG(strstr(res.err, "hakmem: ignoring HAKMEM_LARGE_CACHE=1 ") != NULL, "%s", res.err);
  /* a long value: its start shown, and the rest of the line still says what was expected */
  static char long_value[700] = "HAKMEM_PURGE_DELAY_MS=";
  memset(long_value + strlen(long_value), '9', 600);
  const char *too_long[] = {long_value, "HAKMEM_VERBOSE=1", NULL};
  run_with(too_long, &res);
  const char *msg = strstr(res.err, "hakmem: ignoring HAKMEM_PURGE_DELAY_MS=9999");
  CHECK_MSG(msg != NULL, "%s", res.err);
  CHECK_MSG(strstr(msg, "...") && strstr(msg, "(expected a whole number, at most 3600000); using 1000\nhakmem: "),
            "%s", res.err);
}

/* A variable no option reads (a misspelt one) gets a line; the tools' own do not. */
static void unknown_variables_are_reported(void) {
  child_result_t res;
  const char *typo[] = {"HAKMEM_PURGE_DELAY=0", "HAKMEM_PURGE_DELAY_MS=50", "HAKMEM_TEST_ANYTHING=1", NULL};
  run_with(typo, &res);
  CHECK_MSG(strstr(res.err, "hakmem: ignoring HAKMEM_PURGE_DELAY: no such option\n") != NULL, "%s", res.err);
  CHECK_MSG(!strstr(res.err, "HAKMEM_PURGE_DELAY_MS") && !strstr(res.err, "HAKMEM_TEST_ANYTHING"), "%s", res.err);
  CHECK_MSG(strchr(res.err, '\n') == strrchr(res.err, '\n'), "more than one line:\n%s", res.err);
}

int main(int argc, char **argv) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  if (argc > 1) {  /* the child: any allocation starts hakmem up */
    free(malloc(100));
    return 0;
  }
  RUN(profiles_set_their_options);
  RUN(a_variable_beats_its_profile);
  RUN(unknown_profile_runs_as_speed);
  RUN(lean_ignores_prewarm);
  RUN(spellings);
  RUN(every_bad_value_is_reported);
  RUN(unknown_variables_are_reported);
  return 0;
}
