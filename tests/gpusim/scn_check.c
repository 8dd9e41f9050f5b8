/* gpusim/scn_check: parses every scenario in a folder and checks the facts the NVML tests rely on,
 * plus the simulator's timeline arithmetic (values, inheritance, periods, integrals) and the
 * parser's error messages. Exits 1 on the first failure. usage: gpusim_scn_check SCENARIO_DIR */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpusim.h"

static int failed;

#define EXPECT(cond, ...)                                                                                              \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                                  \
      fprintf(stderr, __VA_ARGS__);                                                                                    \
      fputc('\n', stderr);                                                                                             \
      failed = 1;                                                                                                      \
    }                                                                                                                  \
  } while (0)

static int load(const char *dir, const char *name, struct sim_scn *s) {
  char path[1024], err[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (sim_scn_load(path, s, err, sizeof err)) {
    fprintf(stderr, "FAIL %s\n", err);
    failed = 1;
    return -1;
  }
  return 0;
}

static void check_named(const char *dir) {
  struct sim_scn s;
  if (!load(dir, "busy8_h200.scn", &s)) {
    EXPECT(s.ndev == 8, "%u devices", s.ndev);
    EXPECT(!strcmp(s.dev[0].name, "NVIDIA H200"), "name '%s'", s.dev[0].name);
    EXPECT(s.dev[7].gpm && s.dev[7].cc_major == 9, "GPM on a CC 9 device");
    EXPECT(sim_value(&s.dev[0], K_UTIL, 1.0) == 97, "util at 1 s");
    EXPECT(sim_value(&s.dev[0], K_UTIL, 2.2) == 5, "stall at 2.2 s");
    EXPECT(sim_value(&s.dev[3], K_UTIL, 1.7) == 40, "straggler at 1.7 s");
    EXPECT(sim_value(&s.dev[3], K_UTIL, 2.2) == 5, "the stall reaches the straggler too");
    EXPECT(sim_value(&s.dev[3], K_UTIL, 3) == 40, "straggler after the stall");
    EXPECT(sim_value(&s.dev[0], K_MEM_USED, 3) == 120.0 * (1 << 30), "inherited mem_used");
    EXPECT(sim_seg_at(&s.dev[0], 1)->nprocs == 1 && sim_seg_at(&s.dev[0], 1)->procs[0].jobpid, "$JOBPID");
    /* energy: 640 W for 2 s, 180 W for 0.5 s */
    EXPECT(fabs(sim_integral(&s.dev[0], K_POWER, 0, 2.5) - (1280 + 90)) < 1e-9, "power integral %g",
           sim_integral(&s.dev[0], K_POWER, 0, 2.5));
    sim_scn_free(&s);
  }
  if (!load(dir, "dips.scn", &s)) {
    EXPECT(s.ndev == 8 && s.dev[5].period == 2, "8 periodic devices");
    EXPECT(sim_value(&s.dev[5], K_UTIL, 3.85) == 0 && sim_value(&s.dev[5], K_UTIL, 4.05) == 100, "dip repeats");
    EXPECT(fabs(sim_integral(&s.dev[0], K_UTIL, 0, 4) - 2 * 180) < 1e-6, "util integral over two periods %g",
           sim_integral(&s.dev[0], K_UTIL, 0, 4));
    EXPECT(fabs(sim_integral(&s.dev[0], K_UTIL, 1, 3) - 180) < 1e-6, "util integral across a period edge");
    sim_scn_free(&s);
  }
  if (!load(dir, "throttled.scn", &s)) {
    EXPECT(sim_value(&s.dev[0], K_THROTTLE, 2.5) == 0x60, "thermal bits");
    EXPECT(sim_value(&s.dev[0], K_THROTTLE, 3.5) == 0x64, "plus power cap");
    EXPECT(sim_value(&s.dev[0], K_THROTTLE, 5.5) == 0x1, "idle");
    sim_scn_free(&s);
  }
  if (!load(dir, "lost.scn", &s)) {
    EXPECT(s.ndev == 3 && s.dev[1].lost_at == 2 && s.dev[2].gone_at == 3 && isinf(s.dev[0].lost_at), "faults");
    sim_scn_free(&s);
  }
  if (!load(dir, "mig.scn", &s)) {
    EXPECT(s.dev[0].mig == 1 && s.dev[1].mig == 0, "MIG on GPU 0 only");
    sim_scn_free(&s);
  }
  if (!load(dir, "old_basic.scn", &s)) {
    EXPECT(s.dev[0].nfaults == 4 && !s.dev[0].gpm, "four faults, no GPM");
    sim_scn_free(&s);
  }
  if (!load(dir, "slow.scn", &s)) {
    EXPECT(s.dev[0].nfaults == 2 && s.dev[0].faults[1].slow_ms == 1500 && s.dev[0].faults[1].from == 1 &&
               s.dev[0].faults[1].until == 3 && s.dev[1].nfaults == 1 && !s.dev[1].faults[0].slow_ms,
           "slow power on GPU 0 only");
    sim_scn_free(&s);
  }
  if (!load(dir, "node8_mig.scn", &s)) {
    const struct sim_dev *d = &s.dev[2], *a = &d->migs[0], *b = &d->migs[1];
    EXPECT(d->mig == 1 && d->nmigs == 2 && s.dev[1].nmigs == 0, "GPU 2 in MIG mode with two instances");
    EXPECT(a->gi == 1 && a->slot == 0 && !strcmp(a->profile, "3g.40gb") && a->parent == d, "GI 1: 3g.40gb, slot 0");
    EXPECT(b->gi == 9 && b->ci == 0 && b->slot == 2 && b->mem_total == 9984ULL << 20, "GI 9: 1g.10gb, slot 2");
    EXPECT(!strcmp(b->name, "NVIDIA H100 80GB HBM3 MIG 1g.10gb") && !strncmp(b->uuid, "MIG-", 4), "'%s' '%s'", b->name,
           b->uuid);
    EXPECT(sim_value(a, K_MEM_USED, 1) == 20.0 * (1 << 30) && sim_value(b, K_GR_ACTIVE, 4) == 20, "instance timelines");
    EXPECT(sim_value(d, K_GR_ACTIVE, 1) == 85 && a->period == 6, "GPU 2's own gr_active, the instance's period");
    sim_scn_free(&s);
  }
  if (!load(dir, "mig_change.scn", &s)) {
    const struct sim_dev *d = &s.dev[0], *old1 = &d->migs[0], *new1 = &d->migs[3];
    EXPECT(d->nmigs == 4 && old1->gi == 1 && new1->gi == 1 && new1->slot == 0, "GI 1 declared twice, on slot 0");
    EXPECT(old1->gone_at == 2 && new1->from_at == 2 && isinf(new1->gone_at), "GI 1 reused from 2 s");
    EXPECT(sim_mig_alive(&d->migs[1], 0.4) && !sim_mig_alive(&d->migs[1], 0.5), "GI 9 gone at 0.5 s");
    EXPECT(!sim_mig_alive(&d->migs[2], 1.1) && sim_mig_alive(&d->migs[2], 1.2), "GI 5 there from 1.2 s");
    EXPECT(sim_value(new1, K_MEM_USED, 3) == 2.0 * (1 << 30) && sim_value(old1, K_MEM_USED, 1) == 20.0 * (1 << 30),
           "each GI 1 its own timeline");
    sim_scn_free(&s);
  }
  if (!load(dir, "mig_mode.scn", &s)) {
    const struct sim_dev *a = &s.dev[0], *b = &s.dev[1];
    EXPECT(sim_mig_mode(a, 0.5) == 1 && sim_mig_mode(a, 0.6) == 0, "GPU 0 leaves MIG mode at 0.6 s");
    EXPECT(sim_mig_mode(b, 0.5) == 0 && sim_mig_mode(b, 0.6) == 1 && b->migs[0].from_at == 0.6, "GPU 1 enters it");
    sim_scn_free(&s);
  }
  if (!load(dir, "idle1.scn", &s)) {
    EXPECT(sim_value(&s.dev[0], K_GR_ACTIVE, 1) == sim_value(&s.dev[0], K_UTIL, 1), "gr_active defaults to util");
    sim_scn_free(&s);
  }
}

static void check_errors(void) {
  static const struct {
    const char *text, *msg;
  } bad[] = {
      {"at 0 util=1\n", "outside a device block"},
      {"device 0\n  at 0 utl=1\n", "unknown key 'utl'"},
      {"device 0\n  fault powr NOT_SUPPORTED\n", "unknown call 'powr'"},
      {"device 0\n  fault power NOPE\n", "unknown error code"},
      {"device 0\n  at 0 throttle=Hot\n", "unknown throttle reason"},
      {"device 0\n  period 2\n  at 3 util=1\n", "not inside its period"},
      {"device 0\n  at 0 procs=abc:1GiB\n", "bad pid"},
      {"device 0\n  in 3 at 0 mem_used=1GiB\n", "'in' wants the GPU-instance id"},
      {"device 0\n  mig_instance 1 0 1g.10gb\n", "mig_instance wants"},
      {"device 0\n  mig_instance 1 0 1g.10gb 10GiB\n  mig_instance 1 0 1g.10gb 10GiB\n", "GPU instance 1 twice"},
      {"device 0\n  mig_instance 1 0 1g.10gb 10GiB\n  in 1 gone 2\n  mig_instance 1 0 1g.10gb 10GiB slot 1 from 1\n",
       "GPU instance 1 twice at once"},
      {"device 0\n  mig_instance 1 0 1g.10gb 10GiB\n  mig_instance 2 0 1g.10gb 10GiB slot 0 from 1\n",
       "MIG device slot 0 twice at once"},
      {"device 0\n  mig_instance 1 0 1g.10gb 10GiB at 3\n", "mig_instance wants"},
      {"device 0\n  mig on at 3\n", "mig wants on|off|unsupported [from T]"},
  };
  char path[] = "/tmp/gpusim-scn-XXXXXX";
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, bad[i].text, strlen(bad[i].text)) < 0) {
      EXPECT(0, "cannot write a temporary file");
      return;
    }
    close(fd);
    struct sim_scn s;
    char err[512] = "";
    int rc = sim_scn_load(path, &s, err, sizeof err);
    EXPECT(rc == -1 && strstr(err, bad[i].msg), "'%s' -> '%s'", bad[i].text, err);
    unlink(path);
    strcpy(path, "/tmp/gpusim-scn-XXXXXX");
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s SCENARIO_DIR\n", argv[0]);
    return 2;
  }
  DIR *d = opendir(argv[1]);
  if (!d) {
    perror(argv[1]);
    return 1;
  }
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".scn"))
      continue;
    struct sim_scn s;
    if (!load(argv[1], e->d_name, &s)) {
      for (unsigned i = 0; i < s.ndev; i++)
        EXPECT(s.dev[i].nsegs >= 1 && s.dev[i].segs[0].t == 0, "%s: device %u timeline", e->d_name, i);
      sim_scn_free(&s);
    }
    n++;
  }
  closedir(d);
  EXPECT(n >= 9, "only %d scenarios", n);
  check_named(argv[1]);
  check_errors();
  printf("%s: %d scenarios\n", failed ? "FAILED" : "ok", n);
  return failed;
}
