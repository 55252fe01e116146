// runlog.c: log.csv (rows queued in memory until they are whole on disk, cut
// back on resume) and the live progress line.
#include "train/runlog.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "train/fault_inject.h"

static const char LOG_HEADER[] = "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,elapsed_s\n";

// Writes n bytes at offset off; 0, or -1 with errno set.
static int write_at(int fd, const char *p, size_t n, off_t off) {
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        if (w == 0) { errno = EIO; return -1; }
        p += w; n -= (size_t)w; off += w;
    }
    return 0;
}

int runlog_flush(RunLog *log, char *err, size_t errlen) {
    if (log->queue_len == 0) return 0;
    // Drop whatever a failed attempt left after the last whole row, then write the queue there.
    int failed = ftruncate(log->fd, log->good_size) != 0;
    if (!failed && fault_log_write_fails(log->last_step)) {   // test build only: half a write, then a full disk
        (void)write_at(log->fd, log->queue, log->queue_len / 2, log->good_size);
        errno = ENOSPC;
        failed = 1;
    }
    if (!failed) failed = write_at(log->fd, log->queue, log->queue_len, log->good_size) != 0;
    if (failed) {
        snprintf(err, errlen, "%s: write failed: %s (%d row%s from step %d kept in memory, retried at the next step)",
                 log->path, strerror(errno), log->n_queued, log->n_queued == 1 ? "" : "s", log->first_queued);
        return -1;
    }
    log->good_size += (off_t)log->queue_len;
    log->queue_len = 0;
    log->n_queued = 0;
    return 0;
}

// Appends text to the queue (the queue only grows while writes fail).
static int enqueue(RunLog *log, const char *text, size_t n, int step) {
    if (log->queue_len + n > log->queue_cap) {
        size_t cap = 2 * (log->queue_len + n) + 4096;
        char *q = realloc(log->queue, cap);
        if (!q) return -1;
        log->queue = q;
        log->queue_cap = cap;
    }
    memcpy(log->queue + log->queue_len, text, n);
    log->queue_len += n;
    if (log->n_queued++ == 0) log->first_queued = step;
    log->last_step = step;
    return 0;
}

// Reads the rows of path up to resume_step: they must be exactly the steps
// 0..resume_step, in order (a row cut short by a crash after them is dropped).
static int read_rows(const char *path, int resume_step, char **rows, size_t *len, char *err, size_t errlen) {
    FILE *in = fopen(path, "r");
    if (!in) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    char line[1024];
    size_t cap = 1 << 16;
    *rows = malloc(cap);
    *len = 0;
    int expect = 0, rc = -1;
    if (!*rows) { snprintf(err, errlen, "%s: out of memory", path); goto done; }
    if (!fgets(line, sizeof line, in) || strcmp(line, LOG_HEADER) != 0) {
        snprintf(err, errlen, "%s: not a ropelab log (unexpected header)", path);
        goto done;
    }
    while (expect <= resume_step && fgets(line, sizeof line, in)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n') break;   // a row cut short by a crash
        char *end;
        long step = strtol(line, &end, 10);
        if (end == line || *end != ',' || step != expect) {
            int shown = (int)strcspn(line, "\n");   // the message stays one line
            snprintf(err, errlen, "%s: row for step %d expected, found '%.*s' (the log does not match the "
                     "checkpoint at step %d)", path, expect, shown < 40 ? shown : 40, line, resume_step);
            goto done;
        }
        if (*len + n > cap) {
            cap *= 2;
            char *r = realloc(*rows, cap);
            if (!r) { snprintf(err, errlen, "%s: out of memory", path); goto done; }
            *rows = r;
        }
        memcpy(*rows + *len, line, n);
        *len += n;
        expect++;
    }
    if (ferror(in)) { snprintf(err, errlen, "%s: read error", path); goto done; }
    if (expect <= resume_step) {
        snprintf(err, errlen, "%s: rows %d..%d are missing (the checkpoint is at step %d)", path, expect,
                 resume_step, resume_step);
        goto done;
    }
    rc = 0;
done:
    fclose(in);
    if (rc != 0) { free(*rows); *rows = NULL; }
    return rc;
}

int runlog_open(RunLog *log, const char *path, int resume_step, char *err, size_t errlen) {
    memset(log, 0, sizeof *log);
    log->fd = -1;
    log->last_step = -1;
    if (strlen(path) >= sizeof log->path) { snprintf(err, errlen, "%s: path too long", path); return -1; }
    snprintf(log->path, sizeof log->path, "%s", path);
    char *rows = NULL;
    size_t n_rows = 0;
    if (resume_step >= 0 && read_rows(path, resume_step, &rows, &n_rows, err, errlen) != 0) return -1;
    // The kept rows (or the header alone) replace the file atomically, so a
    // crash here leaves the old log or the cut one.
    AtomicFile af;
    FILE *f = atomic_open(&af, path, ATOMIC_REPLACE, err, errlen);
    if (!f) { free(rows); return -1; }
    int ok = fputs(LOG_HEADER, f) >= 0 && (n_rows == 0 || fwrite(rows, 1, n_rows, f) == n_rows);
    free(rows);
    if (atomic_commit(&af, ok, err, errlen) != 0) return -1;
    log->fd = open(path, O_WRONLY);
    struct stat st;
    if (log->fd < 0 || fstat(log->fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (log->fd >= 0) close(log->fd);
        log->fd = -1;
        return -1;
    }
    log->good_size = st.st_size;
    return 0;
}

static void field(char *buf, size_t n, size_t *k, const char *fmt, double v) {
    if (*k < n) *k += (size_t)snprintf(buf + *k, n - *k, ",");
    if (!isnan(v) && *k < n) *k += (size_t)snprintf(buf + *k, n - *k, fmt, v);
}

int runlog_row(RunLog *log, int step, float train_loss, float val_loss, float lr, float grad_norm,
               double tokens_per_s, double elapsed_s, char *err, size_t errlen) {
    char row[512];
    size_t k = (size_t)snprintf(row, sizeof row, "%d", step);
    field(row, sizeof row, &k, "%.6f", train_loss);
    field(row, sizeof row, &k, "%.6f", val_loss);
    field(row, sizeof row, &k, "%.6g", lr);
    field(row, sizeof row, &k, "%.6g", grad_norm);
    field(row, sizeof row, &k, "%.0f", tokens_per_s);
    field(row, sizeof row, &k, "%.3f", elapsed_s);
    if (k + 1 < sizeof row) row[k++] = '\n';
    if (enqueue(log, row, k, step) != 0) {
        snprintf(err, errlen, "%s: out of memory for the rows that could not be written", log->path);
        return -1;
    }
    return runlog_flush(log, err, errlen);
}

void runlog_close(RunLog *log) {
    if (log->fd >= 0) close(log->fd);
    log->fd = -1;
    free(log->queue);
    log->queue = NULL;
    log->queue_len = log->queue_cap = 0;
}

void progress_init(Progress *p, int quiet, int steps) {
    meter_start(&p->meter, NULL);
    meter_phase(&p->meter, !quiet, 0);
    p->steps = steps;
}

void progress_update(Progress *p, int step, float train_loss, float val_loss, int evaluated,
                     double tokens_per_s, double eta_s) {
    char eta[32], val[32] = "-", loss[32] = "-", speed[32] = "-", line[192];
    meter_format_eta(eta, sizeof eta, eta_s);
    if (!isnan(val_loss)) snprintf(val, sizeof val, "%.4f", val_loss);
    if (!isnan(train_loss)) snprintf(loss, sizeof loss, "%.4f", train_loss);
    if (tokens_per_s > 0) snprintf(speed, sizeof speed, "%.0f", tokens_per_s);
    snprintf(line, sizeof line, "step %d/%d | loss %s | val %s | %s tok/s | ETA %s", step, p->steps, loss, val, speed,
             eta);
    meter_text(&p->meter, evaluated, line);
}

void progress_break(Progress *p) {
    meter_keep(&p->meter);
}
