/* tests/unit/test_nvml: drives collector_nvml against a gs_sink, with the simulated libnvidia-ml.so.1
 * (tests/gpusim) playing each scenario, and checks what lands in the sink: values and timestamps
 * against the scenario's timeline, throttle and GPU-lost events, notes for what is unsupported,
 * that nothing waits on a slow driver call, `gpuscope devices`' output, and SM activity through the
 * simulated libdcgm.so.4 on a GPU without GPM (group dcgm).
 *
 * Each cmocka group plays one scenario in real time (a few seconds). Run without arguments, the
 * program runs every group in its own forked process, all at once, because a group that leaves a
 * thread stuck inside the driver (on purpose) must not share the library with the next one; with a
 * group name as argument it runs that group in this process. The simulator is found next to this
 * executable in the build tree (../gpusim/libnvidia-ml.so.1) or at $GPUSIM_LIB. */
#include <dlfcn.h>
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "collect/collect.h"
#include "core/core.h"
#include "report/report.h"
#include "expose/expose.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

static char lib_path[PATH_MAX], legacy_path[PATH_MAX], nomig_path[PATH_MAX], dcgm_path[PATH_MAX], scn_dir[PATH_MAX];

#define EXPECT_NEAR(a, b, eps)                                                                                         \
  do {                                                                                                                 \
    double a_ = (a), b_ = (b);                                                                                         \
    if (!(fabs(a_ - b_) <= (eps)))                                                                                     \
      fail_msg("%s = %.6g, expected %.6g (+-%g)", #a, a_, b_, (double)(eps));                                          \
  } while (0)

/* ---- what a run put into the sink ---- */

struct cap {
  struct gs_batch **b;
  size_t nb;
  int64_t t0;    /* the simulator's time 0 (its first nvmlInit), monotonic ns */
  int64_t phase; /* the first tick time play() handed to sample() */
  char summary[512];
  char err[256];
  int opened;
  char live[16384]; /* "name{labels}\n" of each series holding a latest value when the run ended */
  char *metrics;    /* the /metrics exposition of the sink when the run ended */
  size_t metrics_len;
};

static void cap_take(struct cap *c, struct gs_sink *s) {
  struct gs_batch *b = gs_sink_take(s);
  struct gs_batch **n = realloc(c->b, (c->nb + 1) * sizeof *n);
  assert_non_null(b);
  assert_non_null(n);
  c->b = n;
  c->b[c->nb++] = b;
}

static void cap_free(struct cap *c) {
  for (size_t i = 0; i < c->nb; i++)
    gs_batch_free(c->b[i]);
  free(c->b);
  free(c->metrics);
  free(c);
}

static const struct gs_series_def *cap_def(const struct cap *c, const char *name, const char *labels) {
  for (size_t i = 0; i < c->nb; i++)
    for (size_t j = 0; j < c->b[i]->n_series; j++) {
      const struct gs_series_def *d = &c->b[i]->series[j];
      if (!strcmp(d->name, name) && !strcmp(d->labels, labels))
        return d;
    }
  return NULL;
}

/* The points of one series in time order: t in seconds of scenario time. Returns the count. */
static size_t cap_points(const struct cap *c, const char *name, const char *labels, double *t, double *v, size_t max) {
  const struct gs_series_def *d = cap_def(c, name, labels);
  size_t n = 0;
  if (!d)
    return 0;
  for (size_t i = 0; i < c->nb; i++)
    for (size_t j = 0; j < c->b[i]->n_points; j++) {
      const struct gs_point *p = &c->b[i]->points[j];
      if (p->series != d->id || n == max)
        continue;
      t[n] = (double)(p->t_ns - c->t0) / 1e9;
      v[n] = p->v;
      n++;
    }
  return n;
}

static const char *cap_param(const struct cap *c, const char *key) {
  const char *v = NULL;
  for (size_t i = 0; i < c->nb; i++)
    for (size_t j = 0; j < c->b[i]->n_params; j++)
      if (!strcmp(c->b[i]->params[j].key, key))
        v = c->b[i]->params[j].value;
  return v;
}

static int cap_notes(const struct cap *c, const char *substr) {
  int n = 0;
  for (size_t i = 0; i < c->nb; i++)
    for (size_t j = 0; j < c->b[i]->n_notes; j++)
      n += strstr(c->b[i]->notes[j], substr) != NULL;
  return n;
}

static void cap_print_notes(const struct cap *c) {
  for (size_t i = 0; i < c->nb; i++)
    for (size_t j = 0; j < c->b[i]->n_notes; j++)
      print_message("note: %s\n", c->b[i]->notes[j]);
}

/* Events of a kind (and name and labels when not NULL): their times, returns the count. */
static size_t cap_events(const struct cap *c, const char *kind, const char *name, const char *labels, double *t,
                         size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < c->nb; i++)
    for (size_t j = 0; j < c->b[i]->n_events; j++) {
      const struct gs_event *e = &c->b[i]->events[j];
      if (strcmp(e->kind, kind) || (name && strcmp(e->name, name)) || (labels && strcmp(e->labels, labels)))
        continue;
      if (n < max)
        t[n] = (double)(e->t_ns - c->t0) / 1e9;
      n++;
    }
  return n;
}

/* gs_sink_each: appends "name{labels}\n" to the cap's live list. */
static void cap_live_one(void *user, int id, const char *source, size_t slen, const char *name, size_t nlen,
                         const char *labels, double last, int64_t last_t) {
  struct cap *c = user;
  size_t len = strlen(c->live);
  (void)id, (void)source, (void)slen, (void)last, (void)last_t;
  snprintf(c->live + len, sizeof c->live - len, "%.*s{%s}\n", (int)nlen, name, labels);
}

/* Whether series name{labels} held a latest value when the run ended (gs_sink_end clears it). */
static int cap_live(const struct cap *c, const char *name, const char *labels) {
  char key[256];
  snprintf(key, sizeof key, "%s{%s}\n", name, labels);
  return strstr(c->live, key) != NULL;
}

/* The text of the first event of a kind with these labels, or NULL. */
static const char *cap_event_text(const struct cap *c, const char *kind, const char *labels) {
  for (size_t i = 0; i < c->nb; i++)
    for (size_t j = 0; j < c->b[i]->n_events; j++) {
      const struct gs_event *e = &c->b[i]->events[j];
      if (!strcmp(e->kind, kind) && !strcmp(e->labels, labels))
        return e->text;
    }
  return NULL;
}

/* ---- playing a scenario ---- */

static void *sim_sym(const char *lib, const char *name) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  void *p = h ? dlsym(h, name) : NULL;
  if (h)
    dlclose(h); /* only drops our reference: the collector still holds one */
  return p;
}

static void sleep_s(double s) {
  struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts))
    ;
}

static void set_scenario(const char *name) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", scn_dir, name);
  setenv("GPUSIM_SCENARIO", path, 1);
}

/* Opens collector_nvml on scenario `scn`, lets it sample for secs (the run loop's sample() called
 * every interval, the sink drained every 200 ms), then takes the summary and closes. */
static struct cap *play(const char *scn, const char *lib, int interval_ms, double secs) {
  struct cap *c = calloc(1, sizeof *c);
  struct gs_sink *s = gs_sink_new();
  assert_non_null(c);
  assert_non_null(s);
  set_scenario(scn);
  struct collector_opts o = {.root = "/", .interval_ns = interval_ms * 1000000LL, .nvml_lib = lib};
  void *ctx = collector_nvml.open(&o, s, c->err, sizeof c->err);
  if (!ctx)
    fail_msg("open(%s): %s", scn, c->err);
  c->opened = 1;
  long long (*t0)(void) = (long long (*)(void))sim_sym(lib, "gpusim_t0_mono_ns");
  assert_non_null(t0);
  c->t0 = t0();
  int64_t end = gs_mono_ns() + (int64_t)(secs * 1e9);
  c->phase = gs_mono_ns();
  while (gs_mono_ns() < end) {
    assert_int_equal(collector_nvml.sample(ctx, s, c->phase), GS_COLLECT_OK);
    cap_take(c, s);
    sleep_s(0.2);
  }
  FILE *f = fmemopen(c->summary, sizeof c->summary - 1, "w");
  assert_non_null(f);
  collector_nvml.summary(ctx, f);
  fclose(f);
  collector_nvml.close(ctx);
  cap_take(c, s);
  gs_sink_each(s, cap_live_one, c);
  struct expose_opts mo = {.host_label = "hostname", .interval_ns = o.interval_ns};
  struct expose *m = expose_new(s, &mo);
  FILE *mf = open_memstream(&c->metrics, &c->metrics_len);
  assert_true(m && mf && expose_write(m, mf, 0, gs_mono_ns()) == 0);
  fclose(mf);
  expose_free(m);
  gs_sink_free(s);
  return c;
}

static int teardown_cap(void **state) {
  if (*state)
    cap_free(*state);
  return 0;
}

/* ---- idle1: one idle GPU, no driver samples while idle ---- */

static int setup_idle1(void **state) {
  *state = play("idle1.scn", lib_path, 100, 2.5);
  return 0;
}

static void test_idle_gpu_util_comes_from_rates_as_zero(void **state) {
  struct cap *c = *state;
  double t[200], v[200];
  size_t n = cap_points(c, "gpu.util_pct", "gpu=0", t, v, 200);
  /* No driver samples exist, so every tick falls back to nvmlDeviceGetUtilizationRates. */
  assert_true(n >= 10);
  for (size_t i = 0; i < n; i++)
    assert_true(v[i] == 0);
  assert_true(cap_points(c, "gpu.mem_util_pct", "gpu=0", t, v, 200) >= 10);
}

static void test_idle_static_facts_are_params(void **state) {
  struct cap *c = *state;
  assert_string_equal(cap_param(c, "gpu.count"), "1");
  assert_string_equal(cap_param(c, "gpu.0.name"), "NVIDIA H100 PCIe");
  assert_string_equal(cap_param(c, "gpu.0.cc"), "9.0");
  assert_string_equal(cap_param(c, "gpu.0.uuid"), "GPU-5a1c0000-0000-4000-8000-000000000000");
  assert_string_equal(cap_param(c, "gpu.0.pci_bus_id"), "00000000:18:00.0");
  assert_string_equal(cap_param(c, "gpu.0.mem_total_bytes"), "85520809984"); /* 81559 MiB */
  assert_string_equal(cap_param(c, "gpu.0.mig_mode"), "disabled");
  assert_string_equal(cap_param(c, "nvml.driver_version"), "550.54.15");
}

static void test_idle_unsupported_fan_is_absent_and_noted_once(void **state) {
  struct cap *c = *state;
  assert_null(cap_def(c, "gpu.fan_pct", "gpu=0"));
  if (cap_notes(c, "gpu0: fan speed: Not Supported") != 1) {
    cap_print_notes(c);
    fail_msg("expected one note about the fan");
  }
}

static void test_idle_gpm_reads_what_exists_and_notes_the_rest(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  size_t n = cap_points(c, "gpu.sm_active_pct", "gpu=0", t, v, 100);
  assert_true(n >= 5);
  for (size_t i = 0; i < n; i++)
    assert_true(v[i] == 0);
  assert_null(cap_def(c, "gpu.nvlink_rx_bytes_s", "gpu=0"));
  assert_int_equal(cap_notes(c, "gpu0: GPM gpu.nvlink_rx_bytes_s: Not Supported"), 1);
}

static void test_idle_bit_is_in_mask_but_makes_no_event(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  size_t n = cap_points(c, "gpu.throttle_reasons", "gpu=0", t, v, 100);
  assert_true(n >= 10);
  assert_true(v[n - 1] == 1);
  assert_int_equal(cap_events(c, "throttle_start", NULL, NULL, t, 100), 0);
}

static void test_idle_memory_uses_v2_accounting(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  assert_true(cap_points(c, "gpu.mem_total_bytes", "gpu=0", t, v, 100) > 0);
  EXPECT_NEAR(v[0], 81559 * MIB, 0);
  assert_true(cap_points(c, "gpu.mem_used_bytes", "gpu=0", t, v, 100) > 0);
  EXPECT_NEAR(v[0], 0, 0);
  assert_true(cap_points(c, "gpu.mem_free_bytes", "gpu=0", t, v, 100) > 0);
  EXPECT_NEAR(v[0], (81559 - 535) * MIB, 0); /* _v2: reserved is neither used nor free */
}

/* ---- busy8_h200: 8 busy GPUs with GPM and the job's process ---- */

static int setup_busy8(void **state) {
  setenv("GPUSIM_JOBPID", "4321", 1);
  *state = play("busy8_h200.scn", lib_path, 100, 3.4);
  return 0;
}

static double busy8_util(int gpu, double t) {
  if (t >= 2 && t < 2.5)
    return 5;
  if (gpu == 3 && t >= 1.5)
    return 40;
  return 97;
}

static void test_busy8_every_gpu_has_every_series(void **state) {
  static const char *names[] = {"gpu.util_pct",
                                "gpu.mem_util_pct",
                                "gpu.mem_used_bytes",
                                "gpu.mem_free_bytes",
                                "gpu.mem_total_bytes",
                                "gpu.power_w",
                                "gpu.power_limit_w",
                                "gpu.energy_j",
                                "gpu.temp_c",
                                "gpu.sm_clock_mhz",
                                "gpu.mem_clock_mhz",
                                "gpu.sm_clock_max_mhz",
                                "gpu.mem_clock_max_mhz",
                                "gpu.throttle_reasons",
                                "gpu.pcie_tx_bytes_s",
                                "gpu.pcie_rx_bytes_s",
                                "gpu.pstate",
                                "gpu.sm_active_pct",
                                "gpu.sm_occupancy_pct",
                                "gpu.tensor_active_pct",
                                "gpu.dram_active_pct",
                                "gpu.fp16_active_pct",
                                "gpu.fp32_active_pct",
                                "gpu.fp64_active_pct",
                                "gpu.pcie_tx_gpm_bytes_s",
                                "gpu.pcie_rx_gpm_bytes_s",
                                "gpu.nvlink_rx_bytes_s",
                                "gpu.nvlink_tx_bytes_s"};
  struct cap *c = *state;
  for (int g = 0; g < 8; g++) {
    char lab[16];
    snprintf(lab, sizeof lab, "gpu=%d", g);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
      const struct gs_series_def *d = cap_def(c, names[i], lab);
      if (!d)
        fail_msg("no %s{%s}", names[i], lab);
      assert_string_equal(d->source, "nvml");
    }
    assert_null(cap_def(c, "gpu.fan_pct", lab));
  }
  assert_string_equal(cap_param(c, "gpu.count"), "8");
  assert_string_equal(cap_param(c, "gpu.7.name"), "NVIDIA H200");
  assert_non_null(strstr(c->summary, "GPUs: 8 \xc3\x97 NVIDIA H200 (NVML 550.54.15, GPM on)"));
}

static void test_busy8_util_is_every_driver_sample_at_its_time(void **state) {
  struct cap *c = *state;
  double t[400], v[400];
  for (int g = 0; g < 8; g += 3) {
    char lab[16];
    snprintf(lab, sizeof lab, "gpu=%d", g);
    size_t n = cap_points(c, "gpu.util_pct", lab, t, v, 400), on_grid = 0, stall = 0;
    for (size_t i = 0; i < n; i++) {
      if (i)
        assert_true(t[i] > t[i - 1]);
      double k = t[i] * 6; /* the simulated driver samples at 6 Hz from time 0 */
      on_grid += fabs(k - round(k)) < 0.006;
      stall += v[i] == 5;
      int near_edge = fabs(t[i] - 1.5) < 0.05 || fabs(t[i] - 2) < 0.05 || fabs(t[i] - 2.5) < 0.05;
      if (!near_edge && v[i] != busy8_util(g, t[i]))
        fail_msg("gpu %d at %.3f s: %g, scenario says %g", g, t[i], v[i], busy8_util(g, t[i]));
    }
    /* 3.4 s at 6 Hz is 20 driver samples; 34 agent ticks would give a point per tick instead. */
    if (on_grid < 15 || n > on_grid + 3)
      fail_msg("gpu %d: %zu points, %zu on the driver's sample grid", g, n, on_grid);
    assert_true(stall >= 2); /* the half-second stall holds three driver samples */
  }
}

static void test_busy8_instant_values_are_stamped_on_the_run_loop_grid(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  double phase = (double)(c->phase - c->t0) / 1e9;
  for (int g = 0; g < 8; g += 7) {
    char lab[16];
    snprintf(lab, sizeof lab, "gpu=%d", g);
    size_t n = cap_points(c, "gpu.temp_c", lab, t, v, 100), off = 0;
    /* One point per tick the collector says it took, however late the machine ran it (GPU 0 may have
     * one more: the tick close() cut short had written its first GPUs). */
    size_t ticks = strtoull(cap_param(c, "nvml.ticks"), NULL, 10);
    if (n < ticks || n > ticks + (g < 7))
      fail_msg("gpu %d: %zu temperature points, the collector took %zu ticks", g, n, ticks);
    /* From the first point on the run loop's grid (the thread's first tick or two come before it picks
     * the grid up), a point off the grid is a reading the collector counted late: stamped with its
     * read time, more than 5 ms after its tick. */
    int picked_up = 0;
    for (size_t i = 0; i < n; i++) {
      double k = (t[i] - phase) / 0.1; /* whole intervals after the run loop's first tick */
      int on = fabs(k - round(k)) < 1e-5;
      picked_up |= on;
      off += picked_up && !on;
    }
    size_t late = strtoull(cap_param(c, "nvml.late_readings"), NULL, 10);
    if (!picked_up || off > late)
      fail_msg("gpu %d: %zu temperature points off the run loop's grid, %zu readings counted late", g, off, late);
  }
}

static void test_busy8_energy_is_a_counter_in_joules(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  const struct gs_series_def *d = cap_def(c, "gpu.energy_j", "gpu=0");
  assert_non_null(d);
  assert_int_equal(d->kind, GS_COUNTER);
  assert_string_equal(d->unit, "J");
  size_t n = cap_points(c, "gpu.energy_j", "gpu=0", t, v, 100), pairs = 0;
  assert_true(n > 10);
  /* energy_start 1e6 mJ on GPU 0, then 640 W. A value is stamped with its tick's scheduled time only
   * when read within 5 ms of it (else with its read time): at most 640 W x 5 ms = 3.2 J early, 6.4 J
   * on a difference, however loaded the machine. */
  EXPECT_NEAR(v[0], 1000 + 640 * t[0], 5);
  size_t first = 0, last = 0;
  for (size_t i = 1; i < n; i++)
    if (t[i - 1] > 0 && t[i] < 2) {
      EXPECT_NEAR(v[i] - v[i - 1], 640 * (t[i] - t[i - 1]), 10);
      first = pairs++ ? first : i - 1;
      last = i;
    }
  assert_true(pairs > 5);
  EXPECT_NEAR((v[last] - v[first]) / (t[last] - t[first]), 640, 640 * 0.01);
}

static void test_busy8_basic_values_match_the_scenario(void **state) {
  static const struct {
    const char *name;
    double v;
  } want[] = {
      {"gpu.power_w", 640},
      {"gpu.power_limit_w", 700},
      {"gpu.temp_c", 66},
      {"gpu.sm_clock_mhz", 1980},
      {"gpu.mem_clock_mhz", 3201},
      {"gpu.sm_clock_max_mhz", 1980},
      {"gpu.mem_clock_max_mhz", 3201},
      {"gpu.throttle_reasons", 0},
      {"gpu.pstate", 0},
      {"gpu.mem_used_bytes", 120 * GIB},
      {"gpu.mem_total_bytes", 143771 * MIB},
      {"gpu.pcie_rx_bytes_s", 6 * GIB},
      {"gpu.pcie_tx_bytes_s", 2 * GIB},
  };
  struct cap *c = *state;
  double t[100], v[100];
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    size_t n = cap_points(c, want[i].name, "gpu=5", t, v, 100), checked = 0;
    for (size_t j = 0; j < n; j++)
      if (t[j] < 1.9) {
        if (v[j] != want[i].v)
          fail_msg("%s at %.3f s: %.17g, scenario says %.17g", want[i].name, t[j], v[j], want[i].v);
        checked++;
      }
    if (!checked)
      fail_msg("no %s before 1.9 s", want[i].name);
  }
}

static void test_busy8_gpm_values_are_interval_averages(void **state) {
  static const struct {
    const char *name;
    double v;
  } want[] = {
      {"gpu.sm_active_pct", 82},
      {"gpu.sm_occupancy_pct", 41},
      {"gpu.tensor_active_pct", 63},
      {"gpu.dram_active_pct", 55},
      {"gpu.fp16_active_pct", 0},
      {"gpu.fp32_active_pct", 12},
      {"gpu.fp64_active_pct", 0},
      {"gpu.pcie_tx_gpm_bytes_s", 2 * GIB},
      {"gpu.pcie_rx_gpm_bytes_s", 6 * GIB},
      {"gpu.nvlink_rx_bytes_s", 120 * GIB},
      {"gpu.nvlink_tx_bytes_s", 118 * GIB},
  };
  struct cap *c = *state;
  double t[100], v[100];
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    size_t n = cap_points(c, want[i].name, "gpu=0", t, v, 100), checked = 0;
    for (size_t j = 0; j < n; j++)
      if (t[j] > 0.5 && t[j] < 1.9) {
        EXPECT_NEAR(v[j], want[i].v, 1e-6 * want[i].v + 1e-9);
        checked++;
      }
    if (checked < 3)
      fail_msg("%s: only %zu points in 0.5..1.9 s", want[i].name, checked);
  }
  /* An interval average in the stall sees the stall. */
  size_t n = cap_points(c, "gpu.sm_active_pct", "gpu=0", t, v, 100), low = 0;
  for (size_t j = 0; j < n; j++)
    low += t[j] > 2.2 && t[j] < 2.5 && v[j] < 10;
  assert_true(low >= 1);
}

static void test_busy8_process_series_carry_the_job_pid(void **state) {
  struct cap *c = *state;
  double t[400], v[400];
  size_t n = cap_points(c, "gpu.proc_mem_bytes", "gpu=2,pid=4321", t, v, 400);
  assert_true(n >= 10);
  EXPECT_NEAR(v[n - 1], 118 * GIB, 0);
  n = cap_points(c, "gpu.proc_sm_pct", "gpu=3,pid=4321", t, v, 400);
  assert_true(n >= 10);
  for (size_t i = 0; i < n; i++)
    if (fabs(t[i] - 1.5) > 0.05 && fabs(t[i] - 2) > 0.05 && fabs(t[i] - 2.5) > 0.05)
      EXPECT_NEAR(v[i], busy8_util(3, t[i]), 0);
}

/* ---- old_basic: no samples, no GPM, no energy, no process permission ---- */

static int setup_old_basic(void **state) {
  *state = play("old_basic.scn", lib_path, 100, 2.5);
  return 0;
}

static void test_old_basic_missing_families_are_absent_and_noted(void **state) {
  struct cap *c = *state;
  static const char *absent[] = {"gpu.energy_j", "gpu.proc_mem_bytes", "gpu.sm_active_pct", "gpu.nvlink_rx_bytes_s"};
  for (size_t i = 0; i < sizeof absent / sizeof *absent; i++)
    assert_null(cap_def(c, absent[i], "gpu=0"));
  static const char *notes[] = {"gpu0: utilization samples: Not Supported", "gpu0: energy: Not Supported",
                                "gpu0: running processes: Insufficient Permissions"};
  for (size_t i = 0; i < sizeof notes / sizeof *notes; i++)
    if (cap_notes(c, notes[i]) != 1) {
      cap_print_notes(c);
      fail_msg("expected the note '%s' once", notes[i]);
    }
  assert_non_null(strstr(c->summary, "GPM off"));
  assert_null(cap_param(c, "gpu.0.mig_mode")); /* not supported: no param rather than a made-up value */
}

static void test_old_basic_util_follows_the_rates(void **state) {
  struct cap *c = *state;
  double t[200], v[200];
  size_t n = cap_points(c, "gpu.util_pct", "gpu=0", t, v, 200);
  assert_true(n >= 15); /* one per tick: no samples to read */
  for (size_t i = 0; i < n; i++)
    if (fabs(t[i] - 1.5) > 0.02)
      EXPECT_NEAR(v[i], t[i] < 1.5 ? 50 : 80, 0);
  n = cap_points(c, "gpu.fan_pct", "gpu=0", t, v, 200);
  assert_true(n >= 10);
  EXPECT_NEAR(v[0], 45, 0);
}

/* ---- legacy: the same GPU behind a library with only an old driver's symbols ---- */

static int setup_legacy(void **state) {
  *state = play("old_basic.scn", legacy_path, 100, 1.5);
  return 0;
}

static void test_legacy_library_falls_back_to_unversioned_calls(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  assert_true(cap_points(c, "gpu.util_pct", "gpu=0", t, v, 100) >= 5);
  assert_true(cap_points(c, "gpu.throttle_reasons", "gpu=0", t, v, 100) >= 5); /* ...ThrottleReasons */
  /* nvmlDeviceGetMemoryInfo (v1) counts reserved memory as used: 6 GiB + the default 256 MiB. */
  assert_true(cap_points(c, "gpu.mem_used_bytes", "gpu=0", t, v, 100) >= 5);
  EXPECT_NEAR(v[0], 6 * GIB + 256 * MIB, 0);
  assert_string_equal(cap_param(c, "gpu.0.name"), "Tesla V100-SXM2-16GB");
  assert_null(cap_param(c, "gpu.0.mig_mode"));
  if (cap_notes(c, "lacks nvmlDeviceGetTotalEnergyConsumption") != 1 || cap_notes(c, "nvmlDeviceGetSamples") != 1 ||
      cap_notes(c, "nvmlGpm*") != 1) {
    cap_print_notes(c);
    fail_msg("expected one note listing the missing entry points");
  }
}

/* ---- temp_calls: nvmlDeviceGetTemperatureV first, the deprecated call as the fallback ---- */

static int setup_temp_calls(void **state) {
  *state = play("temp_calls.scn", lib_path, 100, 1.0);
  return 0;
}

static int setup_temp_calls_legacy(void **state) {
  *state = play("temp_calls.scn", legacy_path, 100, 1.0);
  return 0;
}

/* GPU 0's deprecated call fails: every reading it has came from nvmlDeviceGetTemperatureV. */
static void test_temperature_comes_from_the_versioned_call(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  size_t n = cap_points(c, "gpu.temp_c", "gpu=0", t, v, 100);
  assert_true(n >= 5);
  for (size_t i = 0; i < n; i++)
    EXPECT_NEAR(v[i], 61, 0);
  assert_int_equal(cap_notes(c, "lacks nvmlDeviceGetTemperature"), 0);
  assert_int_equal(cap_notes(c, "temperature"), 0); /* neither GPU's temperature is off or failing */
}

/* GPU 1's versioned call refuses nvmlTemperature_v1: the deprecated call answers instead. */
static void test_temperature_falls_back_when_the_versioned_call_refuses_its_version(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  size_t n = cap_points(c, "gpu.temp_c", "gpu=1", t, v, 100);
  assert_true(n >= 5);
  EXPECT_NEAR(v[0], 47, 0);
}

/* A library without nvmlDeviceGetTemperatureV (the legacy twin): the deprecated call is all there is,
 * so GPU 1 has its temperature and GPU 0 (whose old call fails) none. */
static void test_legacy_library_reads_temperature_with_the_deprecated_call(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  assert_true(cap_points(c, "gpu.temp_c", "gpu=1", t, v, 100) >= 5);
  EXPECT_NEAR(v[0], 47, 0);
  assert_int_equal(cap_points(c, "gpu.temp_c", "gpu=0", t, v, 100), 0);
  assert_int_equal(cap_notes(c, "nvmlDeviceGetTemperatureV"), 0); /* its fallback answers: not missing */
}

/* ---- mig: GPU 0 in MIG mode, GPU 1 not ---- */

static int setup_mig(void **state) {
  *state = play("mig.scn", lib_path, 100, 2);
  return 0;
}

static void test_mig_gpu_keeps_memory_and_loses_utilisation(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  assert_string_equal(cap_param(c, "gpu.0.mig_mode"), "enabled");
  assert_string_equal(cap_param(c, "gpu.1.mig_mode"), "disabled");
  assert_null(cap_def(c, "gpu.util_pct", "gpu=0"));
  assert_int_equal(cap_notes(c, "gpu0: utilization: Not Supported"), 1);
  assert_true(cap_points(c, "gpu.mem_used_bytes", "gpu=0", t, v, 100) >= 5);
  EXPECT_NEAR(v[0], 30 * GIB, 0);
  assert_true(cap_points(c, "gpu.proc_mem_bytes", "gpu=0,pid=4242", t, v, 100) >= 5);
  assert_null(cap_def(c, "gpu.proc_sm_pct", "gpu=0,pid=4242"));
  size_t n = cap_points(c, "gpu.util_pct", "gpu=1", t, v, 100);
  assert_true(n >= 5);
  EXPECT_NEAR(v[n - 1], 70, 0);
  assert_true(cap_points(c, "gpu.proc_sm_pct", "gpu=1,pid=4242", t, v, 100) >= 3);
  assert_null(cap_def(c, "gpu.sm_active_pct", "gpu=1")); /* Ampere: no GPM */
}

/* ---- node8_mig: GPU 2 in MIG mode with GI 1 (3g.40gb, MIG device 0) and GI 9 (1g.10gb, device 2) ---- */

static int setup_mig_instances(void **state) {
  *state = play("node8_mig.scn", lib_path, 100, 2);
  return 0;
}

static void test_mig_instances_are_params_with_profile_and_uuid(void **state) {
  struct cap *c = *state;
  assert_string_equal(cap_param(c, "gpu.2.mig.instances"), "1,9"); /* MIG device 1 is empty: NOT_FOUND */
  assert_string_equal(cap_param(c, "gpu.2.mig.1.profile"), "3g.40gb");
  assert_string_equal(cap_param(c, "gpu.2.mig.9.profile"), "1g.10gb");
  assert_string_equal(cap_param(c, "gpu.2.mig.9.name"), "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
  assert_string_equal(cap_param(c, "gpu.2.mig.9.ci"), "0");
  assert_int_equal(strncmp(cap_param(c, "gpu.2.mig.9.uuid"), "MIG-", 4), 0);
  assert_string_equal(cap_param(c, "gpu.2.mig.9.mem_total_bytes"), "10468982784"); /* 9984 MiB */
  assert_null(cap_param(c, "gpu.1.mig.instances"));
}

static void test_mig_instances_have_their_own_memory_and_gpm_series(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  size_t n = cap_points(c, "mig.mem_used_bytes", "gpu=2,gi=1", t, v, 100);
  assert_true(n >= 5);
  EXPECT_NEAR(v[n - 1], 20 * GIB, 0);
  assert_true(cap_points(c, "mig.mem_free_bytes", "gpu=2,gi=9", t, v, 100) >= 5);
  EXPECT_NEAR(v[0], 9984 * MIB - 3 * GIB, 0);
  assert_true((n = cap_points(c, "mig.sm_active_pct", "gpu=2,gi=1", t, v, 100)) >= 3);
  EXPECT_NEAR(v[n - 1], 60, 1e-6);
  assert_true((n = cap_points(c, "mig.gr_active_pct", "gpu=2,gi=9", t, v, 100)) >= 3);
  EXPECT_NEAR(v[n - 1], 20, 1e-6);
  assert_string_equal(cap_def(c, "mig.gr_active_pct", "gpu=2,gi=9")->source, "nvml");
  /* the parent keeps its own memory; what MIG mode takes from it has no series */
  assert_true(cap_points(c, "gpu.mem_used_bytes", "gpu=2", t, v, 100) >= 5);
  EXPECT_NEAR(v[0], 12 * GIB, 0);
  assert_null(cap_def(c, "gpu.gr_active_pct", "gpu=2"));
  assert_null(cap_def(c, "gpu.util_pct", "gpu=2"));
  assert_null(cap_def(c, "mig.mem_used_bytes", "gpu=1,gi=1"));
  assert_int_equal(cap_notes(c, "mig 1:") + cap_notes(c, "mig 9:"), 0); /* nothing unsupported was asked */
}

static void test_gr_engine_activity_is_gpm_metric_1(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  size_t n = cap_points(c, "gpu.gr_active_pct", "gpu=0", t, v, 100);
  assert_true(n >= 3);
  for (size_t i = 0; i < n; i++)
    EXPECT_NEAR(v[i], 85, 1e-6); /* not util's 90 */
}

static int setup_nomig(void **state) {
  *state = play("node8_mig.scn", nomig_path, 100, 1.5);
  return 0;
}

static void test_driver_without_mig_calls_lists_no_instances_and_goes_on(void **state) {
  struct cap *c = *state;
  double t[100], v[100];
  assert_string_equal(cap_param(c, "gpu.2.mig_mode"), "enabled");
  assert_null(cap_param(c, "gpu.2.mig.instances"));
  assert_null(cap_def(c, "mig.mem_used_bytes", "gpu=2,gi=1"));
  assert_int_equal(cap_notes(c, "gpu2: MIG instances not listed"), 1);
  assert_true(cap_points(c, "gpu.mem_used_bytes", "gpu=2", t, v, 100) >= 5);
  EXPECT_NEAR(v[0], 12 * GIB, 0);
  assert_true(cap_points(c, "gpu.util_pct", "gpu=0", t, v, 100) >= 5);
}

#define EARLY 0.006 /* a value is stamped at most 5 ms before it was read (late readings: at their read) */

/* ---- mig_change: GI 9 destroyed at 0.5 s, GI 5 created at 1.2 s, GI 1 re-created as 1g.10gb at 2 s,
 * GI 5's memory failing from 2.5 s, the new GI 1 answering GPU_IS_LOST from 3.4 s (mig_change.scn). The
 * times fit the re-lists: periodic every 1 s at this interval, one at once after an instance's error,
 * at most once a second. ---- */

static int setup_mig_change(void **state) {
  *state = play("mig_change.scn", lib_path, 100, 4.6);
  return 0;
}

static void test_mig_instance_destroyed_ends_its_series_with_an_event(void **state) {
  struct cap *c = *state;
  double t[100], v[100], et[4];
  size_t n = cap_points(c, "mig.mem_used_bytes", "gpu=0,gi=9", t, v, 100);
  assert_true(n >= 3); /* it was sampled while it lived */
  for (size_t i = 0; i < n; i++)
    assert_true(t[i] < 0.5); /* and never after it went */
  n = cap_points(c, "mig.sm_active_pct", "gpu=0,gi=9", t, v, 100);
  assert_true(n >= 1);
  assert_true(t[n - 1] < 0.5);
  assert_int_equal(cap_events(c, "mig_instance_destroyed", "1g.10gb", "gpu=0,gi=9", et, 4), 1);
  assert_true(et[0] >= 0.5 - EARLY);
  assert_string_equal(cap_event_text(c, "mig_instance_destroyed", "gpu=0,gi=9"),
                      "MIG instance GI 9 (1g.10gb) destroyed");
  assert_false(cap_live(c, "mig.mem_used_bytes", "gpu=0,gi=9")); /* no latest value: no /metrics line */
  assert_false(cap_live(c, "mig.sm_active_pct", "gpu=0,gi=9"));
  assert_int_equal(cap_notes(c, "mig 9"), 0); /* its errors asked for a re-list, not for notes */
}

static void test_mig_instance_created_gets_series_params_and_an_event(void **state) {
  struct cap *c = *state;
  double t[100], v[100], et[4];
  size_t n = cap_points(c, "mig.mem_used_bytes", "gpu=0,gi=5", t, v, 100);
  assert_true(n >= 5);
  for (size_t i = 0; i < n; i++) {
    assert_true(t[i] >= 1.2 - EARLY);
    EXPECT_NEAR(v[i], 7 * GIB, 0);
  }
  assert_true(cap_points(c, "mig.sm_active_pct", "gpu=0,gi=5", t, v, 100) >= 1);
  assert_true(cap_live(c, "mig.mem_used_bytes", "gpu=0,gi=5"));
  assert_int_equal(cap_events(c, "mig_instance_created", "2g.20gb", "gpu=0,gi=5", et, 4), 1);
  assert_true(et[0] >= 1.2 - EARLY);
  assert_string_equal(cap_event_text(c, "mig_instance_created", "gpu=0,gi=5"), "MIG instance GI 5 (2g.20gb) created");
  assert_string_equal(cap_param(c, "gpu.0.mig.5.profile"), "2g.20gb");
  assert_string_equal(cap_param(c, "gpu.0.mig.5.mem_total_bytes"), "20937965568"); /* 19968 MiB */
  assert_string_equal(cap_param(c, "gpu.0.mig.instances"), "5,1");
  /* the instances there at open are no news */
  assert_int_equal(cap_events(c, "mig_instance_created", NULL, "gpu=0,gi=9", et, 4), 0);
}

static void test_mig_instance_failing_while_listed_is_noted_not_destroyed(void **state) {
  struct cap *c = *state;
  double t[100], v[100], et[4];
  /* GI 5: its memory answers INVALID_ARGUMENT from 2.5 s, the list still has it */
  size_t n = cap_points(c, "mig.mem_used_bytes", "gpu=0,gi=5", t, v, 100);
  assert_true(n >= 3 && t[n - 1] < 2.5);
  assert_int_equal(cap_notes(c, "gpu0 mig 5: memory info: Invalid Argument (still listed; retrying)"), 1);
  assert_int_equal(cap_events(c, "mig_instance_destroyed", NULL, "gpu=0,gi=5", et, 4), 0);
  /* GI 1 (the new one): GPU_IS_LOST on its handle from 3.4 s, its list entry too: an incomplete list */
  n = cap_points(c, "mig.mem_used_bytes", "gpu=0,gi=1", t, v, 100);
  assert_true(n >= 3 && t[n - 1] < 3.4);
  assert_int_equal(cap_notes(c, "gpu0: MIG instances: GPU is lost (retrying)"), 1);
  assert_int_equal(cap_events(c, "mig_instance_destroyed", "1g.10gb", "gpu=0,gi=1", et, 4), 0);
  /* and the GPU is not lost */
  assert_int_equal(cap_events(c, "gpu_lost", NULL, NULL, et, 4), 0);
  assert_null(strstr(c->summary, "lost"));
  n = cap_points(c, "gpu.mem_used_bytes", "gpu=0", t, v, 100);
  assert_true(n >= 25 && t[n - 1] > 3.4);
}

static void test_mig_instance_id_reused_with_another_profile_is_a_new_instance(void **state) {
  struct cap *c = *state;
  double t[100], v[100], et[4];
  size_t n = cap_points(c, "mig.mem_used_bytes", "gpu=0,gi=1", t, v, 100);
  size_t before = 0, after = 0;
  for (size_t i = 0; i < n; i++)
    if (t[i] < 2.0) {
      EXPECT_NEAR(v[i], 20 * GIB, 0); /* the 3g.40gb's */
      before++;
    } else {
      EXPECT_NEAR(v[i], 2 * GIB, 0); /* the new 1g.10gb's, never the old one's */
      after++;
    }
  assert_true(before >= 5 && after >= 3);
  assert_int_equal(cap_events(c, "mig_instance_destroyed", "3g.40gb", "gpu=0,gi=1", et, 4), 1);
  assert_true(et[0] >= 2.0 - EARLY);
  assert_int_equal(cap_events(c, "mig_instance_created", "1g.10gb", "gpu=0,gi=1", et, 4), 1);
  assert_true(et[0] >= 2.0 - EARLY);
  assert_string_equal(cap_param(c, "gpu.0.mig.1.profile"), "1g.10gb");
  assert_true(cap_live(c, "mig.mem_used_bytes", "gpu=0,gi=1"));
}

static void test_mig_metrics_show_the_instances_there_now(void **state) {
  struct cap *c = *state;
  const char *t = c->metrics;
  assert_non_null(strstr(t, "DCGM_FI_DEV_FB_USED{gpu=\"0\""));
  assert_non_null(strstr(t, "GPU_I_PROFILE=\"2g.20gb\",GPU_I_ID=\"5\""));
  assert_non_null(strstr(t, "GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"1\""));
  assert_null(strstr(t, "GPU_I_ID=\"9\""));            /* destroyed 2.7 s ago: gone, not waiting to go stale */
  assert_null(strstr(t, "GPU_I_PROFILE=\"3g.40gb\"")); /* GI 1's old profile */
}

/* ---- mig_mode: GPU 0 leaves MIG mode at 0.6 s, GPU 1 enters it (GI 2 created) ---- */

static int setup_mig_mode(void **state) {
  *state = play("mig_mode.scn", lib_path, 100, 2.0);
  return 0;
}

static void test_mig_mode_disabled_ends_the_instances_and_gives_back_utilisation(void **state) {
  struct cap *c = *state;
  double t[100], v[100], et[4];
  assert_int_equal(cap_events(c, "mig_mode", "disabled", "gpu=0", et, 4), 1);
  assert_true(et[0] >= 0.6 - EARLY);
  assert_string_equal(cap_param(c, "gpu.0.mig_mode"), "disabled");
  assert_string_equal(cap_param(c, "gpu.0.mig.instances"), "");
  assert_int_equal(cap_events(c, "mig_instance_destroyed", "3g.40gb", "gpu=0,gi=1", et, 4), 1);
  size_t n = cap_points(c, "mig.mem_used_bytes", "gpu=0,gi=1", t, v, 100);
  assert_true(n >= 3);
  assert_true(t[n - 1] < 0.6);
  assert_false(cap_live(c, "mig.mem_used_bytes", "gpu=0,gi=1"));
  /* the GPU's own utilisation, NOT_SUPPORTED under MIG mode, is read again */
  n = cap_points(c, "gpu.util_pct", "gpu=0", t, v, 100);
  assert_true(n >= 3);
  assert_true(t[0] >= 0.6 - EARLY);
  EXPECT_NEAR(v[n - 1], 80, 0);
}

static void test_mig_mode_enabled_lists_the_new_instances(void **state) {
  struct cap *c = *state;
  double t[100], v[100], et[4];
  assert_int_equal(cap_events(c, "mig_mode", "enabled", "gpu=1", et, 4), 1);
  assert_true(et[0] >= 0.6 - EARLY);
  assert_string_equal(cap_param(c, "gpu.1.mig_mode"), "enabled");
  assert_int_equal(cap_events(c, "mig_instance_created", "7g.80gb", "gpu=1,gi=2", et, 4), 1);
  assert_string_equal(cap_param(c, "gpu.1.mig.instances"), "2");
  assert_string_equal(cap_param(c, "gpu.1.mig.2.profile"), "7g.80gb");
  size_t n = cap_points(c, "mig.mem_used_bytes", "gpu=1,gi=2", t, v, 100);
  assert_true(n >= 3);
  assert_true(t[0] >= 0.6 - EARLY);
  EXPECT_NEAR(v[0], 33 * GIB, 0);
  n = cap_points(c, "gpu.util_pct", "gpu=1", t, v, 100);
  assert_true(n >= 1 && t[n - 1] < 0.6); /* refused under MIG mode: noted, and off */
  assert_int_equal(cap_notes(c, "gpu1: utilization: Not Supported"), 1);
}

/* ---- throttled: thermal slowdown 2..4 s, power cap 3..4 s, idle from 5 s ---- */

static int setup_throttled(void **state) {
  *state = play("throttled.scn", lib_path, 100, 5.6);
  return 0;
}

/* The event is on the first reading after the scenario's change: not before it (less the stamping
 * slack), and the reading before it — stamped no later than it was read — came before the change.
 * No wall-clock bound: a loaded machine may run the tick late, and the reading says when. */
static void expect_one_event(const struct cap *c, const char *kind, const char *reason, double at) {
  double t[8], pt[200], pv[200];
  size_t n = cap_events(c, kind, reason, "gpu=0", t, 8);
  if (n != 1)
    fail_msg("%zu %s events for %s, expected 1", n, kind, reason);
  if (t[0] < at - EARLY)
    fail_msg("%s %s at %.3f s, before the scenario's %.1f s", kind, reason, t[0], at);
  size_t np = cap_points(c, "gpu.throttle_reasons", "gpu=0", pt, pv, 200), before = 0;
  for (size_t i = 0; i < np && pt[i] < t[0] - 1e-9; i++)
    before = i + 1;
  if (!before || pt[before - 1] >= at)
    fail_msg("%s %s at %.3f s: the reading before it (%.3f s) is not before the scenario's %.1f s", kind, reason, t[0],
             before ? pt[before - 1] : -1.0, at);
}

static void test_throttle_reasons_start_and_stop_where_the_scenario_says(void **state) {
  struct cap *c = *state;
  expect_one_event(c, "throttle_start", "SwThermalSlowdown", 2);
  expect_one_event(c, "throttle_start", "HwThermalSlowdown", 2);
  expect_one_event(c, "throttle_start", "SwPowerCap", 3);
  expect_one_event(c, "throttle_stop", "SwThermalSlowdown", 4);
  expect_one_event(c, "throttle_stop", "HwThermalSlowdown", 4);
  expect_one_event(c, "throttle_stop", "SwPowerCap", 4);
}

static void test_throttle_idle_bit_makes_no_event(void **state) {
  struct cap *c = *state;
  double t[200], v[200];
  assert_int_equal(cap_events(c, "throttle_start", "GpuIdle", NULL, t, 200), 0);
  assert_int_equal(cap_events(c, "throttle_start", NULL, NULL, t, 200), 3);
  size_t n = cap_points(c, "gpu.throttle_reasons", "gpu=0", t, v, 200);
  assert_true(n > 0 && t[n - 1] > 5.1);
  EXPECT_NEAR(v[n - 1], 1, 0);
  for (size_t i = 0; i < n; i++)
    if (t[i] > 2.5 && t[i] < 2.9)
      EXPECT_NEAR(v[i], 0x60, 0);
}

/* ---- lost: GPU 1 lost at 2 s, GPU 2 gone at 3 s ---- */

static int setup_lost(void **state) {
  *state = play("lost.scn", lib_path, 100, 3.8);
  return 0;
}

static void test_lost_gpu_ends_with_an_event_and_others_go_on(void **state) {
  struct cap *c = *state;
  double te[4], t[200], v[200];
  assert_int_equal(cap_events(c, "gpu_lost", NULL, "gpu=1", te, 4), 1);
  if (te[0] < 2 - EARLY)
    fail_msg("gpu 1 lost at %.3f s, scenario says 2", te[0]);
  size_t n = cap_points(c, "gpu.temp_c", "gpu=1", t, v, 200);
  assert_true(n >= 10);
  assert_true(t[n - 1] < te[0]); /* nothing after the loss */
  assert_true(t[n - 1] < 2);     /* the last reading came before it */
  assert_int_equal(cap_events(c, "gpu_lost", NULL, "gpu=2", te, 4), 1);
  if (te[0] < 3 - EARLY)
    fail_msg("gpu 2 gone at %.3f s, scenario says 3", te[0]);
  n = cap_points(c, "gpu.temp_c", "gpu=2", t, v, 200);
  assert_true(n > 0 && t[n - 1] < 3 && t[n - 1] < te[0]);
  n = cap_points(c, "gpu.temp_c", "gpu=0", t, v, 200);
  assert_true(n > 0 && t[n - 1] > 3.4); /* GPU 0 carries on */
  assert_int_equal(cap_events(c, "gpu_lost", NULL, "gpu=0", te, 4), 0);
  assert_non_null(strstr(c->summary, "2 lost"));
}

/* ---- slow: GPU 0's power call takes 1.5 s between 1 and 3 s ---- */

static void test_slow_driver_call_does_not_block_sample_or_the_sink(void **state) {
  (void)state;
  set_scenario("slow.scn");
  struct gs_sink *s = gs_sink_new();
  struct cap *c = calloc(1, sizeof *c);
  struct collector_opts o = {.root = "/", .interval_ns = 100000000LL, .nvml_lib = lib_path};
  void *ctx = collector_nvml.open(&o, s, c->err, sizeof c->err);
  assert_non_null(ctx);
  int (*in_slow)(void) = (int (*)(void))sim_sym(lib_path, "gpusim_in_slow_call");
  long long (*t0)(void) = (long long (*)(void))sim_sym(lib_path, "gpusim_t0_mono_ns");
  assert_non_null(in_slow);
  c->t0 = t0();
  int seen_inside = 0;
  int64_t end = gs_mono_ns() + 4500000000LL;
  while (gs_mono_ns() < end) {
    int before = in_slow();
    assert_int_equal(collector_nvml.sample(ctx, s, gs_mono_ns()), GS_COLLECT_OK);
    cap_take(c, s);
    /* Both returned while the NVML thread was still asleep inside the driver. */
    seen_inside += before > 0 && in_slow() > 0;
    sleep_s(0.05);
  }
  collector_nvml.close(ctx);
  cap_take(c, s);
  gs_sink_free(s);
  assert_true(seen_inside >= 5);
  double t[200], v[200];
  size_t n = cap_points(c, "gpu.power_w", "gpu=0", t, v, 200), during = 0;
  for (size_t i = 0; i < n; i++)
    during += t[i] > 1.05 && t[i] < 3;
  assert_true(during <= 2);             /* each read took 1.5 s */
  assert_true(n > 0 && t[n - 1] > 3.5); /* and sampling resumed after */
  cap_free(c);
}

/* ---- hang: a driver call that never returns must not hold up close() ---- */

static void test_close_returns_while_the_thread_is_stuck_in_the_driver(void **state) {
  (void)state;
  set_scenario("hang.scn");
  struct gs_sink *s = gs_sink_new();
  char err[256];
  struct collector_opts o = {.root = "/", .interval_ns = 100000000LL, .nvml_lib = lib_path};
  void *ctx = collector_nvml.open(&o, s, err, sizeof err);
  assert_non_null(ctx);
  int (*in_slow)(void) = (int (*)(void))sim_sym(lib_path, "gpusim_in_slow_call");
  assert_non_null(in_slow);
  for (int i = 0; i < 200 && !in_slow(); i++)
    sleep_s(0.05);
  assert_true(in_slow() > 0);
  collector_nvml.close(ctx);  /* waits ~2 s, then leaves the thread behind */
  assert_true(in_slow() > 0); /* close returned while the call was still in progress */
  /* The abandoned thread must never write into the sink again, even after we free it. */
  gs_batch_free(gs_sink_take(s));
  gs_sink_free(s);
}

/* ---- dcgm_mixed: an H100 with GPM beside an A100 without, DCGM (simulated libdcgm.so.4) on ---- */

static int setup_dcgm(void **state) {
  setenv("GPUSCOPE_DCGM_LIB", dcgm_path, 1);
  *state = play("dcgm_mixed.scn", lib_path, 100, 2.0);
  unsetenv("GPUSCOPE_DCGM_LIB");
  return 0;
}

static void expect_all(const struct cap *c, const char *name, const char *labels, double want) {
  double t[100], v[100];
  size_t n = cap_points(c, name, labels, t, v, 100);
  if (n < 5)
    fail_msg("%s{%s}: %zu points", name, labels, n);
  for (size_t i = 0; i < n; i++)
    EXPECT_NEAR(v[i], want, 1e-9);
}

static void test_dcgm_reads_only_the_gpu_without_gpm_found_by_uuid(void **state) {
  struct cap *c = *state;
  expect_all(c, "gpu.sm_active_pct", "gpu=1", 40); /* DCGM's gpu 0: the A100's UUID */
  expect_all(c, "gpu.sm_occupancy_pct", "gpu=1", 15);
  expect_all(c, "gpu.dram_active_pct", "gpu=1", 25);
  expect_all(c, "gpu.sm_active_pct", "gpu=0", 70); /* GPM's */
  assert_string_equal(cap_param(c, "gpu.1.sm_active_from"), "dcgm");
  assert_null(cap_param(c, "gpu.0.sm_active_from"));
  assert_string_equal(cap_param(c, "nvml.dcgm"), "embedded");
  assert_non_null(strstr(c->summary, "GPM on 1 of 2, DCGM profiling (embedded)"));
}

static void test_dcgm_field_it_does_not_give_is_absent_and_noted_once(void **state) {
  struct cap *c = *state;
  assert_null(cap_def(c, "gpu.tensor_active_pct", "gpu=1"));
  assert_int_equal(cap_notes(c, "gpu1: DCGM gpu.tensor_active_pct: not supported"), 1);
  /* the blank before DCGM's first watch period ends is no answer yet: not noted */
  assert_int_equal(cap_notes(c, "DCGM gpu.sm_active_pct"), 0);
}

static void test_dcgm_series_reach_metrics_under_dcgm_names(void **state) {
  struct cap *c = *state;
  assert_non_null(strstr(c->metrics, "DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\""));
  assert_non_null(strstr(c->metrics, "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\""));
}

/* ---- dips: 200 ms idle every 2 s, agent interval 500 ms ---- */

static int setup_dips(void **state) {
  setenv("GPUSIM_JOBPID", "4321", 1);
  *state = play("dips.scn", lib_path, 500, 4.3);
  return 0;
}

static void test_dips_shorter_than_the_interval_are_all_seen(void **state) {
  struct cap *c = *state;
  double t[400], v[400];
  for (int g = 0; g < 8; g++) {
    char lab[16];
    snprintf(lab, sizeof lab, "gpu=%d", g);
    size_t n = cap_points(c, "gpu.util_pct", lab, t, v, 400);
    /* 4.3 s at a 500 ms interval is 9 ticks; the driver took 25 samples. */
    assert_true(n >= 20);
    for (int dip = 0; dip < 2; dip++) {
      double from = 1.8 + 2 * dip, to = 2.0 + 2 * dip;
      size_t zeros = 0;
      for (size_t i = 0; i < n; i++) {
        int inside = t[i] > from + 0.01 && t[i] < to - 0.01;
        if (inside && v[i] != 0)
          fail_msg("gpu %d: %g at %.3f s inside a dip", g, v[i], t[i]);
        zeros += inside;
      }
      if (!zeros)
        fail_msg("gpu %d: the dip at %.1f s is missing", g, from);
    }
  }
}

/* ---- opening without a usable library, and `gpuscope devices` ---- */

static void test_open_without_library_is_off_with_a_reason(void **state) {
  (void)state;
  struct gs_sink *s = gs_sink_new();
  char err[256] = "";
  struct collector_opts o = {.root = "/", .interval_ns = 100000000LL, .nvml_lib = "/nonexistent/libnvidia-ml.so.1"};
  assert_null(collector_nvml.open(&o, s, err, sizeof err));
  assert_non_null(strstr(err, "cannot load /nonexistent/libnvidia-ml.so.1"));
  unsetenv("GPUSIM_SCENARIO");
  o.nvml_lib = lib_path;
  assert_null(collector_nvml.open(&o, s, err, sizeof err));
  assert_string_equal(err, "nvmlInit: Driver Not Loaded");
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(b->n_series + b->n_points + b->n_params, 0);
  gs_batch_free(b);
  gs_sink_free(s);
}

static char *devices_output(const char *scn, const char *lib, int json, int *rc) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  if (scn)
    set_scenario(scn);
  else
    unsetenv("GPUSIM_SCENARIO");
  struct nvml_devices d;
  *rc = collect_devices_list(&d, lib);
  if (!*rc)
    report_devices(f, &d, json);
  collect_devices_done(&d);
  fclose(f);
  return buf;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p++)
    n++;
  return n;
}

static void test_devices_json_lists_each_gpu_with_families(void **state) {
  (void)state;
  int rc;
  char *out = devices_output("busy8_h200.scn", lib_path, 1, &rc);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "{\"driver_version\": \"550.54.15\", \"devices\": ["));
  assert_int_equal(count(out, "\"index\": "), 8);
  assert_non_null(strstr(out,
                         "\"index\": 7, \"name\": \"NVIDIA H200\", \"uuid\": "
                         "\"GPU-5a1c0000-0000-4000-8000-000000000007\", \"pci_bus_id\": \"00000000:88:00.0\", "
                         "\"memory_total_bytes\": 150754820096, \"cc\": \"9.0\", \"mig_mode\": \"disabled\", "
                         "\"families\": {\"basic\": true, \"samples\": true, \"per_process\": true, \"gpm\": true}, "
                         "\"health\": {\"healthy\": true, \"why\": null, \"ecc_corrected\": 0, \"ecc_uncorrected\": 0, "
                         "\"remapped_rows_correctable\": 0, \"remapped_rows_uncorrectable\": 0, \"remap_pending\": 0, "
                         "\"remap_failure\": 0, \"retired_pages_sbe\": 0, \"retired_pages_dbe\": 0, "
                         "\"retired_pages_pending\": 0, \"pcie_replays\": 0, \"nvlink_errors\": null}}"));
  free(out);
  out = devices_output("mig.scn", lib_path, 1, &rc);
  assert_non_null(strstr(out, "\"mig_mode\": \"enabled\", \"families\": {\"basic\": true, \"samples\": false, "
                              "\"per_process\": true, \"gpm\": false}"));
  free(out);
}

static void test_devices_lists_mig_instances(void **state) {
  (void)state;
  int rc;
  char *out = devices_output("node8_mig.scn", lib_path, 1, &rc);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "\"mig_mode\": \"enabled\", \"families\": {\"basic\": true, \"samples\": false, "
                              "\"per_process\": true, \"gpm\": false}, \"mig_instances\": [{\"gpu_instance_id\": 1, "
                              "\"compute_instance_id\": 0, \"profile\": \"3g.40gb\", \"name\": \"NVIDIA H100 80GB HBM3 "
                              "MIG 3g.40gb\", \"uuid\": \"MIG-"));
  assert_non_null(strstr(out, "\"profile\": \"1g.10gb\""));
  assert_int_equal(count(out, "\"mig_instances\""), 1); /* only on the GPU in MIG mode */
  free(out);
  out = devices_output("node8_mig.scn", lib_path, 0, &rc);
  assert_non_null(strstr(out, "  MIG 1g.10gb  GPU instance 9, compute instance 0  memory 9.8 GiB  (UUID: MIG-"));
  free(out);
}

static void test_devices_text_names_families_and_missing_ones(void **state) {
  (void)state;
  int rc;
  char *out = devices_output("old_basic.scn", lib_path, 0, &rc);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "NVIDIA driver 470.223.02, 1 GPU\n"));
  assert_non_null(strstr(out, "GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-5a1c0000-0000-4000-8000-000000000000)\n"));
  assert_non_null(strstr(out, "CC 7.0  MIG n/a  families: basic\n"));
  free(out);
  out = devices_output("idle1.scn", lib_path, 0, &rc);
  assert_non_null(strstr(out, "families: basic samples per-process GPM\n"));
  free(out);
}

static void test_devices_without_driver_is_enoent_with_reason(void **state) {
  (void)state;
  int rc;
  char *out = devices_output(NULL, lib_path, 1, &rc);
  assert_int_equal(rc, GS_ENOENT);
  assert_string_equal(gs_last_error(), "nvmlInit: Driver Not Loaded");
  assert_string_equal(out, "");
  free(out);
}

/* ---- the groups, and running them ---- */

struct group {
  const char *name;
  const struct CMUnitTest *tests;
  size_t n;
  CMFixtureFunction setup, teardown;
};

#define GROUP(name, setup, teardown, ...)                                                                              \
  static const struct CMUnitTest name##_tests[] = {__VA_ARGS__};                                                       \
  static int run_##name(void) {                                                                                        \
    return _cmocka_run_group_tests(#name, name##_tests, sizeof name##_tests / sizeof *name##_tests, setup, teardown);  \
  }

GROUP(idle1, setup_idle1, teardown_cap, cmocka_unit_test(test_idle_gpu_util_comes_from_rates_as_zero),
      cmocka_unit_test(test_idle_static_facts_are_params),
      cmocka_unit_test(test_idle_unsupported_fan_is_absent_and_noted_once),
      cmocka_unit_test(test_idle_gpm_reads_what_exists_and_notes_the_rest),
      cmocka_unit_test(test_idle_bit_is_in_mask_but_makes_no_event),
      cmocka_unit_test(test_idle_memory_uses_v2_accounting))
GROUP(busy8, setup_busy8, teardown_cap, cmocka_unit_test(test_busy8_every_gpu_has_every_series),
      cmocka_unit_test(test_busy8_util_is_every_driver_sample_at_its_time),
      cmocka_unit_test(test_busy8_instant_values_are_stamped_on_the_run_loop_grid),
      cmocka_unit_test(test_busy8_energy_is_a_counter_in_joules),
      cmocka_unit_test(test_busy8_basic_values_match_the_scenario),
      cmocka_unit_test(test_busy8_gpm_values_are_interval_averages),
      cmocka_unit_test(test_busy8_process_series_carry_the_job_pid))
GROUP(old_basic, setup_old_basic, teardown_cap, cmocka_unit_test(test_old_basic_missing_families_are_absent_and_noted),
      cmocka_unit_test(test_old_basic_util_follows_the_rates))
GROUP(legacy, setup_legacy, teardown_cap, cmocka_unit_test(test_legacy_library_falls_back_to_unversioned_calls))
GROUP(temp_calls, setup_temp_calls, teardown_cap, cmocka_unit_test(test_temperature_comes_from_the_versioned_call),
      cmocka_unit_test(test_temperature_falls_back_when_the_versioned_call_refuses_its_version))
GROUP(temp_calls_legacy, setup_temp_calls_legacy, teardown_cap,
      cmocka_unit_test(test_legacy_library_reads_temperature_with_the_deprecated_call))
GROUP(mig, setup_mig, teardown_cap, cmocka_unit_test(test_mig_gpu_keeps_memory_and_loses_utilisation))
GROUP(mig_instances, setup_mig_instances, teardown_cap,
      cmocka_unit_test(test_mig_instances_are_params_with_profile_and_uuid),
      cmocka_unit_test(test_mig_instances_have_their_own_memory_and_gpm_series),
      cmocka_unit_test(test_gr_engine_activity_is_gpm_metric_1))
GROUP(mig_change, setup_mig_change, teardown_cap,
      cmocka_unit_test(test_mig_instance_destroyed_ends_its_series_with_an_event),
      cmocka_unit_test(test_mig_instance_created_gets_series_params_and_an_event),
      cmocka_unit_test(test_mig_instance_id_reused_with_another_profile_is_a_new_instance),
      cmocka_unit_test(test_mig_instance_failing_while_listed_is_noted_not_destroyed),
      cmocka_unit_test(test_mig_metrics_show_the_instances_there_now))
GROUP(mig_mode, setup_mig_mode, teardown_cap,
      cmocka_unit_test(test_mig_mode_disabled_ends_the_instances_and_gives_back_utilisation),
      cmocka_unit_test(test_mig_mode_enabled_lists_the_new_instances))
GROUP(nomig, setup_nomig, teardown_cap, cmocka_unit_test(test_driver_without_mig_calls_lists_no_instances_and_goes_on))
GROUP(throttled, setup_throttled, teardown_cap,
      cmocka_unit_test(test_throttle_reasons_start_and_stop_where_the_scenario_says),
      cmocka_unit_test(test_throttle_idle_bit_makes_no_event))
GROUP(lost, setup_lost, teardown_cap, cmocka_unit_test(test_lost_gpu_ends_with_an_event_and_others_go_on))
GROUP(slow, NULL, NULL, cmocka_unit_test(test_slow_driver_call_does_not_block_sample_or_the_sink))
GROUP(hang, NULL, NULL, cmocka_unit_test(test_close_returns_while_the_thread_is_stuck_in_the_driver))
GROUP(dcgm, setup_dcgm, teardown_cap, cmocka_unit_test(test_dcgm_reads_only_the_gpu_without_gpm_found_by_uuid),
      cmocka_unit_test(test_dcgm_field_it_does_not_give_is_absent_and_noted_once),
      cmocka_unit_test(test_dcgm_series_reach_metrics_under_dcgm_names))
GROUP(dips, setup_dips, teardown_cap, cmocka_unit_test(test_dips_shorter_than_the_interval_are_all_seen))
GROUP(devices, NULL, NULL, cmocka_unit_test(test_open_without_library_is_off_with_a_reason),
      cmocka_unit_test(test_devices_json_lists_each_gpu_with_families),
      cmocka_unit_test(test_devices_lists_mig_instances),
      cmocka_unit_test(test_devices_text_names_families_and_missing_ones),
      cmocka_unit_test(test_devices_without_driver_is_enoent_with_reason))

static const struct {
  const char *name;
  int (*run)(void);
} groups[] = {
    {"idle1", run_idle1},
    {"busy8", run_busy8},
    {"old_basic", run_old_basic},
    {"legacy", run_legacy},
    {"temp_calls", run_temp_calls},
    {"temp_calls_legacy", run_temp_calls_legacy},
    {"mig", run_mig},
    {"mig_instances", run_mig_instances},
    {"mig_change", run_mig_change},
    {"mig_mode", run_mig_mode},
    {"nomig", run_nomig},
    {"throttled", run_throttled},
    {"lost", run_lost},
    {"slow", run_slow},
    {"hang", run_hang},
    {"dips", run_dips},
    {"dcgm", run_dcgm},
    {"devices", run_devices},
};
#define N_GROUPS (sizeof groups / sizeof *groups)

static void find_paths(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  const char *dir = dirname(exe);
  const char *env = getenv("GPUSIM_LIB");
  if (env && *env)
    snprintf(lib_path, sizeof lib_path, "%s", env);
  else
    snprintf(lib_path, sizeof lib_path, "%s/../gpusim/libnvidia-ml.so.1", dir);
  snprintf(legacy_path, sizeof legacy_path, "%.*s/legacy/libnvidia-ml.so.1", (int)(strrchr(lib_path, '/') - lib_path),
           lib_path);
  snprintf(nomig_path, sizeof nomig_path, "%.*s/nomig/libnvidia-ml.so.1", (int)(strrchr(lib_path, '/') - lib_path),
           lib_path);
  snprintf(dcgm_path, sizeof dcgm_path, "%.*s/libdcgm.so.4", (int)(strrchr(lib_path, '/') - lib_path), lib_path);
#ifdef GS_TESTS_DIR
  snprintf(scn_dir, sizeof scn_dir, "%s/gpusim/scenarios", GS_TESTS_DIR);
#else
  env = getenv("GS_SOURCE_DIR");
  snprintf(scn_dir, sizeof scn_dir, "%s/tests/gpusim/scenarios", env ? env : ".");
#endif
}

/* Runs every group at once, each in its own process with its output in a temporary file, then
 * prints the outputs in order. Returns the number of failed groups. */
static int run_all(void) {
  pid_t pid[N_GROUPS];
  FILE *out[N_GROUPS];
  int failed = 0;
  fflush(stdout);
  fflush(stderr);
  for (size_t i = 0; i < N_GROUPS; i++) {
    out[i] = tmpfile();
    if (!out[i])
      return 1;
    pid[i] = fork();
    if (pid[i] == 0) {
      dup2(fileno(out[i]), 1);
      dup2(fileno(out[i]), 2);
      int rc = groups[i].run();
      fflush(stdout);
      fflush(stderr);
      _exit(rc ? 1 : 0); /* _exit: the hang group's thread is still asleep in the driver */
    }
  }
  for (size_t i = 0; i < N_GROUPS; i++) {
    int ws = 0;
    waitpid(pid[i], &ws, 0);
    int ok = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    failed += !ok;
    rewind(out[i]);
    char line[1024];
    while (fgets(line, sizeof line, out[i]))
      fputs(line, stdout);
    if (!WIFEXITED(ws))
      printf("[  FAILED  ] group %s died (signal %d)\n", groups[i].name, WTERMSIG(ws));
    fclose(out[i]);
  }
  printf("%d of %zu NVML groups failed\n", failed, N_GROUPS);
  return failed;
}

int main(int argc, char **argv) {
  find_paths();
  unsetenv("GPUSCOPE_NVML_LIB");
  if (argc > 1) {
    for (size_t i = 0; i < N_GROUPS; i++)
      if (!strcmp(argv[1], groups[i].name))
        return groups[i].run();
    fprintf(stderr, "unknown group '%s'\n", argv[1]);
    return 2;
  }
  return run_all() ? 1 : 0;
}
