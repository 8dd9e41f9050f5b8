/* store/store_meta: what every back end's edits share — the tags string a person edits with
 * `gpuscope tag` ("k=v,k2=v2", the format `run --tag` writes), checked and rewritten here so that
 * both back ends store the same text; the back ends' writes are sqlite_meta.c and pg_meta.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

/* Removes key k (length klen) from the pairs of tags. */
static void tags_drop(char *tags, const char *k, size_t klen) {
  char *p = tags;
  while (*p) {
    char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > klen && !strncmp(p, k, klen) && p[klen] == '=') {
      if (end) {
        memmove(p, end + 1, strlen(end + 1) + 1);
        continue;
      }
      if (p > tags)
        p--; /* the last pair: its comma goes too */
      *p = 0;
      break;
    }
    p = end ? end + 1 : p + len;
  }
}

static int key_check(const char *k, size_t klen, const char *what) {
  if (!klen)
    return gs_fail(GS_EINVAL, "tag '%s' has an empty key", what);
  for (size_t i = 0; i < klen; i++)
    if (k[i] == ',' || k[i] == '=' || (unsigned char)k[i] < 0x20)
      return gs_fail(GS_EINVAL, "tag key in '%s' holds ',', '=' or a control character", what);
  return GS_OK;
}

int store_tags_edit(char *tags, size_t n, char *const *set, size_t nset, char *const *rm, size_t nrm) {
  char *buf = malloc(n);
  if (!buf)
    return gs_fail(GS_ENOMEM, "out of memory");
  snprintf(buf, n, "%s", tags);
  int rc = GS_OK;
  for (size_t i = 0; i < nrm && !rc; i++)
    if (!(rc = key_check(rm[i], strlen(rm[i]), rm[i])))
      tags_drop(buf, rm[i], strlen(rm[i]));
  for (size_t i = 0; i < nset && !rc; i++) {
    const char *eq = strchr(set[i], '=');
    if (!eq) {
      rc = gs_fail(GS_EINVAL, "tag '%s' is not KEY=VALUE", set[i]);
      break;
    }
    if ((rc = key_check(set[i], (size_t)(eq - set[i]), set[i])))
      break;
    int ctl = 0;
    for (const char *c = eq + 1; *c; c++)
      ctl |= (unsigned char)*c < 0x20 || *c == 0x7f;
    if (ctl || strchr(eq + 1, ',')) {
      rc = gs_fail(GS_EINVAL, "tag '%s': a value holds no comma nor control character", set[i]);
      break;
    }
    tags_drop(buf, set[i], (size_t)(eq - set[i]));
    size_t len = strlen(buf);
    if (len + (len ? 1 : 0) + strlen(set[i]) + 1 > n) {
      rc = gs_fail(GS_EINVAL, "the tags of a run are at most %zu bytes in all", n - 1);
      break;
    }
    snprintf(buf + len, n - len, "%s%s", len ? "," : "", set[i]);
  }
  if (!rc)
    memcpy(tags, buf, strlen(buf) + 1);
  free(buf);
  return rc;
}
