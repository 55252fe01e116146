// ini_file.h: INI text, the one way ropelab parses it: Debian's libinih set
// up for one whole file read into memory (config files, data records), and
// a config file read key by key with the line of each (ini_file_read).
//
// Debian's libinih keeps its settings in process-wide variables, so every
// parse sets them for its own text: stop at the first error (so the line
// returned is the one to report), no multi-line values, and a heap line
// buffer as long as the text's longest line plus "\r\n\0", so that a line
// is never cut in two (a long path would otherwise become two lines).
#ifndef ROPELAB_COMMON_INI_FILE_H
#define ROPELAB_COMMON_INI_FILE_H

#include <ini.h>
#include <stddef.h>
#include <string.h>

// Sets libinih for text (len bytes). A NUL byte would end libinih's line
// early and drop the rest silently: 0, or the line number of the first NUL.
static inline int ini_text_setup(const char *text, size_t len) {
    const char *nul = memchr(text, 0, len);
    int longest = 0, line = 1;
    for (const char *p = text, *start = text; p <= text + len; p++)
        if (p == text + len || *p == '\n') {
            if (p - start > longest) longest = (int)(p - start);
            start = p + 1;
            if (nul && nul < p) return line;
            line++;
        }
    ini_stop_on_first_error = 1;
    ini_allow_multiline = 0;
    ini_use_stack = 0;
    ini_allow_realloc = 0;              // the first allocation is already long enough:
    ini_initial_alloc = longest + 3;    // the heap buffer's size (libinih reads no more per call)
    ini_max_line = longest + 3;
    return 0;
}

// What ini_file_read hands each key: its section ("" before the first
// [section]), name, value and line number. 0, or -1 with a message in err,
// which stops the reading and is its message.
typedef int (*IniKeyFn)(void *user, const char *section, const char *name, const char *value, int line,
                        char *err, size_t errlen);

// Reads the config file path (a regular file of at most 1 MiB of text,
// without a NUL byte) and hands on_key every key in the file's order. 0, or
// -1 with a message: on_key's, or "path:LINE: syntax error (expected
// [section] or key = value)", or the file's own problem.
int ini_file_read(const char *path, IniKeyFn on_key, void *user, char *err, size_t errlen);

#endif
