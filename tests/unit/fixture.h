/* tests/unit/fixture: the unit tests' way to a fixture tree of tests/fixtures (README.md there):
 * fixture_copy() lays a checked-in tree over a scratch root — folders made as needed, files
 * replaced, nothing else touched — so a test plays a source's successive states by laying each
 * tree in turn over one root; fixture_remove() deletes a path and everything under it. Plain C
 * (no shell), so a path with a quote in it is just a path. */
#ifndef GS_TEST_FIXTURE_H
#define GS_TEST_FIXTURE_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GS_FIXTURES_DIR GS_TESTS_DIR "/fixtures"

/* Copies the tree at src over dst (created when absent). Returns 0, or -1 on the first error. */
static inline int fixture_copy(const char *src, const char *dst) {
  DIR *d = opendir(src);
  if (!d || (mkdir(dst, 0755) && errno != EEXIST)) {
    if (d)
      closedir(d);
    return -1;
  }
  int rc = 0;
  struct dirent *e;
  while (!rc && (e = readdir(d))) {
    char from[1024], to[1024];
    struct stat st;
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    if (snprintf(from, sizeof from, "%s/%s", src, e->d_name) >= (int)sizeof from ||
        snprintf(to, sizeof to, "%s/%s", dst, e->d_name) >= (int)sizeof to || lstat(from, &st)) {
      rc = -1;
    } else if (S_ISDIR(st.st_mode)) {
      rc = fixture_copy(from, to);
    } else {
      FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
      char buf[4096];
      size_t n;
      if (!out)
        rc = -1;
      while (!rc && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
          rc = -1;
      if (in && ferror(in))
        rc = -1;
      if (out && fclose(out))
        rc = -1;
      if (in)
        fclose(in);
    }
  }
  closedir(d);
  return rc;
}

/* Copies tests/fixtures/<tree> over root. Returns as fixture_copy(). */
static inline int fixture_lay(const char *tree, const char *root) {
  char src[1024];
  if (snprintf(src, sizeof src, "%s/%s", GS_FIXTURES_DIR, tree) >= (int)sizeof src)
    return -1;
  return fixture_copy(src, root);
}

/* Removes path and, when it is a folder, everything under it. An absent path is no error.
 * Returns 0 or -1. */
static inline int fixture_remove(const char *path) {
  struct stat st;
  if (lstat(path, &st))
    return errno == ENOENT ? 0 : -1;
  if (!S_ISDIR(st.st_mode))
    return unlink(path);
  DIR *d = opendir(path);
  if (!d)
    return -1;
  int rc = 0;
  struct dirent *e;
  while (!rc && (e = readdir(d))) {
    char sub[1024];
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    rc = snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= (int)sizeof sub ? -1 : fixture_remove(sub);
  }
  closedir(d);
  return rc ? rc : rmdir(path);
}

#endif
