// cli.h: the one command-line layer of the programs (./train, ./prepare,
// ./eval, ./sample, ./export): the start of main, the command line read
// against the program's table of flags (common/opt.h), --help printed from
// it, the check of an output file named on the command line, and the size
// of every message buffer.
//
// A program's flags are a table of OptSpec (name, type, default, range,
// help, where the value goes). cli_parse reads argv against it:
//   --flag VALUE, --flag=VALUE   a flag that takes a value (VALUE may start with '-'; one that
//                                starts with "--" only as --flag=VALUE: "--init-from --steps=1" is
//                                a forgotten value, refused)
//   --flag                       an OPT_FLAG
//   --help, -h                   the help, printed from the table
//   --                           every later argument is positional
// and refuses in one line (exit status 2): a value of the wrong form or out
// of range, "PROG: --flag: problem" (opt_parse: numbers whole, by
// numtext.h's rule), an unknown option, "PROG: unknown option '--foo' (see
// ./PROG --help)", a flag without its value or one given a value it does not
// take, a required flag not given. Names are matched whole (no
// abbreviations). A flag given twice takes its last value. (./train prints
// these lines without "train: ", as every message of ./train: "WHERE: problem".)
#ifndef ROPELAB_COMMON_CLI_H
#define ROPELAB_COMMON_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "common/opt.h"

// The size of every buffer that holds a message of the programs (and of
// the command-line layer): room for a path of PATH_MAX (4096) bytes and a
// sentence about it. A longer message is cut, never overflows.
#define ERR_MAX 5120

typedef struct {
    const char *prog;            // "eval": the prefix of its lines, and "./eval --help"
    const char *usage;           // --help's first lines ("usage: ./eval --weights FILE --data FILE [options]\n")
    const OptSpec *opts;         // the flags
    int n_opts;
    int positional;              // 1: arguments that are not options are the program's (files, a config)
    int keys;                    // 1: --NAME=VALUE (and --NAME) outside the table are the program's (./train's keys)
    const char *about;           // --help's text after the flags, or NULL
    void (*help_more)(FILE *f);  // --help's last lines (the model's length keys), or NULL
} CliSpec;

// A CliSpec's flags from an array of OptSpec: `CLI_FLAGS(flags)` sets .opts and .n_opts.
#define CLI_FLAGS(table) .opts = (table), .n_opts = (int)(sizeof(table) / sizeof((table)[0]))

// The first thing every main does. SIGXFSZ is ignored: a write past the
// file-size limit (ulimit -f) then fails with EFBIG, as a write to a full
// disk fails with ENOSPC, so the writer removes its temporary and says so in
// one line; by default the signal kills the program and leaves the
// temporary (PATH.tmp.XXXXXX) behind.
void cli_start(void);

enum { CLI_HELP = 1 };

// Reads argv[1 .. argc-1] against spec into dst (each value at its flag's
// offset), after setting every flag that has a default to it; argv is not
// changed. The arguments the program takes itself (spec->positional,
// spec->keys) go to rest[0 .. *n_rest-1] in their order (rest: room for
// argc pointers; NULL when the spec takes none). 0; CLI_HELP at --help or
// -h (nothing after it is read); or -1 with one line in err:
// "--flag: problem", "unknown option '--foo' (see ./PROG --help)".
int cli_parse(const CliSpec *spec, int argc, char **argv, void *dst, const char **rest, int *n_rest, char *err,
              size_t errlen);

// cli_parse for a main: the help printed on stdout (exit 0), or the error
// as "PROG: problem" on stderr (exit 2).
void cli_parse_or_exit(const CliSpec *spec, int argc, char **argv, void *dst, const char **rest, int *n_rest);

// --help: spec->usage, one entry per flag (its value's name, help text,
// default, range or choices), --help itself, spec->about, spec->help_more.
void cli_print_help(const CliSpec *spec, FILE *f);
// The flags' entries alone, for a program that prints the rest of its help
// itself (./train: the keys after them).
void cli_print_flags(const CliSpec *spec, FILE *f);
// One entry of a help: head ("  --seq-len N") padded to column col, then
// text cut into lines of at most 100 columns, the later ones indented to col.
void cli_print_entry(FILE *f, const char *head, const char *text, int col);

// Whether a program may write its output file PATH: never onto one of its
// inputs (compared as files, by device and inode, so another spelling of
// the path or a link is caught), not even with --overwrite; then the rules of
// atomic_check_target (common/atomic_file.h): an existing PATH only with
// overwrite, and only if it is a regular file. inputs may hold NULLs
// (inputs not given). 0, or -1 with "PATH: problem". Called before the
// program's work, so that a refusal comes first.
int cli_check_output(const char *path, int overwrite, const char *const *inputs, int n_inputs,
                     char *err, size_t errlen);

#endif
