/* Unit tests for collect/rocm_smi_api.c and collect/rocm.c: rsmi_frequencies_t decoded in either
 * ROCm's layout, the CDNA generation of a name, and the collector against the simulated
 * librocm_smi64.so.7 (tests/gpusim/rocmsim.c), found next to this executable in the build tree
 * (../gpusim/librocm_smi64.so.7): AMD GPUs numbered after the NVIDIA GPUs already counted, their
 * params, their series under source "nvml", and a library that is not there switching the collector
 * off without a word. */
#include <libgen.h>
#include <limits.h>
#include <math.h>
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
  assert_true(rocm_smi_api_clock_mhz(buf, NULL) == 2100);
}

static void test_clock_decodes_rocm5_layout(void **state) {
  (void)state;
  unsigned char buf[ROCM_SMI_FREQ_BUF] = {0};
  struct rsmi_freq_v5 f = {.num_supported = 2, .current = 1, .frequency = {500000000, 1700000000}};
  memcpy(buf, &f, sizeof f);
  assert_true(rocm_smi_api_clock_mhz(buf, NULL) == 1700);
  struct rsmi_freq_v5 one = {.num_supported = 1, .current = 0, .frequency = {800000000}};
  memcpy(buf, &one, sizeof one);
  assert_true(rocm_smi_api_clock_mhz(buf, NULL) == 800);
}

static void test_clock_of_no_valid_list_is_unknown(void **state) {
  (void)state;
  unsigned char buf[ROCM_SMI_FREQ_BUF];
  memset(buf, 0, sizeof buf);
  assert_true(rocm_smi_api_clock_mhz(buf, NULL) < 0);
  memset(buf, 0x7f, sizeof buf);
  assert_true(rocm_smi_api_clock_mhz(buf, NULL) < 0);
}

static void test_clock_max_is_the_highest_level(void **state) {
  (void)state;
  unsigned char buf[ROCM_SMI_FREQ_BUF] = {0};
  double max;
  struct rsmi_freq_v6 f = {.num_supported = 3, .current = 0, .frequency = {500000000, 1400000000, 2100000000}};
  memcpy(buf, &f, sizeof f);
  assert_true(rocm_smi_api_clock_mhz(buf, &max) == 500 && max == 2100);
  memset(buf, 0, sizeof buf);
  assert_true(rocm_smi_api_clock_mhz(buf, &max) < 0 && max < 0);
}

/* A metrics table as a library of that layout writes it: the prepared buffer, then size bytes. */
static void metrics_buf(unsigned char *buf, const struct rsmi_metrics_v6 *x, size_t size) {
  unsigned char all[2048];
  rocm_smi_api_metrics_prepare(buf);
  memset(all, 0xff, sizeof all);
  memcpy(all, x, sizeof *x);
  memcpy(buf, all, size);
}

static struct rsmi_metrics_v6 metrics_of(unsigned content) {
  struct rsmi_metrics_v6 x;
  memset(&x, 0xff, sizeof x); /* what the firmware does not fill */
  x.common_header = (struct metrics_table_header_t){0, 1, (uint8_t)content};
  x.average_gfx_activity = 97;
  x.average_umc_activity = 41;
  return x;
}

static void test_metrics_layout_is_told_by_how_far_the_library_wrote(void **state) {
  (void)state;
  unsigned char buf[ROCM_SMI_METRICS_BUF];
  struct rocm_smi_metrics m;
  struct rsmi_metrics_v6 x = metrics_of(3);
  x.indep_throttle_status = 1ULL << 32; /* TEMP_GPU */
  metrics_buf(buf, &x, sizeof(struct rsmi_metrics_v5));
  assert_int_equal(rocm_smi_api_metrics(buf, &m), 0);
  assert_int_equal(m.layout, 5);
  assert_true(m.gfx_pct == 97 && m.umc_pct == 41 && !m.has_indep); /* ROCm 5's struct has no indep field */
  metrics_buf(buf, &x, 424);
  assert_int_equal(rocm_smi_api_metrics(buf, &m), 0);
  assert_int_equal(m.layout, 6);
  assert_true(m.has_indep && m.indep == 1ULL << 32 && !m.has_resid);
  x = metrics_of(6);
  x.accumulation_counter = 1000, x.ppt_residency_acc = 10, x.socket_thm_residency_acc = 0;
  metrics_buf(buf, &x, 1832);
  assert_int_equal(rocm_smi_api_metrics(buf, &m), 0);
  assert_int_equal(m.layout, 7);
  assert_true(m.has_resid && m.acc == 1000 && m.ppt == 10 && !m.has_indep);
}

static void test_metrics_all_ones_and_missing_versions_are_absent(void **state) {
  (void)state;
  unsigned char buf[ROCM_SMI_METRICS_BUF];
  struct rocm_smi_metrics m;
  struct rsmi_metrics_v6 x;
  memset(&x, 0xff, sizeof x);
  x.common_header = (struct metrics_table_header_t){0, 1, 6};
  metrics_buf(buf, &x, 1832);
  assert_int_equal(rocm_smi_api_metrics(buf, &m), 0);
  assert_true(isnan(m.gfx_pct) && isnan(m.umc_pct) && isnan(m.pcie_gbs) && !m.has_indep && !m.has_resid);
  x = metrics_of(2); /* v1.2: no indep_throttle_status, no PCIe bandwidth, whatever the bytes say */
  x.indep_throttle_status = 1, x.pcie_bandwidth_inst = 5;
  metrics_buf(buf, &x, 1832);
  assert_int_equal(rocm_smi_api_metrics(buf, &m), 0);
  assert_true(!m.has_indep && isnan(m.pcie_gbs));
  x.common_header.format_revision = 2; /* an APU's table */
  metrics_buf(buf, &x, 1832);
  assert_int_equal(rocm_smi_api_metrics(buf, &m), -1);
}

static void test_throttle_bits_map_onto_nvmls_reasons(void **state) {
  (void)state;
  assert_true(rocm_smi_api_indep_reasons(0) == 0);
  assert_true(rocm_smi_api_indep_reasons(1ULL << 0) == 0x4);   /* PPT0: SwPowerCap */
  assert_true(rocm_smi_api_indep_reasons(1ULL << 16) == 0x8);  /* TDC_GFX: HwSlowdown */
  assert_true(rocm_smi_api_indep_reasons(1ULL << 34) == 0x20); /* TEMP_MEM: SwThermalSlowdown */
  assert_true(rocm_smi_api_indep_reasons(1ULL << 47) == 0x40); /* PROCHOT_GFX: HwThermalSlowdown */
  assert_true(rocm_smi_api_indep_reasons(1ULL << 57) == 0);    /* FIT: no counterpart */
  struct rocm_smi_metrics a = {.has_resid = 1, .acc = 1000}, b = a;
  b.acc = 2000, b.ppt = 600, b.socket_thm = 400, b.prochot = 0;
  assert_true(rocm_smi_api_resid_reasons(&a, &b) == 0x4); /* power 60 % of the time, heat 40 % */
  b.hbm_thm = 500;
  assert_true(rocm_smi_api_resid_reasons(&a, &b) == 0x24);
  assert_true(rocm_smi_api_resid_reasons(&b, &a) == -1); /* not later */
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
      cmocka_unit_test(test_clock_max_is_the_highest_level),
      cmocka_unit_test(test_metrics_layout_is_told_by_how_far_the_library_wrote),
      cmocka_unit_test(test_metrics_all_ones_and_missing_versions_are_absent),
      cmocka_unit_test(test_throttle_bits_map_onto_nvmls_reasons),
      cmocka_unit_test(test_cdna_generation_of_names),
      cmocka_unit_test(test_collector_numbers_amd_after_nvidia),
      cmocka_unit_test(test_missing_library_is_off_without_a_word),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
