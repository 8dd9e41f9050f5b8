/* libFuzzer target for the cgroup-path parser of collect/proc_pid_owner.c, which reads names that
 * whoever made a cgroup chose (a runtime, Slurm, a user with a delegated subtree):
 *  1. any bytes parse without a crash, a hang or a read past the path;
 *  2. what comes out has the shape its runtime gives it, whatever the input — a runtime from the
 *     list, a container id of 64 lowercase hex digits, a pod UID 8-4-4-4-12, a job of digits — so no
 *     byte that could split a label (',', '=', '"') or break a terminal reaches a caller.
 * Built with clang's -fsanitize=fuzzer,address,undefined by tests/fuzz/CMakeLists.txt; the file's
 * readers of /proc and the kubelet's folders are linked to stubs (they are not what is fuzzed). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collect.h"

#define REQUIRE(c)                                                                                                     \
  do {                                                                                                                 \
    if (!(c))                                                                                                          \
      abort();                                                                                                         \
  } while (0)

const char *collect_path(const struct collector_opts *o, const char *path, char *buf, size_t n) {
  (void)o;
  strncpy(buf, path, n - 1);
  buf[n - 1] = 0;
  return buf;
}

ssize_t collect_proc_read(const char *root, pid_t pid, const char *file, char *buf, size_t n) {
  (void)root, (void)pid, (void)file, (void)buf, (void)n;
  return -1;
}

static void require_charset(const char *s, const char *allowed, size_t len_a, size_t len_b) {
  size_t l = strlen(s);
  REQUIRE(l == 0 || l == len_a || l == len_b);
  REQUIRE(strspn(s, allowed) == l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *path = malloc(size + 1);
  if (!path)
    return 0;
  memcpy(path, data, size);
  path[size] = 0;
  struct collect_owner o;
  memset(&o, 0, sizeof o);
  collect_owner_parse(path, &o);
  static const char *const runtimes[] = {"", "docker", "containerd", "cri-o", "podman"};
  int known = 0;
  for (size_t i = 0; i < sizeof runtimes / sizeof *runtimes; i++)
    known |= !strcmp(o.runtime, runtimes[i]);
  REQUIRE(known);
  require_charset(o.container, "0123456789abcdef", 64, 64);
  require_charset(o.pod_uid, "0123456789abcdef-", 36, 36);
  if (o.pod_uid[0])
    REQUIRE(o.pod_uid[8] == '-' && o.pod_uid[13] == '-' && o.pod_uid[18] == '-' && o.pod_uid[23] == '-');
  REQUIRE(strspn(o.hpc_job, "0123456789") == strlen(o.hpc_job) && strlen(o.hpc_job) <= 20);
  free(path);
  return 0;
}
