// meter.h: the one progress line of the programs' long work on stderr:
// ./eval's batches, ./sample's prompt and generated tokens, ./export's
// table and file, ./prepare's merges and encoding (a count: meter_update),
// and ./train's steps (a line of its own words: meter_text, runlog.c).
#ifndef ROPELAB_COMMON_METER_H
#define ROPELAB_COMMON_METER_H

#include <stddef.h>

// On a terminal one line rewritten with \r at most 4 times a second, erased
// by meter_clear (or kept by meter_keep) before any other output; otherwise
// whole lines: a count once the work has run 2 s, then every 10 s (so a
// short run writes nothing; on a terminal, at most a line that is erased
// again), a text line when the caller marks it.
typedef struct {
    const char *prog;           // the line's prefix: "eval", "sample"; NULL: none (./train's line)
    int on;                     // lines wanted in this phase
    int growing;                // each unit costs more than the last (see meter_phase)
    int tty;                    // stderr is a terminal
    int line_open;              // a \r line is on screen
    double start, last;         // clock_seconds(): the work's start, the last line shown
    double phase_start;         // clock_seconds() at the phase's start; the times below are since then
    long long prev_n, mid_n, mark_n;   // units done at the previous line and at the ETA fit's points
    double prev_t, mid_t, mark_t;
} Meter;

// Whether stderr goes where stdout goes (the same terminal, pipe or file):
// there a progress line would land inside the program's text.
int meter_stderr_is_stdout(void);
// prog: the prefix of the lines ("eval: ..."), or NULL for none.
void meter_start(Meter *m, const char *prog);
// A new count with its own rate and ETA (reading the prompt, then
// generating). on = 0: no lines in it. growing = 1: unit i costs a + b i, as
// a decode step attending to every earlier position does, and the ETA
// extrapolates that (a constant rate would promise far too early an end);
// growing = 0: every unit costs the same.
void meter_phase(Meter *m, int on, int growing);
// "PROG: LABEL DONE/TOTAL UNIT, RATE UNIT/s, ETA T" if a line is due now
// (RATE: since the previous line).
void meter_update(Meter *m, const char *label, long long done, long long total, const char *unit);
// A line of the caller's own words (./train's "step 120/600 | loss 3.4521 |
// ... | ETA 1m32s"), in a phase that is on: on a terminal the \r line, at
// most 4 times a second but always when mark; elsewhere a whole line only
// when mark (./train marks its evaluations).
void meter_text(Meter *m, int mark, const char *text);
// Erases the \r line (if any): call before writing anything else.
void meter_clear(Meter *m);
// Ends the \r line (if any) with a newline instead, leaving it on screen.
void meter_keep(Meter *m);
// Seconds as a duration: 52 -> "52s", 200 -> "3m20s", 11700 -> "3h15m"; "?" if unknown.
void meter_format_eta(char *buf, size_t n, double seconds);

#endif
