// run_dir.h: the run directory, the files ./train keeps in it and how it
// touches them.
//
//   config.ini               every key resolved (options.c writes it)
//   data.txt                 the data the run trains on and its recipe (data/data_record.h)
//   log.csv                  one row per step (runlog.h)
//   machine.txt              one block per start of ./train: CPU, kernels, build, engine
//   checkpoint.safetensors   weights, AdamW moments, step (checkpoint.h)
//   model.safetensors        the weights
//   train.lock               flock'ed while a ./train runs here; holds its pid
//
// Each is a regular file ./train wrote. A symbolic link, FIFO, device or
// directory planted under one of these names is refused before anything is
// read or written (run_dir_check_files), and the files are opened without
// following a link or waiting on a FIFO, so nothing outside the directory
// is ever written through it and no open hangs. Whole files are replaced
// atomically (atomic_file.h), so none is ever half-written.
#ifndef ROPELAB_TRAIN_RUN_DIR_H
#define ROPELAB_TRAIN_RUN_DIR_H

#include <stddef.h>

#include "data/data_record.h"

// Whether dir holds a run: train.lock, checkpoint.safetensors, or config.ini
// with log.csv; mark (n bytes) names what was found. An export, say, is never
// written into one.
int run_dir_holds_run(const char *dir, char *mark, size_t n);

// Every file of the list above that exists in dir is a regular file (lstat:
// not a link to one). 0, or -1 with "DIR/NAME: is a symbolic link ...".
int run_dir_check_files(const char *dir, char *err, size_t errlen);

// One ./train at a time: an exclusive flock on DIR/train.lock for the whole
// run (the kernel releases it when the process ends, however it ends). *fd
// gets the descriptor. 0, or -1 with a message (in use: the holder's pid).
int run_dir_lock(const char *dir, int *fd, char *err, size_t errlen);
// Writes this process's pid into the held lock file, for the message of a
// second ./train; only once the run is to train (a resume with nothing to do
// changes no file).
void run_dir_lock_note_pid(int fd);

// Removes the temporaries a killed writer left (NAME.tmp.XXXXXX of the files
// above); only with the lock held, when no other process writes them.
void run_dir_remove_temporaries(const char *dir);

// Appends to DIR/machine.txt (a fresh file when from_step is 0) the block
// "[from step N]", the machine (common/machine.h), then `extra` (the
// engine's lines), atomically. 0, or -1 with a message.
int run_dir_record_machine(const char *dir, int from_step, const char *extra, char *err, size_t errlen);

// The data record of the run's three files (the keys tokenizer, train_file,
// val_file), with their checksums, and the recipe of their directory's
// data.txt when that record is of these very files.
int run_dir_data_record(const char *tokenizer, const char *train_file, const char *val_file, DataRecord *r,
                        char *err, size_t errlen);

#endif
