/* SPDX-License-Identifier: MIT */
/* Line charts as SVG text. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "bench_svg.h"

#define PANEL_W 760
#define PANEL_H 420
#define LEFT 80
#define RIGHT 190
#define TOP 40
#define BOTTOM 50

static const char *const palette[CHART_SERIES] = { "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e",
                                                   "#9467bd", "#8c564b", "#e377c2", "#7f7f7f" };

struct chart_series *chart_add(struct chart *c, const char *name)
{
    if (c->nseries >= CHART_SERIES)
        return NULL;
    struct chart_series *s = &c->s[c->nseries++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    return s;
}

void chart_point(struct chart_series *s, double x, double y, double lo, double hi)
{
    if (!s || s->n >= CHART_POINTS || !(y > 0))
        return;
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->lo[s->n] = lo;
    s->hi[s->n] = hi;
    s->n++;
}

/* The plotted range of every series' x or y values (with whiskers). */
static void extent(const struct chart *c, bool y, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = 0; i < c->nseries; i++)
        for (int k = 0; k < c->s[i].n; k++) {
            double v = y ? c->s[i].y[k] : c->s[i].x[k];
            double top = y && c->s[i].hi[k] > v ? c->s[i].hi[k] : v;
            *lo = v < *lo ? v : *lo;
            *hi = top > *hi ? top : *hi;
        }
    if (!isfinite(*lo)) {
        *lo = 0;
        *hi = 1;
    }
}

static double nice_step(double span)
{
    double raw = span / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

struct frame { double x0, y0, w, h, xlo, xhi, ylo, yhi; bool log; };

static double px(const struct frame *f, double x)
{
    double v = f->log ? log10(x) : x;
    return f->x0 + (v - f->xlo) / (f->xhi - f->xlo) * f->w;
}

static double py(const struct frame *f, double y)
{
    double v = f->log ? log10(y) : y;
    return f->y0 + f->h - (v - f->ylo) / (f->yhi - f->ylo) * f->h;
}

static void label_value(char *buf, size_t len, double v)
{
    if (v >= 1e9) snprintf(buf, len, "%gG", v / 1e9);
    else if (v >= 1e6) snprintf(buf, len, "%gM", v / 1e6);
    else if (v >= 1e3) snprintf(buf, len, "%gk", v / 1e3);
    else snprintf(buf, len, "%g", v);
}

static void grid_line(FILE *out, double x1, double y1, double x2, double y2)
{
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n", x1, y1, x2, y2);
}

static void text_at(FILE *out, double x, double y, const char *anchor, const char *s)
{
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", x, y, anchor);
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", out);
        else if (*s == '>') fputs("&gt;", out);
        else if (*s == '&') fputs("&amp;", out);
        else fputc(*s, out);
    }
    fputs("</text>\n", out);
}

static void linear_axes(FILE *out, struct frame *f, const struct chart *c)
{
    double xlo, xhi, ylo, yhi;
    extent(c, false, &xlo, &xhi);
    extent(c, true, &ylo, &yhi);
    double ys = nice_step(yhi > 0 ? yhi : 1);
    f->log = false;
    f->xlo = xlo - 0.5 > 0 ? xlo - 0.5 : 0;
    f->xhi = xhi + 0.5;
    f->ylo = 0;
    f->yhi = ceil(yhi / ys) * ys;
    if (f->yhi <= 0)
        f->yhi = 1;
    char buf[32];
    for (double y = 0; y <= f->yhi + ys / 2; y += ys) {
        grid_line(out, f->x0, py(f, y), f->x0 + f->w, py(f, y));
        label_value(buf, sizeof buf, y);
        text_at(out, f->x0 - 6, py(f, y) + 4, "end", buf);
    }
    double xs = nice_step(f->xhi - f->xlo) < 1 ? 1 : nice_step(f->xhi - f->xlo);
    for (double x = ceil(f->xlo / xs) * xs; x <= f->xhi; x += xs) {
        grid_line(out, px(f, x), f->y0, px(f, x), f->y0 + f->h);
        label_value(buf, sizeof buf, x);
        text_at(out, px(f, x), f->y0 + f->h + 16, "middle", buf);
    }
}

/* x is 1/(1-percentile): ticks at 0%, 90%, 99%, ...; y log10 with decade ticks. */
static void percentile_axes(FILE *out, struct frame *f, const struct chart *c)
{
    double xlo, xhi, ylo, yhi;
    extent(c, false, &xlo, &xhi);
    extent(c, true, &ylo, &yhi);
    f->log = true;
    f->xlo = 0;
    f->xhi = ceil(log10(xhi > 10 ? xhi : 10));
    f->ylo = floor(log10(ylo > 0 ? ylo : 1e-3));
    f->yhi = ceil(log10(yhi > 0 ? yhi : 1));
    if (f->yhi <= f->ylo)
        f->yhi = f->ylo + 1;
    char buf[32];
    for (double d = f->ylo; d <= f->yhi; d++) {
        double y = pow(10, d);
        grid_line(out, f->x0, py(f, y), f->x0 + f->w, py(f, y));
        snprintf(buf, sizeof buf, "%g", y);
        text_at(out, f->x0 - 6, py(f, y) + 4, "end", buf);
    }
    for (int nines = 0; nines <= (int)f->xhi; nines++) {
        double x = pow(10, nines);
        grid_line(out, px(f, x), f->y0, px(f, x), f->y0 + f->h);
        if (nines == 0)
            snprintf(buf, sizeof buf, "0%%");
        else
            snprintf(buf, sizeof buf, "%.*f%%", nines > 2 ? nines - 2 : 0, 100.0 - 100.0 / x);
        text_at(out, px(f, x), f->y0 + f->h + 16, "middle", buf);
    }
}

static void series_draw(FILE *out, const struct frame *f, const struct chart_series *s, const char *color)
{
    fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
    for (int k = 0; k < s->n; k++)
        fprintf(out, "%.1f,%.1f ", px(f, s->x[k]), py(f, s->y[k]));
    fputs("\"/>\n", out);
    for (int k = 0; k < s->n; k++) {
        if (s->lo[k] > 0 && s->hi[k] > 0)
            fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                    px(f, s->x[k]), py(f, s->lo[k]), px(f, s->x[k]), py(f, s->hi[k]), color);
        if (!f->log)
            fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px(f, s->x[k]),
                    py(f, s->y[k]), color);
    }
}

static void panel(FILE *out, const struct chart *c, double top)
{
    struct frame f = { LEFT, top + TOP, PANEL_W - LEFT - RIGHT, PANEL_H - TOP - BOTTOM, 0, 1, 0, 1, false };
    fprintf(out, "<g font-family=\"sans-serif\" font-size=\"12\" fill=\"#222222\">\n");
    text_at(out, PANEL_W / 2.0, top + 22, "middle", c->title);
    if (c->axes == CHART_PERCENTILE_LOG)
        percentile_axes(out, &f, c);
    else
        linear_axes(out, &f, c);
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444444\"/>\n",
            f.x0, f.y0, f.w, f.h);
    text_at(out, f.x0 + f.w / 2, f.y0 + f.h + 36, "middle", c->x_label);
    fprintf(out, "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
            f.x0 - 58, f.y0 + f.h / 2, c->y_label);
    for (int i = 0; i < c->nseries; i++) {
        series_draw(out, &f, &c->s[i], palette[i]);
        double ly = f.y0 + 14 + 20.0 * i, lx = f.x0 + f.w + 12;
        fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>\n", lx, ly - 5,
                palette[i]);
        text_at(out, lx + 20, ly, "start", c->s[i].name);
    }
    fputs("</g>\n", out);
}

void svg_write(FILE *out, const struct chart *charts, int n)
{
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n", PANEL_W, PANEL_H * n, PANEL_W, PANEL_H * n);
    for (int i = 0; i < n; i++)
        panel(out, &charts[i], (double)(PANEL_H * i));
    fputs("</svg>\n", out);
}

int svg_save(const char *path, const struct chart *charts, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    svg_write(f, charts, n);
    return fclose(f) == 0 ? 0 : -1;
}
