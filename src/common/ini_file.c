// ini_file.c: a config file read key by key, with the line of each (see
// ini_file.h).
#include "common/ini_file.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/fs.h"

typedef struct {
    const char *text, *end;  // the whole file, read before parsing
    int line;                // lines handed to libinih so far
    IniKeyFn on_key;
    void *user;
    char *err;
    size_t errlen;
} IniState;

// Reader for ini_parse_stream: one line of the in-memory file per call.
// libinih's line buffer is sized to the file's longest line (ini_text_setup), so
// a line is never cut into chunks and st->line is the handler's line.
static char *ini_next_line(char *str, int num, void *stream) {
    IniState *st = stream;
    if (st->text >= st->end) return NULL;
    const char *nl = memchr(st->text, '\n', (size_t)(st->end - st->text));
    size_t n = nl ? (size_t)(nl - st->text) + 1 : (size_t)(st->end - st->text);
    if (n > (size_t)num - 1) n = (size_t)num - 1;
    memcpy(str, st->text, n);
    str[n] = 0;
    st->text += n;
    st->line++;
    return str;
}

// libinih's handler: nonzero goes on.
static int on_ini_key(void *user, const char *section, const char *name, const char *value) {
    IniState *st = user;
    return st->on_key(st->user, section, name, value, st->line, st->err, st->errlen) == 0;
}

// A config file is a regular file of at most 1 MiB of text.
#define INI_MAX_BYTES (1 << 20)

// Reads path whole into a NUL-terminated buffer; one-line errors.
static char *read_config_text(const char *path, size_t *len, char *err, size_t errlen) {
    long long size;
    FILE *f = fopen_regular_file(path, &size, err, errlen);
    if (!f) return NULL;
    if (size > INI_MAX_BYTES) {
        snprintf(err, errlen, "%s: %lld bytes is too large for a config file (at most %d)", path, size, INI_MAX_BYTES);
        fclose(f);
        return NULL;
    }
    char *text = malloc((size_t)size + 1);
    if (!text) { snprintf(err, errlen, "%s: out of memory", path); fclose(f); return NULL; }
    size_t got = fread(text, 1, (size_t)size, f);
    int failed = ferror(f) || got != (size_t)size;
    fclose(f);
    if (failed) {
        snprintf(err, errlen, "%s: read error", path);
        free(text);
        return NULL;
    }
    text[got] = 0;
    *len = got;
    return text;
}

int ini_file_read(const char *path, IniKeyFn on_key, void *user, char *err, size_t errlen) {
    size_t len;
    char *text = read_config_text(path, &len, err, errlen);
    if (!text) return -1;
    int nul_line = ini_text_setup(text, len);   // libinih's settings for this text
    if (nul_line) {
        snprintf(err, errlen, "%s:%d: NUL byte in the line (not a text file?)", path, nul_line);
        free(text);
        return -1;
    }

    IniState st = {.text = text, .end = text + len, .on_key = on_key, .user = user, .err = err, .errlen = errlen};
    err[0] = 0;
    int rc = ini_parse_stream(ini_next_line, &st, on_ini_key, &st);
    free(text);
    if (rc == 0) return 0;
    if (err[0]) return -1;   // on_key's message
    if (rc > 0) snprintf(err, errlen, "%s:%d: syntax error (expected [section] or key = value)", path, rc);
    else snprintf(err, errlen, "%s: cannot parse (error %d)", path, rc);
    return -1;
}
