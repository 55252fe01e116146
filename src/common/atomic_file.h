// atomic_file.h: writing a file so that a crash leaves either the old file or
// the new one, never half of one.
//
//   AtomicFile af;
//   FILE *f = atomic_open(&af, path, err, errlen);   // writes go to PATH.tmp.XXXXXX
//   ... fwrite(..., f) ... (ok = 0 on any failure)
//   if (atomic_commit(&af, ok, err, errlen)) ...      // fflush, fsync, rename, fsync dir
//
// The data reaches the disk (fsync) before the rename makes it visible under
// PATH, and the directory is synced so the rename itself survives a power
// loss. The temporary's name is unique (mkstemp), so two processes writing
// the same PATH never write into one temporary; a temporary left by a kill
// is named PATH.tmp.XXXXXX and is never read. Used by every writer of a
// whole file in ropelab: safetensors (weights, checkpoints, debug states),
// token and tokenizer files, config.ini, and log.csv when it is cut back.
#ifndef ROPELAB_ATOMIC_FILE_H
#define ROPELAB_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    FILE *f;
    char *path, *tmp;   // owned until atomic_commit
} AtomicFile;

// Creates the temporary for writing; NULL (and "path: cannot create ...") on
// failure, including a path longer than PATH_MAX.
FILE *atomic_open(AtomicFile *af, const char *path, char *err, size_t errlen);
// ok = 1: flush, fsync, close and rename the temporary over PATH (0 on success).
// ok = 0 (a write failed) or any step failing: remove the temporary, leave
// PATH untouched, fill err with "path: write failed: reason" and return -1.
int atomic_commit(AtomicFile *af, int ok, char *err, size_t errlen);

#endif
