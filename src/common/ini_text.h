// ini_text.h: Debian's libinih set up for one whole file read into memory,
// the one way ropelab parses INI text (config files, data records).
//
// Debian's libinih keeps its settings in process-wide variables, so every
// parse sets them for its own text: stop at the first error (so the line
// returned is the one to report), no multi-line values, and a heap line
// buffer as long as the text's longest line plus "\r\n\0", so that a line
// is never cut in two (a long path would otherwise become two lines).
#ifndef ROPELAB_COMMON_INI_TEXT_H
#define ROPELAB_COMMON_INI_TEXT_H

#include <ini.h>
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

#endif
