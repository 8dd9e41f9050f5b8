/* tui/tui_draw: lays a snapshot (tui.h) out on the ncurses screen for whatever size the terminal
 * has. Every frame is drawn whole into ncurses' virtual screen after erase() and sent with one
 * refresh(), so the terminal only receives the cells that changed (no flicker). Every string shown
 * went through gs_term_escape() when the snapshot was loaded; this file only clips it to the screen. */
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui/tui_int.h"

enum { PAIR_OK = 1, PAIR_WARN, PAIR_HOT, PAIR_HEAD, PAIR_DATA, PAIR_H2D, PAIR_COMPUTE };

void tui_colors_init(struct tui_ui *u) {
  u->color = 0;
  const char *nc = getenv("NO_COLOR");
  if ((nc && *nc) || !has_colors() || start_color() == ERR)
    return;
  use_default_colors();
  init_pair(PAIR_OK, COLOR_GREEN, -1);
  init_pair(PAIR_WARN, COLOR_YELLOW, -1);
  init_pair(PAIR_HOT, COLOR_RED, -1);
  init_pair(PAIR_HEAD, COLOR_CYAN, -1);
  init_pair(PAIR_DATA, COLOR_YELLOW, -1);
  init_pair(PAIR_H2D, COLOR_MAGENTA, -1);
  init_pair(PAIR_COMPUTE, COLOR_GREEN, -1);
  u->color = 1;
}

static attr_t pair(const struct tui_ui *u, int p) {
  return u->color ? COLOR_PAIR(p) : A_NORMAL;
}

/* Columns a string takes: every byte but UTF-8 continuation bytes (escaped text has no wide
 * characters that matter here: a CJK name may take two columns, and is then clipped by curses). */
static int cols_of(const char *s) {
  int n = 0;
  for (; *s; s++)
    n += ((unsigned char)*s & 0xc0) != 0x80;
  return n;
}

/* Writes s at (y, x), at most max columns, cut at a character boundary. Returns the columns used. */
static int put(int y, int x, int max, attr_t a, const char *s) {
  if (y < 0 || y >= LINES || x >= COLS || max <= 0)
    return 0;
  if (x + max > COLS)
    max = COLS - x;
  int cols = 0;
  size_t bytes = 0;
  while (s[bytes] && cols < max) {
    bytes++;
    while (((unsigned char)s[bytes] & 0xc0) == 0x80)
      bytes++;
    cols++;
  }
  attron(a);
  mvaddnstr(y, x, s, (int)bytes);
  attroff(a);
  return cols;
}

static const char *dash(const struct tui_ui *u) {
  return u->utf8 ? "\u2014" : "-";
}

/* "[|||||   97%]": inner columns of fill (frac 0..1; NAN: none) with text right-aligned. */
static void bar(const struct tui_ui *u, int y, int x, int inner, double frac, const char *text, int color) {
  put(y, x, 1, A_NORMAL, "[");
  int fill = isfinite(frac) ? (int)lround(fmin(fmax(frac, 0), 1) * inner) : 0;
  char buf[512];
  int w = inner < (int)sizeof buf - 1 ? inner : (int)sizeof buf - 1;
  memset(buf, '|', (size_t)w);
  buf[w] = 0;
  if (fill > w)
    fill = w;
  buf[fill] = 0;
  put(y, x + 1, fill, pair(u, color), buf);
  int tw = cols_of(text);
  put(y, x + 1 + inner - tw, tw, A_BOLD, text);
  put(y, x + 1 + inner, 1, A_NORMAL, "]");
}

static int level_pair(double frac) {
  return !isfinite(frac) ? PAIR_OK : frac >= 0.9 ? PAIR_HOT : frac >= 0.7 ? PAIR_WARN : PAIR_OK;
}

static const char *fmt_pct(const struct tui_ui *u, double v, char *b, size_t n) {
  if (!isfinite(v))
    return dash(u);
  snprintf(b, n, "%.0f%%", v);
  return b;
}

static const char *fmt_gib(const struct tui_ui *u, double bytes, char *b, size_t n) {
  if (!isfinite(bytes))
    return dash(u);
  double g = bytes / (1024.0 * 1024 * 1024);
  if (g >= 10)
    snprintf(b, n, "%.0fG", g);
  else if (g >= 1)
    snprintf(b, n, "%.1fG", g);
  else
    snprintf(b, n, "%.0fM", bytes / (1024.0 * 1024));
  return b;
}

static const char *fmt_num(const struct tui_ui *u, double v, const char *unit, char *b, size_t n) {
  if (!isfinite(v))
    return dash(u);
  snprintf(b, n, "%.0f%s", v, unit);
  return b;
}

static void draw_gpu(const struct tui_ui *u, const struct tui_gpu *g, int y, int selected) {
  char lab[96], t[32];
  int namew = COLS >= 140 && g->name[0] ? 22 : 0;
  snprintf(lab, sizeof lab, "%cGPU%-2d", selected ? '>' : ' ', g->index);
  int x = put(y, 0, 6, selected ? A_BOLD | A_REVERSE : A_BOLD, lab);
  if (namew) {
    put(y, x + 1, namew - 2, A_NORMAL, g->name);
    x += namew;
  }
  static const char *labels[5] = {"util", "sm", "mem", "pow", "temp"};
  int fixed = x + 16 + 10 + 5;
  int inner = (COLS - fixed) / 5;
  if (inner < 5)
    inner = 5;
  double frac[5] = {g->util / 100, g->sm / 100, g->mem_total > 0 ? g->mem_used / g->mem_total : NAN,
                    g->power_limit > 0 ? g->power / g->power_limit : NAN, g->temp / 95};
  char txt[5][80];
  snprintf(txt[0], sizeof txt[0], "%s", fmt_pct(u, g->util, t, sizeof t));
  snprintf(txt[1], sizeof txt[1], "%s", fmt_pct(u, g->sm, t, sizeof t));
  snprintf(txt[2], sizeof txt[2], "%s", fmt_gib(u, g->mem_used, t, sizeof t));
  snprintf(txt[3], sizeof txt[3], "%s", fmt_num(u, g->power, "W", t, sizeof t));
  if (inner >= 14 && isfinite(g->mem_used) && isfinite(g->mem_total)) { /* room for the totals */
    char t2[32];
    snprintf(txt[2], sizeof txt[2], "%s/%s", fmt_gib(u, g->mem_used, t, sizeof t),
             fmt_gib(u, g->mem_total, t2, sizeof t2));
  }
  if (inner >= 14 && isfinite(g->power) && isfinite(g->power_limit))
    snprintf(txt[3], sizeof txt[3], "%.0f/%.0fW", g->power, g->power_limit);
  snprintf(txt[4], sizeof txt[4], "%s", fmt_num(u, g->temp, "C", t, sizeof t));
  x += 1;
  for (int i = 0; i < 5; i++) {
    x += put(y, x, (int)strlen(labels[i]), pair(u, PAIR_HEAD), labels[i]);
    bar(u, y, x, inner, frac[i], txt[i], i == 0 || i == 1 ? PAIR_OK : level_pair(frac[i]));
    x += inner + 3;
  }
}

/* The selected GPU's utilisation, one column a second, h rows tall, newest at the right. */
static void draw_history(const struct tui_ui *u, const struct tui_gpu *g, int y, int h) {
  static const char *const blocks[9] = {" ",      "\u2581", "\u2582", "\u2583", "\u2584",
                                        "\u2585", "\u2586", "\u2587", "\u2588"};
  static const char *const ascii[9] = {" ", ".", ".", "-", "-", "=", "=", "#", "#"};
  char head[128];
  int width = COLS - 5;
  size_t cols = width > 0 ? (size_t)width : 0;
  if (cols > g->nhist)
    cols = g->nhist;
  if (g->last_xid)
    snprintf(head, sizeof head, "GPU%d util, last %zu s (g: next GPU)  X: Xid %u", g->index, cols, g->last_xid);
  else
    snprintf(head, sizeof head, "GPU%d util, last %zu s (g: next GPU)", g->index, cols);
  put(y, 0, COLS, pair(u, PAIR_HEAD), head);
  for (int r = 0; r < h; r++) {
    int row = y + 1 + r;
    if (r == 0)
      put(row, 0, 4, A_DIM, "100%");
    else if (r == h - 1)
      put(row, 0, 4, A_DIM, "  0%");
    put(row, 4, 1, A_DIM, u->utf8 ? "\u2502" : "|");
    for (size_t c = 0; c < cols; c++) {
      double v = g->hist[g->nhist - cols + c];
      if (r == 0 && g->xid[g->nhist - cols + c]) { /* an Xid in that second: marked at the top */
        put(row, 5 + (int)c, 1, pair(u, PAIR_HOT) | A_BOLD, "X");
        continue;
      }
      if (!isfinite(v))
        continue; /* a gap: not measured */
      int eighths = (int)lround(fmin(fmax(v, 0), 100) / 100 * h * 8) - (h - 1 - r) * 8;
      if (eighths <= 0)
        continue;
      if (eighths > 8)
        eighths = 8;
      put(row, 5 + (int)c, 1, pair(u, PAIR_OK), u->utf8 ? blocks[eighths] : ascii[eighths]);
    }
  }
}

/* Host CPU: the total, then one small bar per core; one character per core when they do not fit. */
static int draw_cpu(const struct tui_ui *u, const struct tui_snap *s, int y, int max_rows) {
  char t[32], lab[48];
  snprintf(lab, sizeof lab, "CPU %4s", fmt_pct(u, s->cpu_total, t, sizeof t));
  put(y, 0, 9, A_BOLD, lab);
  if (!s->ncores)
    return 1;
  int cell = 12, per_row = (COLS - 9) / cell;
  if (per_row < 1)
    per_row = 1;
  int rows = (s->ncores + per_row - 1) / per_row;
  if (rows > max_rows) { /* sparkline: one character per core */
    static const char *const blocks[9] = {" ",      "\u2581", "\u2582", "\u2583", "\u2584",
                                          "\u2585", "\u2586", "\u2587", "\u2588"};
    static const char *const ascii[9] = {"_", ".", ".", "-", "-", "=", "=", "#", "#"};
    int per_line = COLS - 10, line = 0;
    for (int c = 0; c < s->ncores && line < max_rows; c++) {
      if (c && c % per_line == 0)
        line++;
      if (line >= max_rows)
        break;
      double v = s->cores[c];
      int e = isfinite(v) ? (int)lround(fmin(fmax(v, 0), 100) / 100 * 8) : 0;
      put(y + line, 10 + c % per_line, 1, pair(u, level_pair(v / 100)),
          isfinite(v) ? (u->utf8 ? blocks[e] : ascii[e]) : "?");
    }
    return line + 1;
  }
  for (int c = 0; c < s->ncores; c++) {
    int r = c / per_row, x = 9 + (c % per_row) * cell;
    snprintf(lab, sizeof lab, "%3d", c);
    put(y + r, x, 3, A_DIM, lab);
    bar(u, y + r, x + 3, cell - 5, s->cores[c] / 100, fmt_pct(u, s->cores[c], t, sizeof t),
        level_pair(s->cores[c] / 100));
  }
  return rows;
}

static void draw_steps(const struct tui_ui *u, const struct tui_snap *s, int y) {
  char line[256], a[32], b[32], c[32];
  if (!s->steps_total) {
    put(y, 0, COLS, A_NORMAL, "steps  none reported (the job does not use the gpuscope client, docs/protocol.md)");
    return;
  }
  if (!isfinite(s->step_s)) {
    snprintf(line, sizeof line, "steps  %zu, none in the last %d s", s->steps_total, TOP_STEP_WINDOW_S);
    put(y, 0, COLS, A_NORMAL, line);
    return;
  }
  char smp[32];
  if (isfinite(s->samples_per_s))
    snprintf(smp, sizeof smp, "%.0f samples/s", s->samples_per_s);
  else
    snprintf(smp, sizeof smp, "%s samples/s", dash(u));
  int n = snprintf(line, sizeof line, "steps %zu  %.1f/s  %s  %.3g s: data %s h2d %s compute %s ", s->steps_total,
                   s->steps_per_s, smp, s->step_s, fmt_pct(u, 100 * s->data_share, a, sizeof a),
                   fmt_pct(u, 100 * s->h2d_share, b, sizeof b), fmt_pct(u, 100 * s->compute_share, c, sizeof c));
  (void)n;
  int x = put(y, 0, COLS, A_BOLD, line);
  int w = COLS - x - 2;
  if (w < 6)
    return;
  /* the step as one stacked bar: d = data wait, h = host-to-device copy, c = compute */
  put(y, x, 1, A_NORMAL, "[");
  double shares[3] = {s->data_share, isfinite(s->h2d_share) ? s->h2d_share : 0, s->compute_share};
  static const char ch[3][2] = {"d", "h", "c"};
  int pairs[3] = {PAIR_DATA, PAIR_H2D, PAIR_COMPUTE}, pos = 0;
  for (int k = 0; k < 3; k++) {
    int len = isfinite(shares[k]) ? (int)lround(shares[k] * w) : 0;
    for (int i = 0; i < len && pos < w; i++, pos++)
      put(y, x + 1 + pos, 1, pair(u, pairs[k]) | (u->color ? A_REVERSE : 0), ch[k]);
  }
  put(y, x + 1 + w, 1, A_NORMAL, "]");
}

static void draw_finding(const struct tui_ui *u, const struct tui_snap *s, int y) {
  char line[512];
  if (!s->have_finding) {
    put(y, 0, COLS, A_NORMAL, "doctor  no finding yet (the first diagnosis comes after a few seconds of data)");
    return;
  }
  if (s->have_finding < 0) {
    snprintf(line, sizeof line, "doctor  the diagnosis could not run: %s", s->title);
    put(y, 0, COLS, pair(u, PAIR_WARN) | A_BOLD, line);
    return;
  }
  char gain[64] = "";
  if (isfinite(s->speedup) && s->speedup > 1.005)
    snprintf(gain, sizeof gain, ", est. %.2fx faster", s->speedup);
  /* the rule and its gain first: at 80 columns the title is what gets cut */
  snprintf(line, sizeof line, "doctor  %s%s: %s", s->rule, gain, s->title);
  put(y, 0, COLS, pair(u, strcmp(s->rule, "healthy") ? PAIR_WARN : PAIR_OK) | A_BOLD, line);
  if (s->fix[0]) {
    snprintf(line, sizeof line, "  fix: %s", s->fix);
    put(y + 1, 0, COLS, A_NORMAL, line);
  }
}

/* s right-aligned in w columns (by columns, not bytes: the dash is three bytes wide in UTF-8). */
static const char *ralign(const char *s, int w, char *out, size_t n) {
  int pad = w - cols_of(s);
  snprintf(out, n, "%*s%s", pad > 0 ? pad : 0, "", s);
  return out;
}

/* What the doctor says process pid is to the training ("trainer" or "loader worker"), or "" when it
 * does not know (yet) or the process is a launcher (sh -c, env: its command says so already). */
static const char *proc_role(const struct tui_snap *s, int pid) {
  for (size_t i = 0; i < s->nroles; i++)
    if (s->roles[i].pid == pid && s->roles[i].role != DOCTOR_ROLE_LAUNCHER)
      return doctor_role_name(s->roles[i].role);
  return "";
}

static void draw_procs(struct tui_ui *u, const struct tui_snap *s, int y, int rows) {
  char line[256], a[32], b[32], c[32], ra[48], rb[48], rc[48];
  snprintf(line, sizeof line, "%7s %6s %9s %9s  %s", "PID", "CPU%", "RSS", "GPU MEM", "COMMAND (the job's processes)");
  put(y, 0, COLS, pair(u, PAIR_HEAD) | A_REVERSE, line);
  int body = rows - 1;
  if (body < 1)
    return;
  int max_scroll = (int)s->nprocs > body ? (int)s->nprocs - body : 0;
  if (u->scroll > max_scroll)
    u->scroll = max_scroll;
  if (u->scroll < 0)
    u->scroll = 0;
  for (int i = 0; i < body && (size_t)(u->scroll + i) < s->nprocs; i++) {
    const struct tui_proc *p = &s->procs[u->scroll + i];
    int root = p->pid == (s->attached_pid ? s->attached_pid : s->procs[0].pid);
    const char *role = proc_role(s, p->pid);
    snprintf(line, sizeof line, "%7d %s %s %s  %s%s%s%s", p->pid,
             ralign(fmt_num(u, p->cpu, "", a, sizeof a), 6, ra, sizeof ra),
             ralign(fmt_gib(u, p->rss, b, sizeof b), 9, rb, sizeof rb),
             ralign(fmt_gib(u, p->gpu_mem, c, sizeof c), 9, rc, sizeof rc), p->comm, *role ? "  " : "", role,
             root ? (s->attached_pid ? "  (attached)" : "  (launched)") : "");
    put(y + 1 + i, 0, COLS, A_NORMAL, line);
  }
  if (max_scroll) {
    snprintf(line, sizeof line, " %d-%d of %zu ", u->scroll + 1,
             u->scroll + body < (int)s->nprocs ? u->scroll + body : (int)s->nprocs, s->nprocs);
    put(y, COLS - (int)strlen(line), (int)strlen(line), pair(u, PAIR_HEAD) | A_REVERSE, line);
  }
}

static void draw_help(const struct tui_ui *u) {
  static const char *const lines[] = {
      "gpuscope top: keys",
      "",
      "  q          quit (top -- CMD: stops the job too)",
      "  Up / Down  scroll the process list",
      "  PgUp/PgDn  scroll it a page",
      "  g          next GPU (its history graph)",
      "  h          this help (any key closes it)",
      "",
      "Figures are what the agent committed to the store;",
      "a dash is a figure that was not measured.",
  };
  int n = (int)(sizeof lines / sizeof *lines), w = 56;
  int y0 = (LINES - n - 2) / 2, x0 = (COLS - w) / 2;
  if (y0 < 0)
    y0 = 0;
  if (x0 < 0)
    x0 = 0;
  char blank[128];
  memset(blank, ' ', sizeof blank - 1);
  blank[w < (int)sizeof blank - 1 ? w : (int)sizeof blank - 1] = 0;
  for (int i = 0; i < n + 2; i++) {
    put(y0 + i, x0, w, A_REVERSE, blank);
    if (i > 0 && i <= n)
      put(y0 + i, x0 + 2, w - 4, A_REVERSE | (i == 1 ? A_BOLD : 0), lines[i - 1]);
  }
  (void)u;
}

void tui_draw(struct tui_ui *u, const struct tui_snap *s) {
  erase();
  char line[1024], el[32];
  int R = LINES;
  /* header */
  snprintf(line, sizeof line, "gpuscope top  %s%s%.12s  %s%s", s->run.name[0] ? s->run.name : "",
           s->run.name[0] ? "  " : "", s->run.id, s->running ? "running " : "",
           gs_fmt_duration(s->t_ns, el, sizeof el));
  int x = put(0, 0, COLS, A_BOLD, line);
  if (!s->running)
    x += 1 + put(0, x + 1, 10, A_REVERSE | A_BOLD, " finished ");
  if (s->attached_pid) {
    snprintf(line, sizeof line, "  attached to pid %d", s->attached_pid);
    x += put(0, x, COLS, A_NORMAL, line);
  }
  if (COLS - x > 20 && s->run.command[0]) { /* a wide terminal: the command too */
    x += put(0, x, 4, A_DIM, "  $ ");
    put(0, x, COLS - x, A_DIM, s->run.command);
  }
  /* the row budget: procs get what is left, at least a few rows */
  int cpu_max = R >= 40 ? 4 : R >= 30 ? 2 : 1;
  int cpu_rows = s->ncores ? (s->ncores + (COLS - 9) / 12 - 1) / ((COLS - 9) / 12 > 0 ? (COLS - 9) / 12 : 1) : 1;
  if (cpu_rows > cpu_max || cpu_rows < 1)
    cpu_rows = cpu_max; /* the sparkline takes what it may */
  /* header, history title, cpu, steps, finding (2), process header, footer */
  int fixed = 1 + 1 + cpu_rows + 1 + 2 + 1 + 1;
  int gpu_rows = s->ngpus ? s->ngpus : 1;
  if (gpu_rows > R - fixed - 4)
    gpu_rows = R - fixed - 4 > 1 ? R - fixed - 4 : 1;
  /* The history graph takes what the processes leave (they keep at least 4 rows), up to 12 rows. */
  int want_procs = (int)s->nprocs < 4 ? 4 : (int)s->nprocs;
  int hist_h = R - fixed - gpu_rows - want_procs;
  hist_h = hist_h > 12 ? 12 : hist_h < 1 ? 1 : hist_h;
  int y = 1;
  if (!s->ngpus) {
    put(y++, 0, COLS, A_NORMAL,
        "GPU    none in this run (no NVIDIA driver, or the NVML collector was off: see the run's notes)");
  } else {
    if (u->gpu >= s->ngpus)
      u->gpu = 0;
    int first = u->gpu - gpu_rows + 1 > 0 ? u->gpu - gpu_rows + 1 : 0;
    for (int i = first; i < s->ngpus && i < first + gpu_rows; i++)
      draw_gpu(u, &s->gpus[i], y++, i == u->gpu);
    draw_history(u, &s->gpus[u->gpu], y, hist_h);
    y += 1 + hist_h;
  }
  y += draw_cpu(u, s, y, cpu_rows);
  draw_steps(u, s, y++);
  draw_finding(u, s, y);
  y += 2;
  draw_procs(u, s, y, R - 1 - y);
  /* footer */
  snprintf(line, sizeof line, " q quit  %s PgUp PgDn scroll  g GPU %d/%d  h help ", u->utf8 ? "\u2191\u2193" : "Up Dn",
           s->ngpus ? u->gpu + 1 : 0, s->ngpus);
  x = put(R - 1, 0, COLS, A_REVERSE, line);
  if (s->running)
    snprintf(line, sizeof line, " running: data up to %s ", gs_fmt_duration(s->t_ns, el, sizeof el));
  else
    snprintf(line, sizeof line, strcmp(s->run.status, "finished") ? " finished (%s) " : " finished ", s->run.status);
  put(R - 1, COLS - cols_of(line) > x ? COLS - cols_of(line) : x, COLS, A_REVERSE | A_BOLD, line);
  if (u->help)
    draw_help(u);
  refresh();
}
