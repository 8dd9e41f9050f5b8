/* collect/collect: the registry of collectors and helpers they share. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "collect/collect.h"

const struct collector *const collect_registry[] = {&collector_host,
                                                    &collector_proctree,
                                                    &collector_nvml,
                                                    &collector_rocm,
                                                    &collector_gputrees,
                                                    &collector_gpuowners,
                                                    NULL};

const char *collect_path(const struct collector_opts *o, const char *path, char *buf, size_t n) {
  const char *root = o && o->root ? o->root : "/";
  if (!strcmp(root, "/") || !*root)
    snprintf(buf, n, "%s", path);
  else
    snprintf(buf, n, "%s%s%s", root, root[strlen(root) - 1] == '/' ? "" : "/", path[0] == '/' ? path + 1 : path);
  return buf;
}
