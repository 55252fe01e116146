// cli.c: the programs' start, their command line read against a table,
// --help, output checks (see cli.h).
#include "common/cli.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/fs.h"

void cli_start(void) {
    signal(SIGXFSZ, SIG_IGN);
}

// The flag of spec named by the len characters at name, or NULL.
static const OptSpec *find_flag(const CliSpec *spec, const char *name, size_t len) {
    for (int i = 0; i < spec->n_opts; i++)
        if (strlen(spec->opts[i].name) == len && strncmp(spec->opts[i].name, name, len) == 0) return &spec->opts[i];
    return NULL;
}

int cli_parse(const CliSpec *spec, int argc, char **argv, void *dst, const char **rest, int *n_rest, char *err,
              size_t errlen) {
    char msg[ERR_MAX];
    if (n_rest) *n_rest = 0;
    for (int i = 0; i < spec->n_opts; i++) {   // the defaults, read as any value
        const OptSpec *o = &spec->opts[i];
        if (o->def && opt_parse(o, o->def, (char *)dst + o->offset, msg, sizeof msg) != 0) {
            fprintf(stderr, "internal error: %s: bad default of --%s: %s\n", spec->prog, o->name, msg);
            abort();
        }
    }
    int options_end = 0;   // after "--", every argument is positional
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options_end || a[0] != '-' || a[1] == 0) {   // positional ("-" alone too: it names stdin)
            if (!spec->positional) {
                snprintf(err, errlen, "unexpected argument '%s' (see ./%s --help)", a, spec->prog);
                return -1;
            }
            rest[(*n_rest)++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) { options_end = 1; continue; }
        if (strcmp(a, "-h") == 0) return CLI_HELP;
        if (a[1] != '-') {   // -h is the one short option
            snprintf(err, errlen, "unknown option '%s' (see ./%s --help)", a, spec->prog);
            return -1;
        }
        // --NAME or --NAME=VALUE
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const OptSpec *o = find_flag(spec, name, len);
        int is_help = len == 4 && strncmp(name, "help", 4) == 0;
        if (!o && !is_help && spec->keys) {   // the program's --NAME=VALUE
            rest[(*n_rest)++] = a;
            continue;
        }
        if (!o && !is_help) {
            snprintf(err, errlen, "unknown option '--%.*s' (see ./%s --help)", (int)len, name, spec->prog);
            return -1;
        }
        if ((is_help || o->type == OPT_FLAG) && eq) {
            snprintf(err, errlen, "option '--%.*s' takes no value (see ./%s --help)", (int)len, name, spec->prog);
            return -1;
        }
        if (is_help) return CLI_HELP;
        const char *value = "";
        if (o->type != OPT_FLAG) {   // --flag=VALUE, or the next argument whatever it is
            value = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!value) {
                snprintf(err, errlen, "option '--%s' needs a value (see ./%s --help)", o->name, spec->prog);
                return -1;
            }
            // "--init-from --steps=1": the next argument is an option, so the value was forgotten
            // (a value starting with "--" is given as --flag=VALUE)
            if (!eq && strncmp(value, "--", 2) == 0) {
                snprintf(err, errlen, "option '--%s' needs a value, and '%s' is an option (a value that starts "
                         "with -- is given as --%s=VALUE)", o->name, value, o->name);
                return -1;
            }
        }
        if (opt_parse(o, value, (char *)dst + o->offset, msg, sizeof msg) != 0) {
            snprintf(err, errlen, "--%s: %s", o->name, msg);
            return -1;
        }
    }
    for (int i = 0; i < spec->n_opts; i++) {
        const OptSpec *o = &spec->opts[i];
        if (o->required && *(const char **)((char *)dst + o->offset) == NULL) {
            snprintf(err, errlen, "--%s: required, not given (see ./%s --help)", o->name, spec->prog);
            return -1;
        }
    }
    return 0;
}

void cli_parse_or_exit(const CliSpec *spec, int argc, char **argv, void *dst, const char **rest, int *n_rest) {
    char err[ERR_MAX];
    int rc = cli_parse(spec, argc, argv, dst, rest, n_rest, err, sizeof err);
    if (rc == CLI_HELP) {
        cli_print_help(spec, stdout);
        exit(0);
    }
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", spec->prog, err);
        exit(2);
    }
}

// text from column col (the cursor is there), cut at spaces into lines of
// at most width columns (a longer word stands alone), the later lines
// indented to col.
static void print_wrapped(FILE *f, const char *text, int col, int width) {
    int pos = col, line_empty = 1;
    for (const char *p = text; *p;) {
        int w = (int)strcspn(p, " ");
        if (!line_empty && pos + 1 + w > width) {
            fprintf(f, "\n%*s", col, "");
            pos = col;
            line_empty = 1;
        }
        if (!line_empty) { fputc(' ', f); pos++; }
        fwrite(p, 1, (size_t)w, f);
        pos += w;
        line_empty = 0;
        p += w;
        while (*p == ' ') p++;
    }
    fputc('\n', f);
}

enum { HELP_WIDTH = 100 };

void cli_print_entry(FILE *f, const char *head, const char *text, int col) {
    fprintf(f, "%-*s", col, head);
    print_wrapped(f, text, (int)strlen(head) > col ? (int)strlen(head) : col, HELP_WIDTH);
}

void cli_print_flags(const CliSpec *spec, FILE *f) {
    int col = (int)strlen("  --help");
    for (int i = 0; i < spec->n_opts; i++) {
        const OptSpec *o = &spec->opts[i];
        int w = 4 + (int)strlen(o->name) + (o->arg ? 1 + (int)strlen(o->arg) : 0);
        if (w > col) col = w;
    }
    col += 2;
    for (int i = 0; i <= spec->n_opts; i++) {
        const OptSpec *o = i < spec->n_opts ? &spec->opts[i] : NULL;
        char head[128], text[2048], range[160] = "", def[OPT_STR_MAX + 16] = "";
        if (!o) {
            snprintf(head, sizeof head, "  --help");
            snprintf(text, sizeof text, "this text");
        } else {
            snprintf(head, sizeof head, "  --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
            if (o->def && o->def[0]) snprintf(def, sizeof def, " (default %s)", o->def);
            opt_doc_range(o, range, sizeof range);
            snprintf(text, sizeof text, "%s%s%s", o->help, def, range);
        }
        cli_print_entry(f, head, text, col);
    }
}

void cli_print_help(const CliSpec *spec, FILE *f) {
    fputs(spec->usage, f);
    cli_print_flags(spec, f);
    if (spec->about) fputs(spec->about, f);
    if (spec->help_more) spec->help_more(f);
}

int cli_check_output(const char *path, int overwrite, const char *const *inputs, int n_inputs,
                     char *err, size_t errlen) {
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && fs_same_file(path, inputs[i])) {
            snprintf(err, errlen, "%s: the same file as the input %s; an output is never written onto an input", path,
                     inputs[i]);
            return -1;
        }
    return atomic_check_target(path, overwrite ? ATOMIC_REPLACE : ATOMIC_NEW, err, errlen);
}
