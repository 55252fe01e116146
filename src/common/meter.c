// meter.c: the progress line of meter.h.
#include "common/meter.h"

#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"

enum { METER_MAX_LINE = 160 };
static const double METER_TTY_EVERY = 0.25;   // s between \r lines on a terminal
static const double METER_LOG_AFTER = 2.0;    // s of work before the first line elsewhere
static const double METER_LOG_EVERY = 10.0;   // s between lines elsewhere
static const double METER_FIRST_MARK = 0.05;  // s into a phase of the ETA fit's first point

int meter_stderr_is_stdout(void) {
    struct stat out, err;
    if (fstat(STDOUT_FILENO, &out) != 0 || fstat(STDERR_FILENO, &err) != 0) return 1;   // unknown: assume so
    return out.st_dev == err.st_dev && out.st_ino == err.st_ino;
}

void meter_start(Meter *m, const char *prog) {
    *m = (Meter){.prog = prog, .tty = isatty(STDERR_FILENO)};
    m->start = m->phase_start = m->last = clock_seconds();
}

void meter_phase(Meter *m, int on, int growing) {
    meter_clear(m);
    m->on = on;
    m->growing = growing;
    m->phase_start = clock_seconds();
    m->prev_n = m->mid_n = m->mark_n = 0;
    m->prev_t = m->mid_t = m->mark_t = 0.0;
}

void meter_clear(Meter *m) {
    if (!m->line_open) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    m->line_open = 0;
}

void meter_keep(Meter *m) {
    if (!m->line_open) return;
    fputc('\n', stderr);
    fflush(stderr);
    m->line_open = 0;
}

// "PROG: text" (or text alone) as the \r line on a terminal, a whole line elsewhere.
static void show(Meter *m, const char *text, double now) {
    const char *prefix = m->prog ? m->prog : "", *sep = m->prog ? ": " : "";
    if (m->tty) {
        fprintf(stderr, "\r%s%s%s\033[K", prefix, sep, text);
        m->line_open = 1;
    } else {
        fprintf(stderr, "%s%s%s\n", prefix, sep, text);
    }
    fflush(stderr);
    m->last = now;
}

void meter_text(Meter *m, int mark, const char *text) {
    if (!m->on) return;
    double now = clock_seconds();
    if (mark || (m->tty && now - m->last >= METER_TTY_EVERY)) show(m, text, now);
}

// 1234567 -> "1,234,567".
static void format_count(char *buf, size_t n, long long v) {
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%lld", v < 0 ? 0 : v), k = 0;
    for (int i = 0; i < len && k + 2 < (int)n; i++) {
        if (i > 0 && (len - i) % 3 == 0) buf[k++] = ',';
        buf[k++] = digits[i];
    }
    buf[k] = 0;
}

void meter_format_eta(char *buf, size_t n, double s) {
    if (!(s >= 0) || s > 1e8) snprintf(buf, n, "?");
    else if (s >= 3600) snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%.0fs", s);
}

// Seconds left after done of total units at t seconds into the phase. At a
// constant rate: (total - done) t / done. With growing = 1 the time to reach
// n units is t(n) = a n + b n^2 (unit i costs a + b (2i - 1): the constant
// part plus attention over i earlier positions), fitted through the phase's
// start, (mid_n, mid_t) and (done, t); b < 0 (noise) falls back to constant.
static double meter_eta(const Meter *m, long long done, long long total, double t) {
    double n2 = (double)done, N = (double)total, a = t / n2, b = 0.0;
    if (m->growing && m->mid_n > 0 && m->mid_n < done) {
        double n1 = (double)m->mid_n;
        // t/n = a + b n at both points: b is the slope of the time per unit.
        b = (t / n2 - m->mid_t / n1) / (n2 - n1);
        if (b < 0) b = 0.0;
        a = t / n2 - b * n2;
        if (a < 0) { a = 0.0; b = t / (n2 * n2); }   // all of it in the growing part
    }
    return a * (N - n2) + b * (N * N - n2 * n2);
}

void meter_update(Meter *m, const char *label, long long done, long long total, const char *unit) {
    if (!m->on) return;
    double now = clock_seconds(), t = now - m->phase_start;
    // The ETA fit's middle point: points kept at doubling times, mark the
    // latest and mid the one before it, which stays between about t/8 and t/2.
    if (t >= 2 * m->mark_t && t >= METER_FIRST_MARK) {
        m->mid_n = m->mark_n;
        m->mid_t = m->mark_t;
        m->mark_n = done;
        m->mark_t = t;
    }
    if (m->tty ? now - m->last < METER_TTY_EVERY
               : now - m->start < METER_LOG_AFTER || (m->last > m->start && now - m->last < METER_LOG_EVERY))
        return;
    // The rate shown is the recent one (since the previous line of this phase):
    // with growing costs the phase's average overstates the current speed.
    double dt = t - m->prev_t, rate = dt > 0 ? (double)(done - m->prev_n) / dt : 0.0;
    char d[32], tot[32], r[32] = "-", eta[32] = "?", line[METER_MAX_LINE];
    format_count(d, sizeof d, done);
    format_count(tot, sizeof tot, total);
    if (rate >= 10) format_count(r, sizeof r, (long long)(rate + 0.5));
    else if (rate > 0) snprintf(r, sizeof r, "%.2f", rate);
    if (done > 0 && t > 0) meter_format_eta(eta, sizeof eta, meter_eta(m, done, total, t));
    snprintf(line, sizeof line, "%s%s%s/%s %s, %s %s/s, ETA %s", label, *label ? " " : "", d, tot, unit, r, unit,
             eta);
    show(m, line, now);
    m->prev_n = done;
    m->prev_t = t;
}
