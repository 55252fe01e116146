// numtext.h: numbers as text: the one rule for reading them, and exact
// printing in messages.
//
// Every number ropelab reads as text (weights-file metadata, checkpoint
// metadata, config files, --key=value) follows JSON's number grammar, whole
// string, nothing around it:
//   integer:  -?(0|[1-9][0-9]*)                        "128", "-3", "0"
//   number:   integer (\.[0-9]+)? ([eE][-+]?[0-9]+)?    "0.5", "1e4", "1e-05", "-2.5E+3"
// so no space, no '+' before it, no leading zero, no hexadecimal, no "inf" or
// "nan", nothing after it. What the writers print ("%d", "%g", "%.9g",
// PRIu64) is of this form, and a value reads back only from one spelling of
// its digits: " 2", "2 ", "+2" and "02" are all refused alike (strtol alone
// skips leading spaces and takes '+').
#ifndef ROPELAB_COMMON_NUMTEXT_H
#define ROPELAB_COMMON_NUMTEXT_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { NUMTEXT_BAD = -1, NUMTEXT_RANGE = -2 };

// Length of the integer at s by the rule above (no sign if !sign_ok), 0 if none.
static inline size_t numtext_integer_len(const char *s, int sign_ok) {
    size_t i = sign_ok && s[0] == '-';
    if (s[i] == '0') return i + 1;
    if (!(s[i] >= '1' && s[i] <= '9')) return 0;
    while (s[i] >= '0' && s[i] <= '9') i++;
    return i;
}

// s, whole, as an integer in [lo, hi]: 0, NUMTEXT_BAD (not of the form) or
// NUMTEXT_RANGE (outside [lo, hi], or beyond long long).
static inline int parse_integer(const char *s, long long lo, long long hi, long long *out) {
    size_t n = numtext_integer_len(s, 1);
    if (n == 0 || s[n] != '\0') return NUMTEXT_BAD;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE || v < lo || v > hi) return NUMTEXT_RANGE;
    *out = v;
    return 0;
}

// s, whole, as a non-negative integer up to 2^64 - 1 (no sign): 0, NUMTEXT_BAD
// or NUMTEXT_RANGE (beyond 2^64 - 1).
static inline int parse_uint64(const char *s, uint64_t *out) {
    size_t n = numtext_integer_len(s, 0);
    if (n == 0 || s[n] != '\0') return NUMTEXT_BAD;
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno == ERANGE) return NUMTEXT_RANGE;
    *out = (uint64_t)v;
    return 0;
}

// s, whole, as a finite number: 0, or NUMTEXT_BAD (not of the form, or too
// large or too small in magnitude for a double: strtod's ERANGE).
static inline int parse_number(const char *s, double *out) {
    size_t i = numtext_integer_len(s, 1);
    if (i == 0) return NUMTEXT_BAD;
    if (s[i] == '.') {
        if (!(s[++i] >= '0' && s[i] <= '9')) return NUMTEXT_BAD;
        while (s[i] >= '0' && s[i] <= '9') i++;
    }
    if (s[i] == 'e' || s[i] == 'E') {
        i += s[i + 1] == '-' || s[i + 1] == '+';
        if (!(s[++i] >= '0' && s[i] <= '9')) return NUMTEXT_BAD;
        while (s[i] >= '0' && s[i] <= '9') i++;
    }
    if (s[i] != '\0') return NUMTEXT_BAD;
    errno = 0;
    double v = strtod(s, NULL);
    if (errno == ERANGE || !isfinite(v)) return NUMTEXT_BAD;
    *out = v;
    return 0;
}

// Shortest decimal text that reads back as the same double: exact, so a
// value just outside a range never prints as its bound (%g writes 1e+06 for
// both 1000001 and 1000000).
static inline void format_double(char *buf, size_t n, double v) {
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) return;
    }
}

#endif
