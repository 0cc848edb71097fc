/* SPDX-License-Identifier: MIT */
/* The Prometheus text exposition format 0.0.4: families, escaping, output (prom.h). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "prom.h"

struct buf { char *p; size_t len, cap; bool oom; };

struct family {
    char *name, *help;
    enum prom_type type;
    struct buf samples;
};

struct prom {
    struct family *fam;
    size_t n, cap;
    const char *error;
};

static void buf_grow(struct buf *b, size_t need)
{
    if (b->oom || b->len + need + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + need + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void buf_put(struct buf *b, const char *s, size_t n)
{
    buf_grow(b, n);
    if (b->oom)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(struct buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void buf_fmt(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_fmt(struct buf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* The shortest of %.15g and %.17g that reads back as value (1.507, not 1.5069999999999999). */
static void buf_shortest(struct buf *b, double value)
{
    char tmp[40];
    snprintf(tmp, sizeof tmp, "%.15g", value);
    if (strtod(tmp, NULL) != value)
        snprintf(tmp, sizeof tmp, "%.17g", value);
    buf_str(b, tmp);
}

/* Label values escape backslash, double quote and line feed; HELP texts the first and last. */
static void buf_escaped(struct buf *b, const char *s, bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            buf_str(b, "\\\\");
        else if (*s == '\n')
            buf_str(b, "\\n");
        else if (*s == '"' && quote)
            buf_str(b, "\\\"");
        else
            buf_put(b, s, 1);
    }
}

bool prom_name_ok(const char *name)
{
    if (!name || !*name)
        return false;
    for (const char *c = name; *c; c++) {
        bool alpha = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' || *c == ':';
        if (!alpha && !(c != name && *c >= '0' && *c <= '9'))
            return false;
    }
    return true;
}

/* Label names: the same, without ':' */
static bool label_name_ok(const char *name)
{
    return prom_name_ok(name) && !strchr(name, ':');
}

struct prom *prom_new(void)
{
    return calloc(1, sizeof(struct prom));
}

void prom_free(struct prom *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->fam[i].name);
        free(p->fam[i].help);
        free(p->fam[i].samples.p);
    }
    free(p->fam);
    free(p);
}

const char *prom_error(const struct prom *p) { return p->error; }

static void set_error(struct prom *p, const char *why)
{
    if (!p->error)
        p->error = why;
}

struct prom_labels prom_with(const struct prom_labels *l, const char *name, const char *value)
{
    struct prom_labels out = l ? *l : (struct prom_labels){ 0 };
    if (out.n < PROM_LABELS_MAX) {
        out.name[out.n] = name;
        out.value[out.n++] = value;
    } else {
        out.n = PROM_LABELS_MAX + 1;   /* refused by add_sample */
    }
    return out;
}

static struct family *family_new(struct prom *p, const char *name, enum prom_type type, const char *help)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        struct family *f = realloc(p->fam, cap * sizeof *f);
        if (!f)
            return NULL;
        p->fam = f;
        p->cap = cap;
    }
    struct family *f = &p->fam[p->n];
    *f = (struct family){ .name = strdup(name), .help = strdup(help ? help : ""), .type = type };
    if (!f->name || !f->help) {
        free(f->name);
        free(f->help);
        return NULL;
    }
    p->n++;
    return f;
}

/* The family of that name, made on first use; NULL (and prom_error) when it cannot be. */
static struct family *family_of(struct prom *p, const char *name, enum prom_type type, const char *help)
{
    for (size_t i = p->n; i-- > 0;)
        if (strcmp(p->fam[i].name, name) == 0) {
            if (p->fam[i].type == type)
                return &p->fam[i];
            set_error(p, "a metric family used with two types");
            return NULL;
        }
    if (!prom_name_ok(name)) {
        set_error(p, "a metric name outside [a-zA-Z_:][a-zA-Z0-9_:]*");
        return NULL;
    }
    struct family *f = family_new(p, name, type, help);
    if (!f)
        set_error(p, "out of memory");
    return f;
}

/* name{labels} up to the value; false when the sample is refused. */
static bool sample_head(struct prom *p, struct family *f, const char *suffix, const struct prom_labels *l)
{
    if (l && l->n > PROM_LABELS_MAX) {
        set_error(p, "more labels than PROM_LABELS_MAX");
        return false;
    }
    for (size_t i = 0; l && i < l->n; i++)
        if (!label_name_ok(l->name[i]) || !l->value[i]) {
            set_error(p, "a bad label name or a NULL label value");
            return false;
        }
    buf_str(&f->samples, f->name);
    buf_str(&f->samples, suffix ? suffix : "");
    for (size_t i = 0; l && i < l->n; i++) {
        buf_str(&f->samples, i ? "," : "{");
        buf_str(&f->samples, l->name[i]);
        buf_str(&f->samples, "=\"");
        buf_escaped(&f->samples, l->value[i], true);
        buf_str(&f->samples, "\"");
    }
    if (l && l->n)
        buf_str(&f->samples, "}");
    buf_str(&f->samples, " ");
    return true;
}

static void sample_done(struct prom *p, struct family *f)
{
    buf_str(&f->samples, "\n");
    if (f->samples.oom)
        set_error(p, "out of memory");
}

void prom_u64(struct prom *p, const char *name, enum prom_type type, const char *help, const char *suffix,
              const struct prom_labels *l, uint64_t value)
{
    struct family *f = family_of(p, name, type, help);
    if (!f || !sample_head(p, f, suffix, l))
        return;
    buf_fmt(&f->samples, "%" PRIu64, value);
    sample_done(p, f);
}

void prom_f64(struct prom *p, const char *name, enum prom_type type, const char *help, const char *suffix,
              const struct prom_labels *l, double value)
{
    struct family *f = family_of(p, name, type, help);
    if (!f || !sample_head(p, f, suffix, l))
        return;
    if (isnan(value))
        buf_str(&f->samples, "NaN");
    else if (isinf(value))
        buf_str(&f->samples, value > 0 ? "+Inf" : "-Inf");
    else
        buf_shortest(&f->samples, value);
    sample_done(p, f);
}

static const char *type_name(enum prom_type t)
{
    return t == PROM_COUNTER ? "counter" : t == PROM_GAUGE ? "gauge" : "histogram";
}

int prom_write(const struct prom *p, FILE *out)
{
    for (size_t i = 0; i < p->n; i++) {
        const struct family *f = &p->fam[i];
        struct buf help = { 0 };
        buf_escaped(&help, f->help, false);
        fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", f->name, help.p ? help.p : "", f->name, type_name(f->type));
        free(help.p);
        if (f->samples.len)
            fwrite(f->samples.p, 1, f->samples.len, out);
    }
    return ferror(out) ? -1 : 0;
}
