// opt.h: the one form of an option table, and the one reader of a value by
// it.
//
// Every program describes what it takes in a table of OptSpec: the name,
// the type, the default (as text), the range or the choices, the help text
// and where the value goes (an offset in the struct the program fills).
// ./train's keys ([data], [optim], [run]: OPTION_TABLE in
// src/train/options.c) and every program's command-line flags (common/cli.h)
// are such tables, and opt_parse reads every value of them: numbers by
// numtext.h's strict rule (the whole string, JSON's grammar), range checked,
// with the same messages everywhere:
//   "'12abc' is not an integer"      "'nan' is not a number"
//   "0 is out of range [1, 1048576]" "'x' is not one of tail|docs"
// The caller names where the value came from ("--flag: ", "file:line: ").
#ifndef ROPELAB_COMMON_OPT_H
#define ROPELAB_COMMON_OPT_H

#include <stddef.h>
#include <stdio.h>

// The longest string value an OPT_STR field holds, its NUL included.
#define OPT_STR_MAX 512

typedef enum {
    OPT_INT,      // int, in [min, max]
    OPT_U64,      // uint64_t, any non-negative integer up to 2^64 - 1
    OPT_FLOAT,    // float, in [min, max] (or (min, max] with min_open)
    OPT_DOUBLE,   // double, likewise
    OPT_STR,      // a copy in a char array of OPT_STR_MAX (with choices: room for the longest choice)
    OPT_ARG,      // const char *: the argument itself (a path, a prompt), no copy
    OPT_FLAG,     // int set to 1; a command-line flag that takes no value
} OptType;

typedef struct {
    const char *name;      // "batch_size" (a key), "seq-len" (a flag: --seq-len)
    const char *section;   // a key's INI section ("optim"); NULL for a flag
    OptType type;
    const char *def;       // the default, as text, read like any value; NULL: none (the field keeps its value)
    size_t offset;         // where the value goes: its field's offset in the struct filled
    double min, max;       // numbers: the inclusive range; OPT_STR and OPT_ARG: min 1 = must not be
                           // empty, max > 0 = at most max characters (OPT_STR: always below OPT_STR_MAX)
    int fixed;             // a key that defines the data: it cannot change on ./train --resume
    const char *help;
    const char *choices;   // OPT_STR, OPT_ARG: the allowed values, "a|b|c" (NULL: any)
    int min_open;          // numbers: min itself is outside the range
    const char *arg;       // a flag's value in --help: "FILE", "N"
    int required;          // an OPT_ARG flag that must be given (cli_parse refuses a command line without it)
} OptSpec;

// text, whole, as a value of s into dst (the field itself, of s's type);
// dst is untouched on failure. 0, or -1 with the bare problem in msg.
int opt_parse(const OptSpec *s, const char *text, void *dst, char *msg, size_t n);

// The range or choices of s for --help: " [1..65536]", " (0..0.5]", " {fp32|bf16}", or "".
void opt_doc_range(const OptSpec *s, char *buf, size_t n);

#endif
