// run_dir.c: the run directory's files (see run_dir.h).
#include "train/run_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/machine.h"

static const char *const RUN_FILES[] = {"config.ini", "data.txt", "log.csv", "machine.txt", "checkpoint.safetensors",
                                        "model.safetensors", "train.lock"};
enum { N_RUN_FILES = (int)(sizeof RUN_FILES / sizeof RUN_FILES[0]) };

int run_dir_holds_run(const char *dir, char *mark, size_t n) {
    static const char *const MARKS[][2] = {{"train.lock", NULL}, {"checkpoint.safetensors", NULL},
                                           {"config.ini", "log.csv"}};
    for (size_t i = 0; i < sizeof MARKS / sizeof MARKS[0]; i++) {
        int all = 1;
        for (int k = 0; k < 2 && MARKS[i][k]; k++) {
            char path[PATH_MAX];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, MARKS[i][k]);
            all = all && lstat(path, &st) == 0;
        }
        if (all) {
            snprintf(mark, n, "%s%s%s", MARKS[i][0], MARKS[i][1] ? " and " : "", MARKS[i][1] ? MARKS[i][1] : "");
            return 1;
        }
    }
    return 0;
}

static const char *kind_of(mode_t m) {
    return S_ISLNK(m) ? "a symbolic link" : S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a regular file";
}

int run_dir_check_files(const char *dir, char *err, size_t errlen) {
    for (int i = 0; i < N_RUN_FILES; i++) {
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, RUN_FILES[i]);
        if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) continue;
        snprintf(err, errlen, "%s: is %s, not a file ./train wrote; a run directory's files are never followed or "
                 "waited on: remove it", path, kind_of(st.st_mode));
        return -1;
    }
    return 0;
}

// Opens DIR/NAME (flags: O_RDONLY, O_RDWR | O_CREAT, ...) without following a
// link or waiting on a FIFO, and only if it is a regular file. The
// descriptor, or -1 with a message.
static int open_run_file(const char *path, int flags, char *err, size_t errlen) {
    int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    struct stat st;
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s%s", path, strerror(errno),
                 errno == ELOOP ? " (a symbolic link: never followed in a run directory)" : "");
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: is %s, not a file ./train wrote: remove it", path, kind_of(st.st_mode));
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int run_dir_lock(const char *dir, int *fd, char *err, size_t errlen) {
    char path[PATH_MAX], pid[32] = "";   // the holder's, for the message
    snprintf(path, sizeof path, "%s/train.lock", dir);
    *fd = open_run_file(path, O_RDWR | O_CREAT, err, errlen);
    if (*fd < 0) return -1;
    if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
        int saved = errno;
        ssize_t n = pread(*fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        if (saved == EWOULDBLOCK)
            snprintf(err, errlen, "%s: in use by another ./train (pid %s); wait for it to end or stop it first", dir,
                     pid[0] ? pid : "?");
        else
            snprintf(err, errlen, "%s: cannot lock: %s", path, strerror(saved));
        close(*fd);
        *fd = -1;
        return -1;
    }
    return 0;
}

void run_dir_lock_note_pid(int fd) {
    char pid[32];
    snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, strlen(pid), 0) < 0) {}   // only informative
}

void run_dir_remove_temporaries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        for (int i = 0; i < N_RUN_FILES; i++) {
            size_t n = strlen(RUN_FILES[i]);
            if (strncmp(e->d_name, RUN_FILES[i], n) != 0 || strncmp(e->d_name + n, ".tmp.", 5) != 0) continue;
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

// The old machine.txt (a resume appends to it), at most 1 MiB: a run
// resumed thousands of times still fits, and nothing unbounded is read.
static char *read_machine_record(const char *path, size_t *len, char *err, size_t errlen) {
    enum { MAX_BYTES = 1 << 20 };
    *len = 0;
    char *text = malloc(MAX_BYTES);
    if (!text) { snprintf(err, errlen, "%s: out of memory", path); return NULL; }
    if (access(path, F_OK) != 0) return text;   // none yet
    int fd = open_run_file(path, O_RDONLY, err, errlen);
    if (fd < 0) { free(text); return NULL; }
    ssize_t n;
    while (*len < MAX_BYTES && (n = read(fd, text + *len, MAX_BYTES - *len)) > 0) *len += (size_t)n;
    close(fd);
    if (*len == MAX_BYTES) {
        snprintf(err, errlen, "%s: longer than %d bytes; not a record ./train wrote", path, MAX_BYTES);
        free(text);
        return NULL;
    }
    return text;
}

int run_dir_record_machine(const char *dir, int from_step, const char *extra, char *err, size_t errlen) {
    char path[PATH_MAX];
    size_t old_len = 0;
    snprintf(path, sizeof path, "%s/machine.txt", dir);
    char *old = from_step > 0 ? read_machine_record(path, &old_len, err, errlen) : NULL;
    if (from_step > 0 && !old) return -1;
    AtomicFile af;
    FILE *f = atomic_open(&af, path, ATOMIC_REPLACE, err, errlen);
    if (!f) { free(old); return -1; }
    int ok = old_len == 0 || fwrite(old, 1, old_len, f) == old_len;
    free(old);
    fprintf(f, "[from step %d]\n", from_step);
    machine_describe(f);
    fputs(extra, f);
    return atomic_commit(&af, ok && !ferror(f), err, errlen);
}

int run_dir_data_record(const char *tokenizer, const char *train_file, const char *val_file, DataRecord *r,
                        char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    const char *paths[DATA_N_FILES] = {tokenizer, train_file, val_file};
    for (int i = 0; i < DATA_N_FILES; i++)
        if (data_file_record(&r->files[i], paths[i], err, errlen) != 0) return -1;
    // The recipe, from the token files' own record when it is of these files.
    char dir_record[PATH_MAX + 16], ignored[256];
    snprintf(dir_record, sizeof dir_record, "%s", train_file);
    char *slash = strrchr(dir_record, '/');
    snprintf(slash ? slash + 1 : dir_record, sizeof dir_record - (size_t)(slash ? slash + 1 - dir_record : 0),
             "data.txt");
    DataRecord own;
    if (data_record_read(&own, dir_record, ignored, sizeof ignored) != 0) return 0;
    if (data_record_first_difference(&own, r) < 0 && own.has_recipe) {
        DataFile files[DATA_N_FILES];
        memcpy(files, r->files, sizeof files);   // the paths as this run names them
        *r = own;
        memcpy(r->files, files, sizeof files);
        return 0;
    }
    data_record_free(&own);
    return 0;
}
