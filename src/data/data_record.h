// data_record.h: what data a run trained on, and how ./prepare makes it.
//
// A data record (DIR/data.txt) names the three files of a corpus, the
// tokenizer and the two token files, each with its size and checksum, and
// the recipe that made them: ./prepare's options and its input texts, each
// with its size and checksum. ./prepare writes one beside the files it makes
// (OUT/data.txt); ./train writes one into every new run directory
// (RUN/data.txt: the files it trains on, and the recipe of their directory's
// record where that record is of these very files); the committed studies
// keep theirs (docs/results/STUDY/data.txt). `./prepare --record FILE`
// makes a record's data again from its recipe and checks it against the
// checksums (cli/prepare_main.c); make reproduce, make compare and make run
// go through it (scripts/run/data_dir.sh), so a run is never re-trained on
// data that only has the same name.
//
// The checksum of a file is the 64-bit FNV-1a of its bytes (data_file_hash):
// for tokenizer.bin that is bpe_checksum, the tokenizer_checksum a model
// records. The file is text, "key = value" under [files] and [recipe]:
//
//   [files]
//   tokenizer = data/gcide/tokenizer.bin
//   tokenizer_bytes = 16420
//   tokenizer_fnv1a = 1f0e3b5c9a7d2e41       (16 hex digits)
//   train = ... train_bytes, train_fnv1a; val = ... val_bytes, val_fnv1a
//   [recipe]                                  (absent: the data's making is unknown)
//   vocab_size = 2048
//   val_fraction = 0.05
//   split = tail                              (tail | docs)
//   doc_sep = \n\n                            (only with --doc-sep; escaped as given)
//   pretokenizer = byte-classes               (gpt2 | byte-classes; or, instead,
//   tokenizer = PATH, tokenizer_bytes, tokenizer_fnv1a: ./prepare --tokenizer PATH;
//   for a directory, of the files read from it, in order: data_files_record)
//   input = data/gcide.txt                    (one block per input text, in order)
//   input_bytes = 29283954
//   input_fnv1a = ...
//
// A record without checksums (in [files], and input_bytes and input_fnv1a
// in [recipe]) is a recipe alone, such as configs/data/kjv.txt, make run's:
// its files are whatever the recipe makes of whatever text is at its inputs.
#ifndef ROPELAB_DATA_DATA_RECORD_H
#define ROPELAB_DATA_DATA_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/atomic_file.h"

// Bounds on what is read from a record, before anything is sized from it.
#define DATA_RECORD_MAX_BYTES (1 << 20)
#define DATA_RECORD_MAX_INPUTS 4096
#define DATA_PATH_MAX 4096   // PATH_MAX

typedef struct {
    char path[DATA_PATH_MAX];
    long long bytes;   // -1: not recorded
    uint64_t fnv1a;
    int known;         // 1: bytes and fnv1a are recorded
} DataFile;

// The three files of a corpus, in this order everywhere (DATA_FILE_NAMES).
enum { DATA_TOKENIZER, DATA_TRAIN, DATA_VAL, DATA_N_FILES };
extern const char *const DATA_FILE_KEYS[DATA_N_FILES];    // "tokenizer", "train", "val"
extern const char *const DATA_FILE_NAMES[DATA_N_FILES];   // "tokenizer.bin", "train.bin", "val.bin"

typedef struct {
    DataFile files[DATA_N_FILES];
    int has_recipe;
    int vocab_size;
    double val_fraction;
    char split[8];                 // "tail" | "docs"
    char doc_sep[64];              // escaped as --doc-sep takes it; "" = none
    char pretokenizer[16];         // "gpt2" | "byte-classes"; "" when tokenizer_from is used
    DataFile tokenizer_from;       // --tokenizer PATH (known = 1), else path ""
    int n_inputs;
    DataFile *inputs;              // n_inputs, owned
} DataRecord;

// The checksum and size of a file (a regular file, opened without following a
// FIFO or waiting on one): 0, or -1 with "path: problem".
int data_file_hash(const char *path, long long *bytes, uint64_t *fnv1a, char *err, size_t errlen);
// Fills f (path, bytes, fnv1a, known = 1) from the file at path.
int data_file_record(DataFile *f, const char *path, char *err, size_t errlen);
// The same for an input of several files (a tokenizer directory's, GPT-2's
// encoder.json then vocab.bpe) under the name path: the bytes of files[0..n)
// one after the other, as if one file (their sizes summed, FNV-1a over
// their concatenation); of one file, exactly data_file_record's.
int data_files_record(DataFile *f, const char *path, const char *const *files, int n, char *err, size_t errlen);

void data_record_free(DataRecord *r);
// Reads a record (bounded: at most DATA_RECORD_MAX_BYTES and DATA_RECORD_MAX_INPUTS
// inputs; every key known, every number by numtext.h's rule). 0, or -1 with
// "path:line: problem".
int data_record_read(DataRecord *r, const char *path, char *err, size_t errlen);
// Writes it atomically (atomic_file.h). 0, or -1 with a message.
int data_record_write(const DataRecord *r, const char *path, AtomicMode mode, char *err, size_t errlen);
// The recipe as the ./prepare command that runs it, into OUT_DIR ("" if none).
void data_record_command(const DataRecord *r, const char *out_dir, char *buf, size_t n);
// Whether two recipes are the same: the same options, and the same input
// texts (by checksum where both record one, else by path).
int data_record_same_recipe(const DataRecord *a, const DataRecord *b);
// The first of the three files whose checksum differs between a and b (both
// known), or -1 when all three agree.
int data_record_first_difference(const DataRecord *a, const DataRecord *b);

#endif
