// fs.h: small file-system helpers shared by the programs.
#ifndef ROPELAB_FS_H
#define ROPELAB_FS_H

#include <stddef.h>
#include <stdio.h>

// mkdir -p path (mode 0777 & ~umask); 0, or -1 with "dir: cannot create directory: reason".
int make_dirs(const char *path, char *err, size_t errlen);

// Whether make_dirs(dir) and writing files in dir would succeed, found
// without creating anything: dir, or its nearest ancestor that exists, must
// be a directory this process may write in. 0, or -1 with "dir: problem".
int fs_check_writable_dir(const char *dir, char *err, size_t errlen);

// Opens path for reading if it is a regular file: the one rule every input
// file of ropelab follows (config, weights, checkpoint, tokens, tokenizer).
// The open never blocks (a FIFO or a device would), and a directory, FIFO,
// socket or device is refused with "path: not a regular file". Returns the
// descriptor, or -1 with a message; *size gets the file's size.
int open_regular_file(const char *path, long long *size, char *err, size_t errlen);
// The same as a stdio stream ("rb"); NULL with a message.
FILE *fopen_regular_file(const char *path, long long *size, char *err, size_t errlen);

// Whether paths a and b name the same file (device and inode, after symbolic
// links); 0 when either does not exist.
int fs_same_file(const char *a, const char *b);
// Whether path names a file of any kind (after symbolic links: a dangling
// link names none).
int file_exists(const char *path);

#endif
