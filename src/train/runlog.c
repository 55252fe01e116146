// runlog.c: log.csv (written row by row, flushed, cut back on resume) and the
// live progress line.
#include "train/runlog.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char LOG_HEADER[] = "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,elapsed_s\n";

// Rewrites path keeping the header and the rows with step <= last_step.
static int cut_log(const char *path, int last_step, char *err, size_t errlen) {
    FILE *in = fopen(path, "r");
    if (!in) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    char line[1024];
    int first = 1;
    while (fgets(line, sizeof line, in)) {
        if (first) {
            first = 0;
            if (strcmp(line, LOG_HEADER) != 0) {
                fclose(in); fclose(out); remove(tmp);
                snprintf(err, errlen, "%s: not a ropelab log (unexpected header)", path);
                return -1;
            }
            fputs(line, out);
            continue;
        }
        if (!strchr(line, '\n')) break;          // a row cut short by a crash
        if (atoi(line) > last_step) break;
        fputs(line, out);
    }
    fclose(in);
    int bad = ferror(out);
    if (fclose(out) != 0 || bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

int runlog_open(RunLog *log, const char *path, int resume_step, char *err, size_t errlen) {
    if (resume_step >= 0 && cut_log(path, resume_step, err, errlen)) return -1;
    log->f = fopen(path, resume_step >= 0 ? "a" : "w");
    if (!log->f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (resume_step < 0) fputs(LOG_HEADER, log->f);
    fflush(log->f);
    return 0;
}

static void field(FILE *f, const char *fmt, double v) {
    fputc(',', f);
    if (!isnan(v)) fprintf(f, fmt, v);
}

void runlog_row(RunLog *log, int step, float train_loss, float val_loss, float lr, float grad_norm,
                double tokens_per_s, double elapsed_s) {
    fprintf(log->f, "%d", step);
    field(log->f, "%.6f", train_loss);
    field(log->f, "%.6f", val_loss);
    field(log->f, "%.6g", lr);
    field(log->f, "%.6g", grad_norm);
    field(log->f, "%.0f", tokens_per_s);
    field(log->f, "%.3f", elapsed_s);
    fputc('\n', log->f);
    fflush(log->f);
}

void runlog_close(RunLog *log) {
    if (log->f) fclose(log->f);
    log->f = NULL;
}

void progress_init(Progress *p, int quiet, int steps) {
    p->quiet = quiet;
    p->is_tty = isatty(STDERR_FILENO);
    p->steps = steps;
    p->line_open = 0;
}

static void format_duration(char *buf, size_t n, double s) {
    if (!(s >= 0) || s > 1e8) snprintf(buf, n, "?");
    else if (s >= 3600) snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%.0fs", s);
}

void progress_update(Progress *p, int step, float train_loss, float val_loss, int evaluated,
                     double tokens_per_s, double eta_s) {
    if (p->quiet || (!p->is_tty && !evaluated)) return;
    char eta[32], val[32] = "-", loss[32] = "-", speed[32] = "-";
    format_duration(eta, sizeof eta, eta_s);
    if (!isnan(val_loss)) snprintf(val, sizeof val, "%.4f", val_loss);
    if (!isnan(train_loss)) snprintf(loss, sizeof loss, "%.4f", train_loss);
    if (tokens_per_s > 0) snprintf(speed, sizeof speed, "%.0f", tokens_per_s);
    if (p->is_tty) {
        fprintf(stderr, "\rstep %d/%d | loss %s | val %s | %s tok/s | ETA %s\033[K",
                step, p->steps, loss, val, speed, eta);
        p->line_open = 1;
    } else {
        fprintf(stderr, "step %d/%d | loss %s | val %s | %s tok/s | ETA %s\n",
                step, p->steps, loss, val, speed, eta);
    }
    fflush(stderr);
}

void progress_break(Progress *p) {
    if (p->line_open) fputc('\n', stderr);
    p->line_open = 0;
}
