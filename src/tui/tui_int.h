/* tui_int: what the live view's loop (top.c) and its drawing (tui_draw.c) share. */
#ifndef GS_TUI_INT_H
#define GS_TUI_INT_H

#include "tui/tui.h"

struct tui_ui {
  int utf8;   /* the terminal's locale is UTF-8: block characters and em dashes */
  int color;  /* colours on (a colour terminal, NO_COLOR unset or empty) */
  int gpu;    /* the selected GPU (g) */
  int scroll; /* first process shown */
  int help;   /* the help box is open */
};

/* Starts colours unless NO_COLOR is set (non-empty) or the terminal has none; sets u->color. */
void tui_colors_init(struct tui_ui *u);
/* Draws the whole screen for s (erase, draw, one refresh). */
void tui_draw(struct tui_ui *u, const struct tui_snap *s);

#endif
