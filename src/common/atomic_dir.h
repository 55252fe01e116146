// atomic_dir.h: a directory of a fixed set of files (./export --format hf's
// four), written whole: a kill, a full disk or a power loss leaves at PATH
// either the directory that was there or the new one, never a mix, and never
// debris that stops the next write.
//
//   AtomicDir ad;
//   if (atomic_dir_open(&ad, path, names, n, replace, err, errlen)) ...   // makes PATH.tmp.XXXXXX
//   ... each of names written into ad.tmp (atomic_open, st_write: ATOMIC_NEW) ...
//   rc = atomic_dir_commit(&ad, ok, err, errlen);   // PATH.tmp.XXXXXX put at PATH in one rename
//
// The files are written into a new sibling directory, PATH.tmp.XXXXXX
// (mkdtemp), each one fsynced, then the directory; one rename puts it at
// PATH, and the parent is fsynced so the rename survives a power loss. Over
// an existing directory (replace) the rename is an exchange (renameat2
// RENAME_EXCHANGE): the new directory takes PATH and the old one the
// temporary's name in the same step, and is then removed. atomic_dir.c says
// what a kill at each point leaves.
//
// The temporary is locked (flock) while its writer lives; a temporary of a
// killed writer (a directory named PATH.tmp.XXXXXX holding nothing but the
// names and their own temporaries NAME.tmp.XXXXXX, which no process locks)
// is removed by the next atomic_dir_open of PATH.
//
// What PATH may be (atomic_dir_check_target), in every mode:
//   nothing, or an empty directory   taken (a rename replaces an empty
//                                    directory, never one that holds a file)
//   a directory holding exactly the  a directory written here before:
//   names, each a regular file       replaced only with replace, else
//                                    "PATH: exists; pass --overwrite to replace it"
//   anything else                    refused, whatever the mode: a file, a
//                                    symbolic link, a directory holding
//                                    another file or lacking one of the names
//                                    (a part of one is not ours to remove)
#ifndef ROPELAB_ATOMIC_DIR_H
#define ROPELAB_ATOMIC_DIR_H

#include <stddef.h>

typedef struct {
    char *path;                 // PATH, without trailing slashes
    char *tmp;                  // PATH.tmp.XXXXXX: write the files here
    char *parent;               // the directory holding both
    const char *const *names;   // the files the directory holds
    int n_names, replace;
    int fd;                     // tmp, open and flock'ed until atomic_dir_commit
} AtomicDir;

// Whether PATH may be written by the rules above: 0, or -1 with "PATH: problem".
// A program calls it before its work; atomic_dir_open and atomic_dir_commit check again.
int atomic_dir_check_target(const char *path, const char *const *names, int n_names, int replace, char *err,
                            size_t errlen);
// Checks PATH, removes the temporaries of killed writers of PATH, and makes
// a new one (ad->tmp). 0, or -1 with a message.
int atomic_dir_open(AtomicDir *ad, const char *path, const char *const *names, int n_names, int replace,
                    char *err, size_t errlen);
// ok = 1 (every file written into ad->tmp): PATH checked again, then the new
// directory put in its place. 0 on success; 1 when it is in place but the
// old directory could not be removed (err says where it is left); -1 with a
// message, the temporary removed and PATH as it was, when ok = 0 (err kept)
// or a step failed.
int atomic_dir_commit(AtomicDir *ad, int ok, char *err, size_t errlen);

#endif
