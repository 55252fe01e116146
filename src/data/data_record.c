// data_record.c: data records (DIR/data.txt; the layout is in data_record.h).
#include "data/data_record.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/ini_file.h"
#include "common/numtext.h"

const char *const DATA_FILE_KEYS[DATA_N_FILES] = {"tokenizer", "train", "val"};
const char *const DATA_FILE_NAMES[DATA_N_FILES] = {"tokenizer.bin", "train.bin", "val.bin"};

// FNV-1a, 64 bits: h = 14695981039346656037, then per byte h = (h ^ byte) * 1099511628211.
// The file's bytes continue the hash *fnv1a and add to *bytes.
static int hash_more(const char *path, long long *bytes, uint64_t *fnv1a, char *err, size_t errlen) {
    long long size;
    int fd = open_regular_file(path, &size, err, errlen);
    if (fd < 0) return -1;
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) {
        close(fd);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    uint64_t h = *fnv1a;
    long long total = *bytes;
    ssize_t n;
    while ((n = read(fd, buf, CHUNK)) > 0) {
        for (ssize_t i = 0; i < n; i++) h = (h ^ buf[i]) * 0x100000001b3ull;
        total += n;
    }
    int failed = n < 0;
    if (failed) snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
    free(buf);
    close(fd);
    if (failed) return -1;
    *bytes = total;
    *fnv1a = h;
    return 0;
}

int data_file_hash(const char *path, long long *bytes, uint64_t *fnv1a, char *err, size_t errlen) {
    *bytes = 0;
    *fnv1a = 0xcbf29ce484222325ull;
    return hash_more(path, bytes, fnv1a, err, errlen);
}

int data_files_record(DataFile *f, const char *path, const char *const *files, int n, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (strlen(path) >= sizeof f->path) {
        snprintf(err, errlen, "%.200s...: path longer than %d characters", path, DATA_PATH_MAX - 1);
        return -1;
    }
    snprintf(f->path, sizeof f->path, "%s", path);
    f->fnv1a = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++)
        if (hash_more(files[i], &f->bytes, &f->fnv1a, err, errlen) != 0) return -1;
    f->known = 1;
    return 0;
}

int data_file_record(DataFile *f, const char *path, char *err, size_t errlen) {
    return data_files_record(f, path, &path, 1, err, errlen);
}

void data_record_free(DataRecord *r) {
    free(r->inputs);
    memset(r, 0, sizeof *r);
}

// ---- reading ---------------------------------------------------------------

typedef struct {
    DataRecord *r;
    int seen_files[DATA_N_FILES][3], input_parts[3];   // how often each key was seen
    char err[DATA_PATH_MAX + 200];   // the problem; data_record_read adds "path:line: "
} Reader;

// One of a DataFile's three keys: NAME, NAME_bytes, NAME_fnv1a (part 0, 1, 2).
static int file_key(const char *key, const char *name, int *part) {
    size_t n = strlen(name);
    if (strncmp(key, name, n) != 0) return 0;
    if (key[n] == 0) *part = 0;
    else if (strcmp(key + n, "_bytes") == 0) *part = 1;
    else if (strcmp(key + n, "_fnv1a") == 0) *part = 2;
    else return 0;
    return 1;
}

// value into part (path, bytes, fnv1a) of f; 0 or -1 with rd->err.
static int set_file_part(Reader *rd, DataFile *f, const char *key, int part, const char *value) {
    if (part == 0) {
        if (!*value || strlen(value) >= sizeof f->path) {
            snprintf(rd->err, sizeof rd->err, "%s: empty or longer than %d characters", key, DATA_PATH_MAX - 1);
            return -1;
        }
        snprintf(f->path, sizeof f->path, "%s", value);
        return 0;
    }
    if (part == 1) {
        if (parse_integer(value, 0, (long long)1 << 50, &f->bytes) != 0) {
            snprintf(rd->err, sizeof rd->err, "%s: not a whole number of bytes", key);
            return -1;
        }
    } else {
        char *end;
        if (strlen(value) != 16 || strspn(value, "0123456789abcdef") != 16) {
            snprintf(rd->err, sizeof rd->err, "%s: expected 16 lowercase hex digits", key);
            return -1;
        }
        f->fnv1a = strtoull(value, &end, 16);
    }
    return 0;
}

static int on_key(void *user, const char *section, const char *key, const char *value) {
    Reader *rd = user;
    DataRecord *r = rd->r;
    int part;
    if (strcmp(section, "files") == 0) {
        for (int i = 0; i < DATA_N_FILES; i++)
            if (file_key(key, DATA_FILE_KEYS[i], &part)) {
                if (rd->seen_files[i][part]++) break;
                return set_file_part(rd, &r->files[i], key, part, value) == 0;
            }
    } else if (strcmp(section, "recipe") == 0) {
        r->has_recipe = 1;
        long long v;
        if (file_key(key, "input", &part)) {
            if (part > 0 && r->n_inputs == 0) {
                snprintf(rd->err, sizeof rd->err, "%s before the first 'input ='", key);
                return 0;
            }
            if (++rd->input_parts[part] > r->n_inputs + (part == 0)) {   // a second input_bytes in one block
                snprintf(rd->err, sizeof rd->err, "%s repeated within one input block", key);
                return 0;
            }
            if (part == 0) {
                if (r->n_inputs == DATA_RECORD_MAX_INPUTS) {
                    snprintf(rd->err, sizeof rd->err, "more than %d inputs", DATA_RECORD_MAX_INPUTS);
                    return 0;
                }
                DataFile *more = realloc(r->inputs, ((size_t)r->n_inputs + 1) * sizeof *more);
                if (!more) { snprintf(rd->err, sizeof rd->err, "out of memory"); return 0; }
                r->inputs = more;
                memset(&r->inputs[r->n_inputs++], 0, sizeof *more);
            }
            return set_file_part(rd, &r->inputs[r->n_inputs - 1], key, part, value) == 0;
        }
        if (file_key(key, "tokenizer", &part)) return set_file_part(rd, &r->tokenizer_from, key, part, value) == 0;
        if (strcmp(key, "vocab_size") == 0 && parse_integer(value, 257, 65536, &v) == 0) {
            r->vocab_size = (int)v;
            return 1;
        }
        if (strcmp(key, "val_fraction") == 0 && parse_number(value, &r->val_fraction) == 0 &&
            r->val_fraction > 0 && r->val_fraction <= 0.5)
            return 1;
        if (strcmp(key, "split") == 0 && (strcmp(value, "tail") == 0 || strcmp(value, "docs") == 0)) {
            snprintf(r->split, sizeof r->split, "%s", value);
            return 1;
        }
        if (strcmp(key, "doc_sep") == 0 && *value && strlen(value) < sizeof r->doc_sep) {
            snprintf(r->doc_sep, sizeof r->doc_sep, "%s", value);
            return 1;
        }
        if (strcmp(key, "pretokenizer") == 0 && (strcmp(value, "gpt2") == 0 || strcmp(value, "byte-classes") == 0)) {
            snprintf(r->pretokenizer, sizeof r->pretokenizer, "%s", value);
            return 1;
        }
    }
    snprintf(rd->err, sizeof rd->err, "[%s] %s = %.100s: unknown key, repeated key or bad value", section, key, value);
    return 0;
}

int data_record_read(DataRecord *r, const char *path, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    long long size;
    FILE *f = fopen_regular_file(path, &size, err, errlen);
    if (!f) return -1;
    if (size > DATA_RECORD_MAX_BYTES) {
        fclose(f);
        snprintf(err, errlen, "%s: %lld bytes, more than a data record's %d", path, size, DATA_RECORD_MAX_BYTES);
        return -1;
    }
    char *text = malloc((size_t)size + 1);
    size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!text || got != (size_t)size) {
        free(text);
        snprintf(err, errlen, "%s: %s", path, text ? "read error" : "out of memory");
        return -1;
    }
    text[size] = 0;
    Reader rd = {.r = r};
    for (int i = 0; i < DATA_N_FILES; i++) r->files[i].bytes = -1;
    int line = ini_text_setup(text, (size_t)size);   // libinih's settings for this text
    if (line == 0) line = ini_parse_string(text, on_key, &rd);
    free(text);
    if (line != 0) {
        snprintf(err, errlen, "%s:%d: %s", path, line, rd.err[0] ? rd.err : "not a data record line");
        data_record_free(r);
        return -1;
    }
    for (int i = 0; i < DATA_N_FILES; i++) {
        int *seen = rd.seen_files[i];
        if (!seen[0] || seen[1] != seen[2]) {
            snprintf(err, errlen, "%s: [files] needs %s (and %s_bytes with %s_fnv1a, or neither)", path,
                     DATA_FILE_KEYS[i], DATA_FILE_KEYS[i], DATA_FILE_KEYS[i]);
            data_record_free(r);
            return -1;
        }
        r->files[i].known = seen[2];
    }
    if (r->has_recipe) {
        int from = r->tokenizer_from.path[0] != 0;
        const char *missing = r->n_inputs == 0 ? "input" : !r->vocab_size && !from ? "vocab_size"
                            : r->val_fraction == 0 ? "val_fraction" : !r->split[0] ? "split"
                            : !from == !r->pretokenizer[0] ? "pretokenizer (or tokenizer, not both)" : NULL;
        if (!missing && rd.input_parts[1] != rd.input_parts[2])
            missing = "input_bytes with input_fnv1a (both, or neither for a recipe alone)";
        if (!missing && rd.input_parts[1] != 0 && rd.input_parts[1] != r->n_inputs)
            missing = "input_bytes and input_fnv1a in every input block";
        if (missing) {
            snprintf(err, errlen, "%s: [recipe] lacks %s", path, missing);
            data_record_free(r);
            return -1;
        }
        for (int i = 0; i < r->n_inputs; i++) r->inputs[i].known = rd.input_parts[2] > 0;
        r->tokenizer_from.known = from;
    }
    return 0;
}

// ---- writing ---------------------------------------------------------------

static void write_file(FILE *f, const char *key, const DataFile *d) {
    fprintf(f, "%s = %s\n", key, d->path);
    if (d->known) fprintf(f, "%s_bytes = %lld\n%s_fnv1a = %016" PRIx64 "\n", key, d->bytes, key, d->fnv1a);
}

void data_record_command(const DataRecord *r, const char *out_dir, char *buf, size_t n) {
    buf[0] = 0;
    if (!r->has_recipe) return;
    char frac[40];
    format_double(frac, sizeof frac, r->val_fraction);
    size_t len = (size_t)snprintf(buf, n, "./prepare");
    if (r->tokenizer_from.known) len += (size_t)snprintf(buf + len, len < n ? n - len : 0, " --tokenizer %s",
                                                         r->tokenizer_from.path);
    else len += (size_t)snprintf(buf + len, len < n ? n - len : 0, " --vocab-size %d --pretokenizer %s",
                                 r->vocab_size, r->pretokenizer);
    len += (size_t)snprintf(buf + len, len < n ? n - len : 0, " --val-fraction %s --split %s", frac, r->split);
    if (r->doc_sep[0]) len += (size_t)snprintf(buf + len, len < n ? n - len : 0, " --doc-sep '%s'", r->doc_sep);
    len += (size_t)snprintf(buf + len, len < n ? n - len : 0, " --out-dir %s", out_dir);
    for (int i = 0; i < r->n_inputs; i++)
        len += (size_t)snprintf(buf + len, len < n ? n - len : 0, " %s", r->inputs[i].path);
}

int data_record_write(const DataRecord *r, const char *path, AtomicMode mode, char *err, size_t errlen) {
    AtomicFile af;
    FILE *f = atomic_open(&af, path, mode, err, errlen);
    if (!f) return -1;
    fprintf(f, "; ropelab data record (docs/DATA.md, \"Data records\"): the files of a corpus and the recipe\n"
               "; that makes them; checksums are the 64-bit FNV-1a of each file's bytes.\n");
    if (r->has_recipe) {
        char dir[DATA_PATH_MAX], cmd[4 * DATA_PATH_MAX];
        snprintf(dir, sizeof dir, "%s", r->files[DATA_TRAIN].path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, sizeof dir, ".");
        data_record_command(r, dir, cmd, sizeof cmd);
        fprintf(f, "; made by: %s\n", cmd);
    } else {
        fprintf(f, "; recipe: unknown (the files' directory holds no data record of these files)\n");
    }
    fprintf(f, "\n[files]\n");
    for (int i = 0; i < DATA_N_FILES; i++) write_file(f, DATA_FILE_KEYS[i], &r->files[i]);
    if (r->has_recipe) {
        char frac[40];
        format_double(frac, sizeof frac, r->val_fraction);
        fprintf(f, "\n[recipe]\n");
        if (r->tokenizer_from.known) write_file(f, "tokenizer", &r->tokenizer_from);
        else fprintf(f, "vocab_size = %d\npretokenizer = %s\n", r->vocab_size, r->pretokenizer);
        fprintf(f, "val_fraction = %s\nsplit = %s\n", frac, r->split);
        if (r->doc_sep[0]) fprintf(f, "doc_sep = %s\n", r->doc_sep);
        for (int i = 0; i < r->n_inputs; i++) write_file(f, "input", &r->inputs[i]);
    }
    return atomic_commit(&af, !ferror(f), err, errlen);
}

// ---- comparing -------------------------------------------------------------

static int same_file(const DataFile *a, const DataFile *b) {
    return a->known == b->known && (!a->known || (a->bytes == b->bytes && a->fnv1a == b->fnv1a));
}

// The same input text: the same checksum where both record one, else the same path.
static int same_input(const DataFile *a, const DataFile *b) {
    return a->known && b->known ? same_file(a, b) : strcmp(a->path, b->path) == 0;
}

int data_record_same_recipe(const DataRecord *a, const DataRecord *b) {
    if (!a->has_recipe || !b->has_recipe || a->n_inputs != b->n_inputs) return 0;
    if (a->vocab_size != b->vocab_size || a->val_fraction != b->val_fraction || strcmp(a->split, b->split) ||
        strcmp(a->doc_sep, b->doc_sep) || strcmp(a->pretokenizer, b->pretokenizer) ||
        !same_file(&a->tokenizer_from, &b->tokenizer_from))
        return 0;
    for (int i = 0; i < a->n_inputs; i++)
        if (!same_input(&a->inputs[i], &b->inputs[i])) return 0;
    return 1;
}

int data_record_first_difference(const DataRecord *a, const DataRecord *b) {
    for (int i = 0; i < DATA_N_FILES; i++)
        if (!same_file(&a->files[i], &b->files[i])) return i;
    return -1;
}
