/* report/svg: the HTML report's charts as inline SVG — time on x, one band (min..max) plus a mean
 * line per series, shaded spans and markers for events, reference lines for limits. Long series are
 * drawn from the store's min/max rollups, so a dip shorter than a pixel still shows; missing samples
 * are a gap in the line, never a drop to zero. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

#define RAW_MAX 1500    /* series with at most this many samples are drawn raw */
#define MAX_POINTS 3000 /* rollup buckets across the run for longer ones, at most */

static const char *PALETTE[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

const char *rp_color(int i) {
  return PALETTE[(i < 0 ? -i : i) % (int)(sizeof PALETTE / sizeof *PALETTE)];
}

void rp_points_free(struct rp_points *p) {
  free(p->t), free(p->mn), free(p->mx), free(p->mean);
  memset(p, 0, sizeof *p);
}

int rp_points_load(struct store *st, const struct store_series *s, double duration_s, struct rp_points *p) {
  memset(p, 0, sizeof *p);
  int64_t *t = NULL;
  double *mn = NULL, *mx = NULL, *mean = NULL;
  size_t n = 0;
  int rc;
  if (s->count <= RAW_MAX || !(duration_s > 0)) {
    if ((rc = store_samples_load(st, s->id, &t, &mean, &n)))
      return rc;
  } else {
    /* The finest stored resolution (1 s, 10 s, 1 min) that keeps the chart light; beyond a few days
     * a coarser one computed from the raw chunks. */
    double res = duration_s / 1 <= MAX_POINTS    ? 1
                 : duration_s / 10 <= MAX_POINTS ? 10
                 : duration_s / 60 <= MAX_POINTS ? 60
                                                 : ceil(duration_s / MAX_POINTS);
    if ((rc = st->rollups_read(st, s->id, (int64_t)res * 1000000000LL, &t, &mn, &mx, &mean, &n)))
      return rc;
  }
  p->t = malloc((n ? n : 1) * sizeof *p->t);
  p->mn = malloc((n ? n : 1) * sizeof *p->mn);
  p->mx = malloc((n ? n : 1) * sizeof *p->mx);
  p->mean = malloc((n ? n : 1) * sizeof *p->mean);
  if (!p->t || !p->mn || !p->mx || !p->mean) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    double v = mean[i], lo = mn ? mn[i] : v, hi = mx ? mx[i] : v;
    if (!isfinite(v) || !isfinite(lo) || !isfinite(hi))
      continue; /* a damaged point is a gap */
    p->t[p->n] = (double)t[i] / 1e9;
    p->mean[p->n] = v, p->mn[p->n] = lo, p->mx[p->n] = hi;
    p->n++;
  }
  /* The typical spacing: the median gap between points. */
  if (p->n >= 2) {
    double *gaps = malloc((p->n - 1) * sizeof *gaps);
    if (gaps) {
      for (size_t i = 1; i < p->n; i++)
        gaps[i - 1] = p->t[i] - p->t[i - 1];
      qsort(gaps, p->n - 1, sizeof *gaps, rp_cmp_double);
      p->step_s = gaps[(p->n - 1) / 2];
      free(gaps);
    }
  }
out:
  free(t), free(mn), free(mx), free(mean);
  if (rc)
    rp_points_free(p);
  return rc;
}

double rp_chart_x(const struct rp_chart *c, double t) {
  double span = c->x1 - c->x0;
  double f = span > 0 ? (t - c->x0) / span : 0;
  return c->ml + fmin(fmax(f, 0), 1) * (c->w - c->ml - c->mr);
}

double rp_chart_y(const struct rp_chart *c, double v) {
  double span = c->y1 - c->y0;
  double f = span > 0 ? (v - c->y0) / span : 0;
  return c->mt + (1 - fmin(fmax(f, 0), 1)) * (c->h - c->mt - c->mb);
}

/* A "nice" tick step for a span: 1, 2 or 5 times a power of ten, about `want` ticks. */
static double nice_step(double span, int want) {
  if (!(span > 0) || !isfinite(span))
    return NAN;
  double raw = span / want, p = pow(10, floor(log10(raw))), f = raw / p;
  double step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
  return step > 0 && span / step <= 4 * want ? step : NAN; /* NAN: no ticks (a degenerate range) */
}

static void fmt_tick(char *buf, size_t n, double v, const char *unit) {
  if (unit && !strcmp(unit, "B")) {
    gs_fmt_bytes(v, buf, n);
    return;
  }
  double a = fabs(v);
  if (a >= 1e9)
    snprintf(buf, n, "%.3gG%s", v / 1e9, unit ? unit : "");
  else if (a >= 1e6)
    snprintf(buf, n, "%.3gM%s", v / 1e6, unit ? unit : "");
  else if (a >= 1e4)
    snprintf(buf, n, "%.3gk%s", v / 1e3, unit ? unit : "");
  else
    snprintf(buf, n, "%g%s", v, unit ? unit : "");
}

void rp_chart_begin(struct rp_chart *c, FILE *out, const char *title, double x0, double x1, double y0, double y1,
                    const char *yunit, int height) {
  *c = (struct rp_chart){.out = out,
                         .w = 900,
                         .h = height,
                         .ml = 64,
                         .mr = 150,
                         .mt = 24,
                         .mb = 28,
                         .x0 = x0,
                         .x1 = x1 > x0 ? x1 : x0 + 1,
                         .y0 = y0,
                         .y1 = y1 > y0 ? y1 : y0 + 1};
  fprintf(out, "<figure><svg class='chart' width='%d' height='%d' viewBox='0 0 %d %d' role='img'>\n", c->w, c->h, c->w,
          c->h);
  fprintf(out, "<text x='%d' y='16' class='ttl'>", c->ml);
  rp_html(out, title);
  fputs("</text>\n", out);
  int x_l = c->ml, x_r = c->w - c->mr, y_t = c->mt, y_b = c->h - c->mb;
  fprintf(out, "<rect x='%d' y='%d' width='%d' height='%d' class='plot'/>\n", x_l, y_t, x_r - x_l, y_b - y_t);
  double ys = nice_step(c->y1 - c->y0, 4);
  /* At most a few dozen ticks, whatever the range (v += step may not move a huge v at all). */
  int k = 0;
  for (double v = ceil(c->y0 / ys) * ys; yunit && isfinite(ys) && v <= c->y1 + ys * 1e-9 && k < 40; v += ys, k++) {
    char b[32];
    fmt_tick(b, sizeof b, v, yunit);
    double y = rp_chart_y(c, v);
    fprintf(out, "<line x1='%d' x2='%d' y1='%.1f' y2='%.1f' class='grid'/><text x='%d' y='%.1f' class='yl'>", x_l, x_r,
            y, y, x_l - 4, y + 4);
    rp_html(out, b);
    fputs("</text>\n", out);
  }
  double xs = nice_step(c->x1 - c->x0, 8);
  k = 0;
  for (double v = ceil(c->x0 / xs) * xs; isfinite(xs) && v <= c->x1 + xs * 1e-9 && k < 40; v += xs, k++) {
    double x = rp_chart_x(c, v);
    fprintf(out,
            "<line x1='%.1f' x2='%.1f' y1='%d' y2='%d' class='grid'/><text x='%.1f' y='%d' class='xl'>%gs</text>\n", x,
            x, y_t, y_b, x, y_b + 16, v);
  }
}

static void path_point(FILE *out, int *open, double x, double y) {
  fprintf(out, "%c%.1f %.1f", *open ? 'L' : 'M', x, y);
  *open = 1;
}

void rp_chart_series(struct rp_chart *c, const struct rp_points *p, const char *color, const char *label) {
  FILE *out = c->out;
  double gap = p->step_s > 0 ? fmax(3 * p->step_s, 0.5) : INFINITY;
  /* The band: one closed polygon per run of points without a gap. */
  int has_band = 0;
  for (size_t i = 0; i < p->n && !has_band; i++)
    has_band = p->mx[i] > p->mn[i];
  if (has_band) {
    fprintf(out, "<path fill='%s' fill-opacity='0.18' stroke='none' d='", color);
    for (size_t a = 0; a < p->n;) {
      size_t b = a + 1;
      while (b < p->n && p->t[b] - p->t[b - 1] <= gap)
        b++;
      int open = 0;
      for (size_t i = a; i < b; i++)
        path_point(out, &open, rp_chart_x(c, p->t[i]), rp_chart_y(c, p->mx[i]));
      for (size_t i = b; i-- > a;)
        path_point(out, &open, rp_chart_x(c, p->t[i]), rp_chart_y(c, p->mn[i]));
      fputc('Z', out);
      a = b;
    }
    fputs("'/>\n", out);
  }
  fprintf(out, "<path fill='none' stroke='%s' stroke-width='1.4' d='", color);
  int open = 0;
  for (size_t i = 0; i < p->n; i++) {
    if (i && p->t[i] - p->t[i - 1] > gap)
      open = 0;
    path_point(out, &open, rp_chart_x(c, p->t[i]), rp_chart_y(c, p->mean[i]));
  }
  fputs("'/>\n", out);
  if (label && c->legend < 12) {
    int y = c->mt + 10 + 16 * c->legend++;
    fprintf(out, "<rect x='%d' y='%d' width='12' height='4' fill='%s'/><text x='%d' y='%d' class='lg'>",
            c->w - c->mr + 10, y - 4, color, c->w - c->mr + 26, y);
    rp_html(out, label);
    fputs("</text>\n", out);
  }
}

void rp_chart_span(struct rp_chart *c, double t0, double t1, const char *color, const char *title) {
  double x0 = rp_chart_x(c, t0), x1 = rp_chart_x(c, t1);
  fprintf(c->out, "<rect x='%.1f' y='%d' width='%.1f' height='%d' fill='%s' fill-opacity='0.22'><title>", x0, c->mt,
          fmax(x1 - x0, 1), c->h - c->mt - c->mb, color);
  rp_html(c->out, title);
  fputs("</title></rect>\n", c->out);
}

void rp_chart_mark(struct rp_chart *c, double t, const char *color, const char *title) {
  double x = rp_chart_x(c, t);
  fprintf(c->out, "<line x1='%.1f' x2='%.1f' y1='%d' y2='%d' stroke='%s' stroke-dasharray='3 2'><title>", x, x, c->mt,
          c->h - c->mb, color);
  rp_html(c->out, title);
  fputs("</title></line>\n", c->out);
}

void rp_chart_hline(struct rp_chart *c, double y, const char *color, const char *title) {
  if (!isfinite(y) || y < c->y0 || y > c->y1)
    return;
  double py = rp_chart_y(c, y);
  fprintf(c->out, "<line x1='%d' x2='%d' y1='%.1f' y2='%.1f' stroke='%s' stroke-dasharray='6 3'><title>", c->ml,
          c->w - c->mr, py, py, color);
  rp_html(c->out, title);
  fputs("</title></line>\n", c->out);
}

void rp_chart_end(struct rp_chart *c) {
  fputs("</svg></figure>\n", c->out);
}
