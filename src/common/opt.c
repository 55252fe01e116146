// opt.c: a value read by its OptSpec (see opt.h).
#include "common/opt.h"

#include <stdint.h>
#include <string.h>

#include "common/numtext.h"

// "[min, max]" or "(min, max]" of a number, each bound exact (format_double:
// a value just outside never reads as the bound).
static void range_text(const OptSpec *s, char *buf, size_t n) {
    char lo[32], hi[32];
    format_double(lo, sizeof lo, s->min);
    format_double(hi, sizeof hi, s->max);
    snprintf(buf, n, "%s%s, %s]", s->min_open ? "(" : "[", lo, hi);
}

static int in_range(const OptSpec *s, double v) {
    return (s->min_open ? v > s->min : v >= s->min) && v <= s->max;
}

// Whether text is one of choices ("a|b|c"), whole.
static int is_choice(const char *choices, const char *text) {
    size_t len = strlen(text);
    for (const char *c = choices; *c;) {
        size_t m = strcspn(c, "|");
        if (m == len && strncmp(c, text, m) == 0) return 1;
        c += m + (c[m] == '|');
    }
    return 0;
}

int opt_parse(const OptSpec *s, const char *text, void *dst, char *msg, size_t n) {
#define BAD(...) do { snprintf(msg, n, __VA_ARGS__); return -1; } while (0)
    char range[80], value[32];
    switch (s->type) {
    case OPT_INT: {
        long long v;
        int rc = parse_integer(text, (long long)s->min, (long long)s->max, &v);
        range_text(s, range, sizeof range);
        if (rc == NUMTEXT_BAD) BAD("'%s' is not an integer", text);
        if (rc != 0) BAD("%s is out of range %s", text, range);
        *(int *)dst = (int)v;
        return 0;
    }
    case OPT_U64: {
        uint64_t v;
        if (parse_uint64(text, &v) != 0) BAD("'%s' is not a non-negative integer", text);
        *(uint64_t *)dst = v;
        return 0;
    }
    case OPT_FLOAT:
    case OPT_DOUBLE: {
        double v;
        if (parse_number(text, &v) != 0) BAD("'%s' is not a number", text);
        range_text(s, range, sizeof range);
        format_double(value, sizeof value, v);
        if (!in_range(s, v)) BAD("%s is out of range %s", value, range);
        if (s->type == OPT_FLOAT) *(float *)dst = (float)v;
        else *(double *)dst = v;
        return 0;
    }
    case OPT_STR:
    case OPT_ARG: {
        size_t len = strlen(text), longest = s->type == OPT_STR ? OPT_STR_MAX - 1 : SIZE_MAX;
        if (s->max > 0 && s->max < (double)longest) longest = (size_t)s->max;
        if (len > longest) BAD("value is longer than %zu characters", longest);
        if (s->min >= 1 && len == 0) BAD("must not be empty");
        if (s->type == OPT_STR && strchr(text, '\n')) BAD("value contains a newline");
        if (s->choices && !is_choice(s->choices, text)) BAD("'%s' is not one of %s", text, s->choices);
        if (s->type == OPT_STR) memcpy(dst, text, len + 1);
        else *(const char **)dst = text;
        return 0;
    }
    case OPT_FLAG:
        *(int *)dst = 1;
        return 0;
    }
#undef BAD
    snprintf(msg, n, "unknown option type");
    return -1;
}

void opt_doc_range(const OptSpec *s, char *buf, size_t n) {
    buf[0] = 0;
    if (s->type == OPT_INT) snprintf(buf, n, " [%.0f..%.0f]", s->min, s->max);
    if (s->type == OPT_FLOAT || s->type == OPT_DOUBLE)
        snprintf(buf, n, " %s%g..%g]", s->min_open ? "(" : "[", s->min, s->max);
    if (s->choices) snprintf(buf, n, " {%s}", s->choices);
}
