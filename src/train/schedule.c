// schedule.c: linear warmup then cosine decay (see schedule.h for the formula).
#include "train/schedule.h"

#include <math.h>

float lr_at_step(const LrSchedule *sched, int step) {
    if (step < sched->warmup_steps)
        return sched->lr * (float)(step + 1) / (float)sched->warmup_steps;
    int decay_steps = sched->steps - sched->warmup_steps;
    if (decay_steps <= 0) return sched->lr;
    double progress = (double)(step - sched->warmup_steps) / decay_steps;
    if (progress > 1.0) progress = 1.0;
    double cosine = 0.5 * (1.0 + cos(M_PI * progress));   // 1 -> 0
    return (float)(sched->min_lr + (sched->lr - sched->min_lr) * cosine);
}
