/* Unit tests of tune's planner and noise model: --param parsing, placeholder checks and filling, the
 * ratio estimator's standard error, ties, and the ranking (memory margin, ties, halving's last rung). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/core.h"
#include "store/store.h"
#include "tune/tune.h"
#include "tune/tune_int.h"

static void test_param_add_parses_name_and_values(void **state) {
  (void)state;
  struct tune_opts o = {0};
  assert_int_equal(tune_param_add(&o, "batch_size=32,64,128"), 0);
  assert_int_equal(o.nparams, 1);
  assert_string_equal(o.params[0].name, "batch_size");
  assert_int_equal(o.params[0].nvalues, 3);
  assert_string_equal(o.params[0].values[2], "128");
  assert_int_equal(tune_param_add(&o, "precision=fp32,bf16"), 0);
  assert_int_equal(tune_batch_param(&o), 0);
  tune_opts_done(&o);
}

static void test_param_add_rejects_bad_specs(void **state) {
  (void)state;
  struct tune_opts o = {0};
  const char *bad[] = {"batch", "=1,2", "1x=1", "a-b=1", "w=", "w=1,,2", "w=1,", "w=1,1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(tune_param_add(&o, bad[i]), GS_EINVAL);
    assert_true(strlen(gs_last_error()) > 0);
    assert_int_equal(o.nparams, 0);
  }
  assert_int_equal(tune_param_add(&o, "w=1"), 0);
  assert_int_equal(tune_param_add(&o, "w=2"), GS_EINVAL); /* twice */
  tune_opts_done(&o);
}

static void test_validate_refuses_unknown_placeholder_and_unused_param(void **state) {
  (void)state;
  struct tune_opts o = {0};
  tune_param_add(&o, "workers=0,2");
  char *unknown[] = {"train.py", "--w", "{worker}", NULL};
  o.argv = unknown;
  assert_int_equal(tune_validate(&o), GS_EINVAL);
  assert_non_null(strstr(gs_last_error(), "unknown placeholder {worker}"));
  char *unused[] = {"train.py", "--w", "2", NULL};
  o.argv = unused;
  assert_int_equal(tune_validate(&o), GS_EINVAL);
  assert_non_null(strstr(gs_last_error(), "--param workers is not used"));
  char *unclosed[] = {"train.py", "{workers", NULL};
  o.argv = unclosed;
  assert_int_equal(tune_validate(&o), GS_EINVAL);
  char *ok[] = {"train.py", "--w={workers}", "{{literal}}", NULL};
  o.argv = ok;
  assert_int_equal(tune_validate(&o), 0);
  tune_opts_done(&o);
}

static void test_validate_refuses_too_many_configurations(void **state) {
  (void)state;
  struct tune_opts o = {0};
  char spec[64], arg[5][8], *argv[7] = {"job"};
  for (int i = 0; i < 5; i++) { /* 10^5 configurations */
    snprintf(spec, sizeof spec, "p%d=0,1,2,3,4,5,6,7,8,9", i);
    assert_int_equal(tune_param_add(&o, spec), 0);
    snprintf(arg[i], sizeof arg[i], "{p%d}", i);
    argv[i + 1] = arg[i];
  }
  argv[6] = NULL;
  o.argv = argv;
  assert_int_equal(tune_validate(&o), GS_EINVAL);
  assert_non_null(strstr(gs_last_error(), "too many"));
  tune_opts_done(&o);
}

static void test_substitute_fills_every_placeholder(void **state) {
  (void)state;
  struct tune_opts o = {0};
  tune_param_add(&o, "bs=32,64");
  tune_param_add(&o, "p=fp32,bf16");
  char *argv[] = {"train.py", "--cfg={bs}x{p}", "{{lit}}", "{p}", NULL};
  o.argv = argv;
  int config[TUNE_MAX_PARAMS] = {1, 0};
  char **out = tune_substitute(&o, config);
  assert_non_null(out);
  assert_string_equal(out[0], "train.py");
  assert_string_equal(out[1], "--cfg=64xfp32");
  assert_string_equal(out[2], "{lit}");
  assert_string_equal(out[3], "fp32");
  assert_null(out[4]);
  tune_argv_free(out);
  tune_opts_done(&o);
}

static void test_rate_is_the_ratio_estimator_with_its_confidence(void **state) {
  (void)state;
  double x[] = {32, 32, 32, 32}, t[] = {0.1, 0.1, 0.1, 0.1}, rate, ci;
  int dof;
  assert_int_equal(gs_rate_ci(x, t, 4, &rate, &ci, &dof), 0);
  assert_true(fabs(rate - 320) < 1e-9 && fabs(ci) < 1e-9);
  assert_int_equal(dof, 1); /* two blocks of two steps */
  double t2[] = {0.1, 0.3};
  assert_int_equal(gs_rate_ci(x, t2, 2, &rate, &ci, &dof), 0);
  /* R = 64 / 0.4 = 160; residuals 32 - 16 = 16 and 32 - 48 = -16; se = sqrt(512 / 2) / 0.2 = 80. */
  assert_true(fabs(rate - 160) < 1e-9);
  assert_int_equal(dof, 1);
  assert_true(fabs(ci - 12.706 * 80) < 1e-6);
  assert_int_equal(gs_rate_ci(NULL, t2, 2, &rate, &ci, &dof), 0); /* steps per second */
  assert_true(fabs(rate - 5) < 1e-9);
  assert_int_equal(gs_rate_ci(x, t, 1, &rate, &ci, &dof), GS_EINVAL); /* one step has no spread */
  assert_true(isnan(rate) && isnan(ci));
  double tn[] = {NAN, 0.1};
  assert_int_equal(gs_rate_ci(x, tn, 2, &rate, &ci, &dof), GS_EINVAL); /* missing is not a step */
}

static void test_rate_does_not_count_a_loaders_bursts_as_noise(void **state) {
  (void)state;
  /* Four workers: one long wait, then three batches at once; four such cycles. */
  double x[16], t[16], rate, ci;
  int dof;
  for (int i = 0; i < 16; i++)
    x[i] = 32, t[i] = i % 4 == 0 ? 0.0635 : 0.0005;
  assert_int_equal(gs_rate_ci(x, t, 16, &rate, &ci, &dof), 0);
  assert_true(fabs(rate - 128 / 0.065) < 1e-6);
  assert_int_equal(dof, 3);
  assert_true(ci < 1e-6 * rate);
}

static void test_tie_uses_both_halfwidths(void **state) {
  (void)state;
  assert_true(gs_tie(100, 6, 105, 0));  /* 5 <= 6 */
  assert_false(gs_tie(100, 3, 105, 3)); /* 5 > 4.24 */
  assert_false(gs_tie(100, 1, NAN, 1)); /* unknown never ties */
  assert_true(fabs(gs_t975(3) - 3.182) < 1e-9 && fabs(gs_t975(1000) - 1.96) < 1e-9 && isnan(gs_t975(0)));
}

static struct tune_trial ok_trial(double rate, double se, int margin, int rung) {
  struct tune_trial t = {.status = TUNE_OK, .rate = rate, .ci = se, .margin_ok = margin, .rung = rung};
  return t;
}

static void test_rank_skips_trials_over_the_memory_margin(void **state) {
  (void)state;
  struct tune_trial tr[3] = {ok_trial(100, 1, 1, 0), ok_trial(300, 1, 0, 0), ok_trial(200, 1, 1, 0)};
  struct tune_result r = {.trials = tr, .n = 3};
  struct tune_opts o = {0};
  tune_rank(&o, &r);
  assert_int_equal(r.best, 2);
  assert_int_equal(r.winner, 2);
  assert_int_equal(r.recommended, 2);
  assert_false(tr[1].tied);
}

static void test_rank_reports_a_tie_not_a_winner(void **state) {
  (void)state;
  struct tune_trial tr[3] = {ok_trial(100, 1, 1, 0), ok_trial(200, 10, -1, 0), ok_trial(205, 10, 1, 0)};
  struct tune_result r = {.trials = tr, .n = 3};
  struct tune_opts o = {0};
  tune_rank(&o, &r);
  assert_int_equal(r.best, 2);
  assert_int_equal(r.winner, -1);
  assert_int_equal(r.recommended, 1); /* the first of the tied in plan order */
  assert_true(tr[1].tied && tr[2].tied && !tr[0].tied);
}

static void test_rank_takes_halvings_last_rung(void **state) {
  (void)state;
  struct tune_trial tr[4] = {ok_trial(500, 1, 1, 0), ok_trial(100, 1, 1, 0), ok_trial(300, 1, 1, 1),
                             ok_trial(200, 1, 1, 1)};
  tr[1].status = TUNE_OOM;
  struct tune_result r = {.trials = tr, .n = 4};
  struct tune_opts o = {0};
  tune_rank(&o, &r);
  assert_int_equal(r.best, 2);
  assert_int_equal(r.winner, 2);
}

static struct store_finding finding(const char *rule, double speedup, const char *evidence) {
  struct store_finding f;
  memset(&f, 0, sizeof f);
  snprintf(f.rule, sizeof f.rule, "%s", rule);
  snprintf(f.evidence, sizeof f.evidence, "%s", evidence);
  f.speedup = speedup;
  return f;
}

/* The doctor ranks input_bound first (the loader is short) and loader_workers second (how many it
 * needs): the change tune makes is loader_workers' recommended count, 3, rounded up to the listed 4,
 * not the next larger value 1; the estimate shown is input_bound's own. */
static void test_doctor_move_takes_the_recommended_worker_count(void **state) {
  (void)state;
  struct tune_opts o = {0};
  assert_int_equal(tune_param_add(&o, "workers=0,1,2,4,8"), 0);
  struct store_finding f[2] = {
      finding("input_bound", 3.0, "{\"data_wait_share\":0.8}"),
      finding("loader_workers", 2.0,
              "{\"num_workers\":0,\"recommended_workers\":3,\"speedup_by_workers\":{\"1\":1.3,\"2\":1.7,\"3\":2,"
              "\"4\":2.1}}"),
  };
  int cur[TUNE_MAX_PARAMS] = {0}, next[TUNE_MAX_PARAMS];
  double est, want;
  assert_int_equal(tune_doctor_move(&o, f, 2, 0, cur, next, &est, &want), 1);
  assert_string_equal(o.params[0].values[next[0]], "4");
  assert_true(want == 3 && est == 3.0);
  tune_opts_done(&o);
}

/* loader_workers applied: its own estimate for the count applied (4 listed, 3 recommended), not its
 * figure for 3. */
static void test_doctor_move_shows_the_findings_estimate_for_the_value_applied(void **state) {
  (void)state;
  struct tune_opts o = {0};
  assert_int_equal(tune_param_add(&o, "num_workers=0,2,4"), 0);
  struct store_finding f[1] = {
      finding("loader_workers", 2.0,
              "{\"num_workers\":2,\"recommended_workers\":3,\"speedup_by_workers\":{\"3\":2,\"4\":2.1}}"),
  };
  int cur[TUNE_MAX_PARAMS] = {1}, next[TUNE_MAX_PARAMS];
  double est, want;
  assert_int_equal(tune_doctor_move(&o, f, 1, 0, cur, next, &est, &want), 1);
  assert_string_equal(o.params[0].values[next[0]], "4");
  assert_true(fabs(est - 2.1) < 1e-9 && want == 3);
  /* Already at the largest listed value: no change to make. */
  cur[0] = 2;
  assert_int_equal(tune_doctor_move(&o, f, 1, 0, cur, next, &est, &want), 0);
  tune_opts_done(&o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_param_add_parses_name_and_values),
      cmocka_unit_test(test_param_add_rejects_bad_specs),
      cmocka_unit_test(test_validate_refuses_unknown_placeholder_and_unused_param),
      cmocka_unit_test(test_validate_refuses_too_many_configurations),
      cmocka_unit_test(test_substitute_fills_every_placeholder),
      cmocka_unit_test(test_rate_is_the_ratio_estimator_with_its_confidence),
      cmocka_unit_test(test_rate_does_not_count_a_loaders_bursts_as_noise),
      cmocka_unit_test(test_tie_uses_both_halfwidths),
      cmocka_unit_test(test_rank_skips_trials_over_the_memory_margin),
      cmocka_unit_test(test_rank_reports_a_tie_not_a_winner),
      cmocka_unit_test(test_rank_takes_halvings_last_rung),
      cmocka_unit_test(test_doctor_move_takes_the_recommended_worker_count),
      cmocka_unit_test(test_doctor_move_shows_the_findings_estimate_for_the_value_applied),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
