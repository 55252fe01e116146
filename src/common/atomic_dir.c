// atomic_dir.c: a directory written beside its place and renamed into it
// (see atomic_dir.h).
//
// What a kill leaves, at each point of a write of PATH:
//   before atomic_dir_open's mkdtemp    nothing new (removing the temporaries
//                                       of dead writers takes only those)
//   while the files are written, and    PATH as it was; PATH.tmp.XXXXXX, its
//   until the rename                    lock gone with its writer: removed
//                                       by the next atomic_dir_open of PATH
//   the rename, or the exchange         one step of the file system: PATH is
//                                       the old directory or the new one (a
//                                       file system without the exchange: two
//                                       renames, exchange_by_two_renames)
//   after the exchange, before the old  PATH the new directory; the old one
//   directory is removed                under PATH.tmp.XXXXXX, unlocked: removed
//                                       by the next atomic_dir_open of PATH
// A full disk or a file-size limit fails a write into the temporary: it is
// removed and PATH is as it was. Against a power loss, every file and the
// temporary are fsynced before the rename, and the parent after it.
#include "common/atomic_dir.h"

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

#define TMP_SUFFIX ".tmp.XXXXXX"   // mkdtemp's and mkstemp's six characters (atomic_file.h's temporaries too)

// Whether s is TMP_SUFFIX as mkdtemp fills it in.
static int is_tmp_suffix(const char *s) {
    size_t n = strlen(".tmp.");
    if (strncmp(s, ".tmp.", n) != 0 || strlen(s + n) != 6) return 0;
    for (const char *c = s + n; *c; c++)
        if (!(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') && !(*c >= '0' && *c <= '9')) return 0;
    return 1;
}

static int name_index(const char *entry, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(entry, names[i]) == 0) return i;
    return -1;
}

// One of the names, or the temporary atomic_open makes for one (NAME.tmp.XXXXXX).
static int is_written_entry(const char *entry, const char *const *names, int n) {
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (strncmp(entry, names[i], len) == 0 && (entry[len] == '\0' || is_tmp_suffix(entry + len))) return 1;
    }
    return 0;
}

// "a, b, c": the names, for the messages.
static void list_names(char *buf, size_t n, const char *const *names, int count) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < count && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", names[i]);
}

// What is at path: 0 nothing, or an empty directory; 1 a directory holding
// exactly the names (at most 32), each a regular file; -1 anything else (err says what).
static int classify(const char *path, const char *const *names, int n, char *err, size_t errlen) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: exists and is %s; not replaced", path,
                 S_ISLNK(st.st_mode) ? "a symbolic link (name the directory itself)" : "not a directory");
        return -1;
    }
    DIR *d = opendir(path);
    if (!d) {
        snprintf(err, errlen, "%s: cannot read the directory: %s", path, strerror(errno));
        return -1;
    }
    char list[512], problem[320] = "";
    unsigned found = 0;
    struct dirent *e;
    while (!problem[0] && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int i = name_index(e->d_name, names, n);
        struct stat fst;
        if (i < 0) {
            snprintf(problem, sizeof problem, "holds %.255s", e->d_name);
            for (char *c = problem; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';   // the message stays one line
        }
        else if (fstatat(dirfd(d), e->d_name, &fst, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(fst.st_mode))
            snprintf(problem, sizeof problem, "%s is not a regular file", e->d_name);
        else
            found |= 1u << i;
    }
    closedir(d);
    if (!problem[0] && found == 0) return 0;
    for (int i = 0; !problem[0] && i < n; i++)
        if (!(found & (1u << i))) snprintf(problem, sizeof problem, "lacks %s", names[i]);
    if (!problem[0]) return 1;
    list_names(list, sizeof list, names, n);
    snprintf(err, errlen, "%s: %s: not a directory of exactly %s; not replaced", path, problem, list);
    return -1;
}

// path without its trailing slashes, and its parent; the last name must be one
// (not ".", ".." or "/": the temporary is made beside it).
static int split_path(const char *path, char **clean, char **parent, char *err, size_t errlen) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    const char *slash = memrchr(path, '/', n), *last = slash ? slash + 1 : path;
    size_t last_len = n - (size_t)(last - path);
    if (n + sizeof TMP_SUFFIX > PATH_MAX || last_len == 0 || (last_len == 1 && last[0] == '.') ||
        (last_len == 2 && !strncmp(last, "..", 2))) {
        snprintf(err, errlen, "%.200s%s: not a name for a new directory (empty, ., .., / or longer than %d "
                 "characters)", path, n > 200 ? "..." : "", PATH_MAX - (int)sizeof TMP_SUFFIX);
        return -1;
    }
    *clean = strndup(path, n);
    *parent = slash == path ? strdup("/") : slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
    if (!*clean || !*parent) {
        free(*clean);
        free(*parent);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    return 0;
}

int atomic_dir_check_target(const char *path, const char *const *names, int n_names, int replace, char *err,
                            size_t errlen) {
    char *clean, *parent;
    if (split_path(path, &clean, &parent, err, errlen) != 0) return -1;
    int kind = classify(clean, names, n_names, err, errlen);
    if (kind == 1 && !replace) snprintf(err, errlen, "%s: exists; pass --overwrite to replace it", clean);
    free(clean);
    free(parent);
    return kind < 0 || (kind == 1 && !replace) ? -1 : 0;
}

// Removes the directory path if it holds nothing but the names and their
// temporaries (a file of another name is left, and so is the directory): 0
// when it is gone.
static int remove_written(const char *path, const char *const *names, int n) {
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT ? 0 : -1;
    int left = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!is_written_entry(e->d_name, names, n) || (unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT))
            left = 1;
    }
    closedir(d);
    return !left && (rmdir(path) == 0 || errno == ENOENT) ? 0 : -1;
}

// The temporaries of killed writers of ad->path: every PATH.tmp.XXXXXX
// beside it that no process locks (a live writer holds its lock to the end)
// and that holds nothing but the names and their temporaries.
static void remove_debris(const AtomicDir *ad) {
    DIR *d = opendir(ad->parent);
    if (!d) return;
    const char *base = strrchr(ad->path, '/') ? strrchr(ad->path, '/') + 1 : ad->path;
    size_t len = strlen(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, base, len) != 0 || !is_tmp_suffix(e->d_name + len)) continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            char full[PATH_MAX];
            if ((size_t)snprintf(full, sizeof full, "%s/%s", ad->parent, e->d_name) < sizeof full)
                remove_written(full, ad->names, ad->n_names);
        }
        close(fd);   // releases the lock
    }
    closedir(d);
}

static void release(AtomicDir *ad) {
    if (ad->fd >= 0) close(ad->fd);
    free(ad->path);
    free(ad->tmp);
    free(ad->parent);
    ad->path = ad->tmp = ad->parent = NULL;
    ad->fd = -1;
}

int atomic_dir_open(AtomicDir *ad, const char *path, const char *const *names, int n_names, int replace,
                    char *err, size_t errlen) {
    memset(ad, 0, sizeof *ad);
    ad->fd = -1;
    ad->names = names;
    ad->n_names = n_names;
    ad->replace = replace;
    if (split_path(path, &ad->path, &ad->parent, err, errlen) != 0) return -1;
    if (atomic_dir_check_target(ad->path, names, n_names, replace, err, errlen) != 0) {
        release(ad);
        return -1;
    }
    remove_debris(ad);
    size_t n = strlen(ad->path) + sizeof TMP_SUFFIX;
    if (!(ad->tmp = malloc(n))) {
        snprintf(err, errlen, "%s: out of memory", ad->path);
        release(ad);
        return -1;
    }
    snprintf(ad->tmp, n, "%s%s", ad->path, TMP_SUFFIX);
    if (!mkdtemp(ad->tmp)) {
        snprintf(err, errlen, "%s: cannot create %s: %s", ad->path, ad->tmp, strerror(errno));
        release(ad);
        return -1;
    }
    // Locked for the writer's life (a file system without flock leaves it
    // unlocked, and remove_debris, unable to lock either, removes nothing).
    // A remove_debris that locked it between mkdtemp and here has removed
    // it: its link count is then 0.
    mode_t mask = umask(0);   // mkdtemp makes 0700; the directory gets mkdir's 0777 & ~umask
    umask(mask);
    struct stat st = {0};
    ad->fd = open(ad->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *why = ad->fd < 0 ? strerror(errno) : NULL;
    if (!why) (void)flock(ad->fd, LOCK_EX);
    if (!why && fstat(ad->fd, &st) != 0) why = strerror(errno);
    if (!why && st.st_nlink == 0) why = "removed by another process";
    if (!why && fchmod(ad->fd, 0777 & ~mask) != 0) why = strerror(errno);
    if (why) {
        snprintf(err, errlen, "%s: cannot create %s: %s", ad->path, ad->tmp, why);
        rmdir(ad->tmp);
        release(ad);
        return -1;
    }
    return 0;
}

static void sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

// The exchange where the file system has none (renameat2 EINVAL: NFS, for
// one): PATH to a second temporary, then ours to PATH. A kill between the
// two leaves no PATH and the old directory under that temporary's name,
// which the next atomic_dir_open removes. old gets that name.
static int exchange_by_two_renames(const AtomicDir *ad, char *old, size_t n) {
    snprintf(old, n, "%s%s", ad->path, TMP_SUFFIX);
    if (!mkdtemp(old)) return -1;
    if (rename(ad->path, old) != 0) {   // over the empty directory mkdtemp made
        int saved = errno;
        rmdir(old);
        errno = saved;
        return -1;
    }
    if (rename(ad->tmp, ad->path) == 0) return 0;
    int saved = errno;
    rename(old, ad->path);   // the old one back
    errno = saved;
    return -1;
}

// A writer's message names a file in the temporary (PATH.tmp.XXXXXX/NAME:
// write failed: ...); it is said of PATH/NAME, the file the user asked for.
static void said_of_path(const AtomicDir *ad, char *err) {
    size_t t = strlen(ad->tmp), p = strlen(ad->path);
    if (strncmp(err, ad->tmp, t) != 0) return;
    memmove(err + p, err + t, strlen(err + t) + 1);   // p < t: shorter
    memcpy(err, ad->path, p);
}

int atomic_dir_commit(AtomicDir *ad, int ok, char *err, size_t errlen) {
    int rc = -1, kind = -1;
    size_t n = strlen(ad->path) + sizeof TMP_SUFFIX;
    char *old = malloc(n);   // where the replaced directory is left until it is removed
    if (!ok) {               // err holds the writer's message
        said_of_path(ad, err);
        goto fail;
    }
    if (!old) {
        snprintf(err, errlen, "%s: out of memory", ad->path);
        goto fail;
    }
    if (fsync(ad->fd) != 0) {
        snprintf(err, errlen, "%s: write failed: %s: %s", ad->path, ad->tmp, strerror(errno));
        goto fail;
    }
    // PATH again: it may have changed since atomic_dir_open.
    kind = classify(ad->path, ad->names, ad->n_names, err, errlen);
    if (kind < 0) goto fail;
    if (kind == 1 && !ad->replace) {
        snprintf(err, errlen, "%s: exists; pass --overwrite to replace it", ad->path);
        goto fail;
    }
    if (kind == 0) {   // a rename replaces an empty directory, and fails if one with a file appeared
        if (rename(ad->tmp, ad->path) != 0) {
            snprintf(err, errlen, "%s: cannot put %s in its place: %s", ad->path, ad->tmp, strerror(errno));
            goto fail;
        }
    } else if (renameat2(AT_FDCWD, ad->tmp, AT_FDCWD, ad->path, RENAME_EXCHANGE) == 0) {
        snprintf(old, n, "%s", ad->tmp);
    } else if (!((errno == EINVAL || errno == ENOSYS) && exchange_by_two_renames(ad, old, n) == 0)) {
        snprintf(err, errlen, "%s: cannot put %s in its place: %s", ad->path, ad->tmp, strerror(errno));
        goto fail;
    }
    sync_dir(ad->parent);
    rc = 0;
    if (kind == 1 && remove_written(old, ad->names, ad->n_names) != 0) {
        snprintf(err, errlen, "%s: written; the directory it replaced is left at %s (it holds a file not written "
                 "here, or a removal failed)", ad->path, old);
        rc = 1;
    }
    free(old);
    release(ad);
    return rc;
fail:
    remove_written(ad->tmp, ad->names, ad->n_names);
    free(old);
    release(ad);
    return -1;
}
