/* tests/unit/json_numbers: reads a JSON array of numbers out of an answer's text, the way the unit
 * tests of serve's series and the report's charts check what the web page gets. Header-only, like
 * fixture.h. */
#ifndef GS_TEST_JSON_NUMBERS_H
#define GS_TEST_JSON_NUMBERS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The numbers of the first array named key in json ("null" read as NAN), at most max of them. */
static inline size_t json_numbers(const char *json, const char *key, double *out, size_t max) {
  char k[32];
  snprintf(k, sizeof k, "\"%s\":[", key);
  const char *p = strstr(json, k);
  if (!p)
    return 0;
  p += strlen(k);
  size_t n = 0;
  while (*p && *p != ']' && n < max) {
    if (!strncmp(p, "null", 4)) {
      out[n++] = NAN;
      p += 4;
    } else {
      char *e;
      out[n++] = strtod(p, &e);
      p = e;
    }
    if (*p == ',')
      p++;
  }
  return n;
}

#endif
