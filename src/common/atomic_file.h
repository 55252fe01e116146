// atomic_file.h: writing a file so that a crash leaves either the old file or
// the new one, never half of one.
//
//   AtomicFile af;
//   FILE *f = atomic_open(&af, path, err, errlen);   // writes go to PATH.tmp
//   ... fwrite(..., f) ... (ok = 0 on any failure)
//   if (atomic_commit(&af, ok, err, errlen)) ...      // fflush, fsync, rename, fsync dir
//
// The data reaches the disk (fsync) before the rename makes it visible under
// PATH, and the directory is synced so the rename itself survives a power
// loss. Used by every writer in ropelab: safetensors (weights, checkpoints,
// debug states), token files and tokenizer files.
#ifndef ROPELAB_ATOMIC_FILE_H
#define ROPELAB_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    FILE *f;
    char path[1024];
    char tmp[1040];
} AtomicFile;

// Creates PATH.tmp for writing; NULL (and "path: cannot create ...") on failure.
FILE *atomic_open(AtomicFile *af, const char *path, char *err, size_t errlen);
// ok = 1: flush, fsync, close and rename PATH.tmp over PATH (0 on success).
// ok = 0 (a write failed) or any step failing: remove PATH.tmp, leave PATH
// untouched, fill err with "path: write failed: reason" and return -1.
int atomic_commit(AtomicFile *af, int ok, char *err, size_t errlen);

#endif
