/* Unit tests of expose/expose.c: the exposition of a sink — dcgm-exporter's names, units and labels,
 * label values escaped per the exposition format, no line for a series never put or gone stale,
 * OpenMetrics' end marker and counters, the Accept header's choice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "expose/expose.h"

#define S 1000000000LL

struct fx {
  struct gs_sink *sink;
  struct expose *m;
  char *out;
  size_t len;
};

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof *f);
  f->sink = gs_sink_new();
  struct expose_opts o = {.host_label = "hostname", .interval_ns = S};
  f->m = expose_new(f->sink, &o);
  gs_sink_param(f->sink, "gpu.0.uuid", "GPU-abc");
  gs_sink_param(f->sink, "gpu.0.name", "NVIDIA \"Quoted\" H100");
  gs_sink_param(f->sink, "gpu.0.pci_bus_id", "00000000:18:00.0");
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  expose_free(f->m);
  gs_sink_free(f->sink);
  free(f->out);
  free(f);
  return 0;
}

static const char *render(struct fx *f, int om, int64_t now) {
  free(f->out);
  f->out = NULL;
  FILE *mem = open_memstream(&f->out, &f->len);
  assert_int_equal(expose_write(f->m, mem, om, now), 0);
  fclose(mem);
  return f->out;
}

static void put(struct fx *f, const char *source, const char *name, const char *labels, double v, int64_t t) {
  int id = gs_sink_series(f->sink, source, name, labels, "", GS_GAUGE);
  assert_true(id >= 0);
  gs_sink_put(f->sink, id, t, v);
}

static void test_dcgm_names_units_and_labels(void **state) {
  struct fx *f = *state;
  put(f, "nvml", "gpu.mem_used_bytes", "gpu=0", 2.0 * 1024 * 1024 * 1024, 10 * S);
  put(f, "nvml", "gpu.sm_active_pct", "gpu=0", 80, 10 * S);
  put(f, "nvml", "gpu.energy_j", "gpu=0", 12.5, 10 * S);
  const char *t = render(f, 0, 10 * S);
  assert_non_null(strstr(t, "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-abc\",pci_bus_id=\"00000000:18:00.0\","
                            "device=\"nvidia0\",modelName=\"NVIDIA \\\"Quoted\\\" H100\""));
  assert_non_null(strstr(t, "} 2048\n"));                /* MiB */
  assert_non_null(strstr(t, "DCGM_FI_PROF_SM_ACTIVE{")); /* a ratio */
  assert_non_null(strstr(t, "} 0.8\n"));
  assert_non_null(strstr(t, "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"));
  assert_non_null(strstr(t, "} 12500\n")); /* mJ */
}

static void test_label_values_are_escaped(void **state) {
  struct fx *f = *state;
  put(f, "proctree", "proc.rss_bytes", "pid=7,comm=a\"b\\c\nd", 4096, 10 * S);
  const char *t = render(f, 0, 10 * S);
  assert_non_null(strstr(t, "gpuscope_proc_rss_bytes{pid=\"7\",comm=\"a\\\"b\\\\c\\nd\"} 4096\n"));
}

/* Whether s is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF). */
static int utf8_ok(const unsigned char *s) {
  while (*s) {
    size_t len = *s < 0x80                 ? 1
                 : *s >= 0xc2 && *s < 0xe0 ? 2
                 : *s >= 0xe0 && *s < 0xf0 ? 3
                 : *s >= 0xf0 && *s < 0xf5 ? 4
                                           : 0;
    if (!len)
      return 0;
    for (size_t i = 1; i < len; i++)
      if ((s[i] & 0xc0) != 0x80)
        return 0;
    if ((len == 3 && ((*s == 0xe0 && s[1] < 0xa0) || (*s == 0xed && s[1] >= 0xa0))) ||
        (len == 4 && ((*s == 0xf0 && s[1] < 0x90) || (*s == 0xf4 && s[1] >= 0x90))))
      return 0;
    s += len;
  }
  return 1;
}

/* A model name (the driver's bytes) that is not UTF-8 and has control characters: every label value
 * goes through one sanitiser, so the page stays valid UTF-8 (promtool rejects it otherwise). */
static void test_label_values_that_are_not_utf8_are_replaced(void **state) {
  struct fx *f = *state;
  gs_sink_param(f->sink, "gpu.1.uuid", "GPU-\xc3\x28");
  gs_sink_param(f->sink, "gpu.1.name", "H100 \xff\xfe\x01x\xe2\x80\xaeok\xed\xa0\x80");
  put(f, "nvml", "gpu.mem_used_bytes", "gpu=1", 1024.0 * 1024, 10 * S);
  put(f, "proctree", "proc.rss_bytes", "pid=8,comm=py\xc0\xafthon", 4096, 10 * S);
  const char *t = render(f, 0, 10 * S);
  assert_true(utf8_ok((const unsigned char *)t));
  assert_non_null(strstr(t, "UUID=\"GPU-\xef\xbf\xbd(\""));
  /* U+202E is well-formed and kept (a terminal is not reading this); the surrogate is not. */
  assert_non_null(strstr(
      t, "modelName=\"H100 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx\xe2\x80\xaeok\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""));
  assert_non_null(strstr(t, "comm=\"py\xef\xbf\xbd\xef\xbf\xbdthon\""));
}

/* A label list longer than the row's buffer is cut between characters, never inside one (both
 * parities of where the two-byte characters start). */
static void test_a_long_label_is_cut_between_characters(void **state) {
  struct fx *f = *state;
  for (int odd = 0; odd < 2; odd++) {
    char labels[2048];
    size_t off = (size_t)snprintf(labels, sizeof labels, "pid=%d,comm=%s", 8 + odd, odd ? "a" : "");
    for (int i = 0; i < 600; i++) /* 1,200 bytes of U+00E9 */
      labels[off++] = (char)0xc3, labels[off++] = (char)0xa9;
    labels[off] = 0;
    put(f, "proctree", "proc.rss_bytes", labels, 4096, 10 * S);
  }
  const char *t = render(f, 0, 10 * S);
  assert_non_null(strstr(t, "gpuscope_proc_rss_bytes{pid=\"8\",comm=\"\xc3\xa9"));
  assert_non_null(strstr(t, "gpuscope_proc_rss_bytes{pid=\"9\",comm=\"a\xc3\xa9"));
  assert_true(utf8_ok((const unsigned char *)t));
}

static void test_a_series_never_put_has_no_line(void **state) {
  struct fx *f = *state;
  assert_true(gs_sink_series(f->sink, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE) >= 0);
  put(f, "nvml", "gpu.temp_c", "gpu=0", 60, 10 * S);
  const char *t = render(f, 0, 10 * S);
  assert_null(strstr(t, "DCGM_FI_DEV_GPU_UTIL"));
  assert_non_null(strstr(t, "DCGM_FI_DEV_GPU_TEMP{"));
}

static void test_a_stale_series_has_no_line(void **state) {
  struct fx *f = *state;
  put(f, "nvml", "gpu.proc_mem_bytes", "gpu=0,pid=42", 1e9, 10 * S);
  assert_non_null(strstr(render(f, 0, 11 * S), "gpuscope_gpu_proc_mem_bytes{gpu=\"0\",pid=\"42\"}"));
  assert_null(strstr(render(f, 0, 60 * S), "gpuscope_gpu_proc_mem_bytes"));
}

static void test_step_phases_as_shares(void **state) {
  struct fx *f = *state;
  put(f, "client", "step.data_s", "", 0.25, 10 * S);
  put(f, "client", "step.total_s", "", 1.0, 10 * S);
  put(f, "client", "step.samples", "", 64, 10 * S);
  const char *t = render(f, 0, 10 * S);
  assert_non_null(strstr(t, "gpuscope_step_data_wait_ratio 0.25\n"));
  assert_non_null(strstr(t, "gpuscope_samples_per_second 64\n"));
  assert_null(strstr(t, "gpuscope_step_h2d_ratio")); /* not reported: no line */
}

static void test_openmetrics_ends_and_keeps_dcgm_counter_names(void **state) {
  struct fx *f = *state;
  put(f, "nvml", "gpu.energy_j", "gpu=0", 1, 10 * S);
  const char *t = render(f, 1, 10 * S);
  assert_non_null(strstr(t, "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION unknown\n"));
  size_t n = strlen(t);
  assert_true(n > 6 && !strcmp(t + n - 6, "# EOF\n"));
}

static void test_findings_by_rule(void **state) {
  struct fx *f = *state;
  struct store_finding fd = {.rule = "input_bound", .severity = "high", .speedup = 1.8};
  expose_set_findings(f->m, &fd, 1);
  assert_non_null(strstr(render(f, 0, 10 * S), "gpuscope_finding{rule=\"input_bound\",severity=\"high\"} 1.8\n"));
}

static void test_an_empty_sink_renders_nothing(void **state) {
  struct fx *f = *state;
  assert_string_equal(render(f, 0, 10 * S), "");
  assert_string_equal(render(f, 1, 10 * S), "# EOF\n");
}

static void test_mig_instance_lines_carry_dcgm_exporters_instance_labels(void **state) {
  struct fx *f = *state;
  gs_sink_param(f->sink, "gpu.0.mig.9.profile", "1g.10gb");
  put(f, "nvml", "gpu.mem_used_bytes", "gpu=0", 1024.0 * 1024 * 1024, 10 * S);
  put(f, "nvml", "mig.mem_used_bytes", "gpu=0,gi=9", 3.0 * 1024 * 1024 * 1024, 10 * S);
  put(f, "nvml", "mig.gr_active_pct", "gpu=0,gi=9", 20, 10 * S);
  put(f, "nvml", "gpu.gr_active_pct", "gpu=0", 85, 10 * S);
  const char *t = render(f, 0, 10 * S);
  /* the GPU's labels (gpu, UUID, ... modelName), then the instance's, then the host's */
  assert_non_null(strstr(t, "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-abc\",pci_bus_id=\"00000000:18:00.0\","
                            "device=\"nvidia0\",modelName=\"NVIDIA \\\"Quoted\\\" H100\",GPU_I_PROFILE=\"1g.10gb\","
                            "GPU_I_ID=\"9\""));
  assert_non_null(strstr(t, "} 3072\n")); /* the instance's MiB */
  assert_non_null(strstr(t, "} 1024\n")); /* the GPU's, its own line */
  assert_non_null(strstr(t, "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.\n"));
  assert_non_null(strstr(t, "GPU_I_ID=\"9\",hostname=\""));
  assert_non_null(strstr(t, "} 0.2\n"));
  assert_non_null(strstr(t, "} 0.85\n"));
  assert_null(strstr(t, "gpuscope_mig_mem_used")); /* a DCGM field, not one of gpuscope's own */
}

/* What the NVML collector does when an operator destroys GI 9 and reuses its id for a 2g.20gb
 * instance: it ends the old series (gs_sink_end) and writes the new profile's param. */
static void test_mig_instance_lines_appear_and_vanish_with_the_instance(void **state) {
  struct fx *f = *state;
  gs_sink_param(f->sink, "gpu.0.mig.9.profile", "1g.10gb");
  int used = gs_sink_series(f->sink, "nvml", "mig.mem_used_bytes", "gpu=0,gi=9", "B", GS_GAUGE);
  gs_sink_put(f->sink, used, 10 * S, 3.0 * 1024 * 1024 * 1024);
  put(f, "nvml", "gpu.mem_used_bytes", "gpu=0", 1024.0 * 1024 * 1024, 10 * S);
  assert_non_null(strstr(render(f, 0, 10 * S), "GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"9\""));
  gs_sink_end(f->sink, used); /* destroyed */
  put(f, "nvml", "gpu.mem_used_bytes", "gpu=0", 1024.0 * 1024 * 1024, 11 * S);
  const char *t = render(f, 0, 11 * S);
  assert_null(strstr(t, "GPU_I_ID")); /* at the next scrape, not after the stale delay */
  assert_non_null(strstr(t, "DCGM_FI_DEV_FB_USED{gpu=\"0\""));
  gs_sink_param(f->sink, "gpu.0.mig.9.profile", "2g.20gb"); /* the id reused */
  gs_sink_put(f->sink, used, 12 * S, 5.0 * 1024 * 1024 * 1024);
  t = render(f, 0, 12 * S);
  assert_non_null(strstr(t, "GPU_I_PROFILE=\"2g.20gb\",GPU_I_ID=\"9\""));
  assert_null(strstr(t, "1g.10gb"));
  assert_non_null(strstr(t, "} 5120\n"));
}

static void test_accept_header_choice(void **state) {
  (void)state;
  assert_false(expose_wants_openmetrics(NULL));
  assert_false(expose_wants_openmetrics("text/plain;version=0.0.4"));
  assert_true(expose_wants_openmetrics("application/openmetrics-text;version=1.0.0,text/plain;q=0.5"));
  assert_false(expose_wants_openmetrics("text/plain,application/openmetrics-text;q=0.1"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_dcgm_names_units_and_labels, setup, teardown),
      cmocka_unit_test_setup_teardown(test_label_values_are_escaped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_label_values_that_are_not_utf8_are_replaced, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_long_label_is_cut_between_characters, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_series_never_put_has_no_line, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_stale_series_has_no_line, setup, teardown),
      cmocka_unit_test_setup_teardown(test_step_phases_as_shares, setup, teardown),
      cmocka_unit_test_setup_teardown(test_openmetrics_ends_and_keeps_dcgm_counter_names, setup, teardown),
      cmocka_unit_test_setup_teardown(test_findings_by_rule, setup, teardown),
      cmocka_unit_test_setup_teardown(test_an_empty_sink_renders_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mig_instance_lines_carry_dcgm_exporters_instance_labels, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mig_instance_lines_appear_and_vanish_with_the_instance, setup, teardown),
      cmocka_unit_test(test_accept_header_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
