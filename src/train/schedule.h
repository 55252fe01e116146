// schedule.h: the learning-rate schedule, linear warmup then cosine decay.
//
// For update s = 0 .. steps-1 (0-based):
//   s <  warmup:  lr * (s + 1) / warmup
//   s >= warmup:  min_lr + (lr - min_lr) * (1 + cos(pi * (s - warmup) / (steps - warmup))) / 2
// so the first update after warmup uses lr and the decay would reach min_lr
// one step after the last update (the llm.c / nanoGPT convention).
#ifndef ROPELAB_TRAIN_SCHEDULE_H
#define ROPELAB_TRAIN_SCHEDULE_H

typedef struct {
    float lr, min_lr;
    int warmup_steps, steps;
} LrSchedule;

float lr_at_step(const LrSchedule *sched, int step);

#endif
