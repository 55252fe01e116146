// fs.h: small file-system helpers shared by the programs.
#ifndef ROPELAB_FS_H
#define ROPELAB_FS_H

#include <stddef.h>

// mkdir -p path (mode 0777 & ~umask); 0, or -1 with "dir: cannot create directory: reason".
int make_dirs(const char *path, char *err, size_t errlen);

#endif
