// atomic_file.h: writing a file so that a crash leaves either the old file or
// the new one, never half of one.
//
//   AtomicFile af;
//   FILE *f = atomic_open(&af, path, ATOMIC_NEW, err, errlen);   // writes go to PATH.tmp.XXXXXX
//   ... fwrite(..., f) ... (ok = 0 on any failure)
//   if (atomic_commit(&af, ok, err, errlen)) ...      // fflush, fsync, rename, fsync dir
//
// The data reaches the disk (fsync) before the rename makes it visible under
// PATH, and the directory is synced so the rename itself survives a power
// loss. The temporary's name is unique (mkstemp), so two processes writing
// the same PATH never write into one temporary; a temporary left by a kill
// is named PATH.tmp.XXXXXX and is never read. Used by every writer of a
// whole file in ropelab: safetensors (weights, checkpoints, debug states),
// GGUF, token and tokenizer files, config.ini, log.csv when it is cut back,
// ./eval's --per-position file.
//
// What PATH may be. It must not exist, or be a regular file: a directory, a
// FIFO, a device, a socket, or a symbolic link to one of those (or to
// nothing) is refused in every mode, before the temporary is made and again
// just before the rename (a rename would otherwise put a regular file where
// /dev/null was). A symbolic link to a regular file counts as an existing
// file, and the rename replaces the link itself: the file it pointed to is
// never written (so a link planted where a program writes cannot redirect
// the write elsewhere). Whether an existing PATH may be replaced is the
// caller's choice, the mode:
//   ATOMIC_NEW      refused: "PATH: exists; pass --overwrite to replace it"
//                   (--overwrite is every program's word for it). The rename
//                   itself never replaces (renameat2 RENAME_NOREPLACE, or
//                   link + unlink where a file system lacks it), so a file
//                   that appears while the temporary is written is kept too.
//   ATOMIC_REPLACE  replaced: the programs' --overwrite, and the files the
//                   trainer rewrites in its own run directory.
#ifndef ROPELAB_ATOMIC_FILE_H
#define ROPELAB_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef enum { ATOMIC_NEW, ATOMIC_REPLACE } AtomicMode;

typedef struct {
    FILE *f;
    char *path, *tmp;   // owned until atomic_commit
    AtomicMode mode;
} AtomicFile;

// Whether atomic_open would accept PATH in this mode (the rules above): 0, or
// -1 with "PATH: problem". A program calls it for its outputs before its
// work, so that a refusal comes first; atomic_open checks again.
int atomic_check_target(const char *path, AtomicMode mode, char *err, size_t errlen);
// Creates the temporary for writing; NULL and a message on failure: PATH
// refused (above), longer than PATH_MAX, or "path: cannot create ...".
FILE *atomic_open(AtomicFile *af, const char *path, AtomicMode mode, char *err, size_t errlen);
// ok = 1: flush, fsync, close and rename the temporary over PATH (0 on success).
// ok = 0 (a write failed) or any step failing: remove the temporary, leave
// PATH untouched, fill err with "path: write failed: reason" (or PATH's
// refusal) and return -1.
int atomic_commit(AtomicFile *af, int ok, char *err, size_t errlen);

#endif
