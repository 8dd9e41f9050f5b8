/* Unit tests for collect/rocm_smi_api.c and collect/rocm.c: rsmi_frequencies_t decoded in either
 * ROCm's layout, the CDNA generation of a name, and the collector against the simulated
 * librocm_smi64.so.7 (tests/gpusim/rocmsim.c), found next to this executable in the build tree
 * (../gpusim/librocm_smi64.so.7): AMD GPUs numbered after the NVIDIA GPUs already counted, their
 * params, their series under source "nvml", and a library that is not there switching the collector
 * off without a word. */
#include <libgen.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "collect/collect.h"
#include "collect/rocm_smi_api.h"
#include "core/core.h"

static char sim[PATH_MAX];

static void test_clock_decodes_rocm6_layout(void **state) {
  (void)state;
  unsigned char buf[ROCM_SMI_FREQ_BUF] = {0};
  struct rsmi_freq_v6 f = {.has_deep_sleep = 1, .num_supported = 3, .current = 2, .frequency = {1, 2, 2100000000}};
  memcpy(buf, &f, sizeof f);
  assert_true(rocm_smi_api_clock_mhz(buf) == 2100);
}

static void test_clock_decodes_rocm5_layout(void **state) {
  (void)state;
  unsigned char buf[ROCM_SMI_FREQ_BUF] = {0};
  struct rsmi_freq_v5 f = {.num_supported = 2, .current = 1, .frequency = {500000000, 1700000000}};
  memcpy(buf, &f, sizeof f);
  assert_true(rocm_smi_api_clock_mhz(buf) == 1700);
  struct rsmi_freq_v5 one = {.num_supported = 1, .current = 0, .frequency = {800000000}};
  memcpy(buf, &one, sizeof one);
  assert_true(rocm_smi_api_clock_mhz(buf) == 800);
}

static void test_clock_of_no_valid_list_is_unknown(void **state) {
  (void)state;
  unsigned char buf[ROCM_SMI_FREQ_BUF];
  memset(buf, 0, sizeof buf);
  assert_true(rocm_smi_api_clock_mhz(buf) < 0);
  memset(buf, 0x7f, sizeof buf);
  assert_true(rocm_smi_api_clock_mhz(buf) < 0);
}

static void test_cdna_generation_of_names(void **state) {
  (void)state;
  char gfx[16];
  assert_int_equal(rocm_smi_api_cdna("AMD Instinct MI300X", gfx, sizeof gfx), 3);
  assert_string_equal(gfx, "gfx942");
  assert_int_equal(rocm_smi_api_cdna("AMD Instinct MI250X", gfx, sizeof gfx), 2);
  assert_string_equal(gfx, "gfx90a");
  assert_int_equal(rocm_smi_api_cdna("AMD Instinct MI100", gfx, sizeof gfx), 1);
  assert_int_equal(rocm_smi_api_cdna("AMD Radeon RX 7900 XTX", gfx, sizeof gfx), 0);
  assert_string_equal(gfx, "");
}

static int param_is(struct gs_sink *s, const char *key, const char *want) {
  char v[128];
  return gs_sink_param_get(s, key, v, sizeof v) && !strcmp(v, want);
}

static void test_collector_numbers_amd_after_nvidia(void **state) {
  (void)state;
  setenv("GPUSCOPE_ROCM_SMI_LIB", sim, 1);
  setenv("GPUSIM_SCENARIO", GS_TESTS_DIR "/gpusim/scenarios/mixed_amd.scn", 1);
  setenv("GPUSIM_JOBPID", "4242", 1);
  struct gs_sink *s = gs_sink_new();
  gs_sink_param(s, "gpu.count", "2"); /* what the NVML collector wrote for its two H100s */
  char err[256] = "";
  struct collector_opts o = {.root = "/", .interval_ns = 100000000};
  void *ctx = collector_rocm.open(&o, s, err, sizeof err);
  assert_non_null(ctx);
  assert_true(param_is(s, "gpu.count", "4"));
  assert_true(param_is(s, "gpu.2.vendor", "amd") && param_is(s, "gpu.3.name", "AMD Instinct MI250X"));
  assert_true(param_is(s, "gpu.2.gfx", "gfx90a") && param_is(s, "gpu.2.mem_total_bytes", "68702699520"));
  assert_int_equal(collector_rocm.sample(ctx, s, gs_mono_ns()), GS_COLLECT_OK);
  int u = gs_sink_find(s, "nvml", "gpu.util_pct", "gpu=3");
  assert_true(u >= 0 && gs_sink_last(s, u) == 80);
  int p = gs_sink_find(s, "nvml", "gpu.power_w", "gpu=2"); /* an MI250X: average power, not socket */
  assert_true(p >= 0 && gs_sink_last(s, p) == 400);
  assert_true(gs_sink_find(s, "nvml", "gpu.util_pct", "gpu=0") < 0); /* NVIDIA's are not ours */
  assert_true(gs_sink_find(s, "nvml", "gpu.sm_active_pct", "gpu=2") < 0);
  collector_rocm.close(ctx);
  gs_sink_free(s);
}

static void test_missing_library_is_off_without_a_word(void **state) {
  (void)state;
  unsetenv("GPUSCOPE_ROCM_SMI_LIB");
  struct gs_sink *s = gs_sink_new();
  char err[256] = "";
  struct collector_opts o = {.root = "/", .interval_ns = 100000000};
  if (access("/dev/kfd", F_OK) == 0) { /* a host with the AMD driver: not this test's subject */
    gs_sink_free(s);
    skip();
  }
  assert_null(collector_rocm.open(&o, s, err, sizeof err));
  assert_string_equal(err, "");
  setenv("GPUSCOPE_ROCM_SMI_LIB", "/nonexistent/librocm_smi64.so", 1);
  assert_null(collector_rocm.open(&o, s, err, sizeof err));
  assert_true(strstr(err, "no ROCm SMI library") != NULL); /* asked for by name: the reason is said */
  unsetenv("GPUSCOPE_ROCM_SMI_LIB");
  gs_sink_free(s);
}

int main(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return 77;
  exe[n] = 0;
  snprintf(sim, sizeof sim, "%s/../gpusim/librocm_smi64.so.7", dirname(exe));
  if (access(sim, R_OK)) {
    fprintf(stderr, "test_rocm: %s not built\n", sim);
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clock_decodes_rocm6_layout),
      cmocka_unit_test(test_clock_decodes_rocm5_layout),
      cmocka_unit_test(test_clock_of_no_valid_list_is_unknown),
      cmocka_unit_test(test_cdna_generation_of_names),
      cmocka_unit_test(test_collector_numbers_amd_after_nvidia),
      cmocka_unit_test(test_missing_library_is_off_without_a_word),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
