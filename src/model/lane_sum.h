// lane_sum.h: float sums whose rounding is the same on every x86-64 CPU.
//
// Why: a float sum's rounding depends on the order of its additions. An
// `omp simd reduction(+ : s)` lets the compiler keep one partial sum per
// vector lane, so the order follows the machine's vector width: 4 lanes
// with SSE, 8 with AVX2, 16 with AVX-512 (and -march=native picks the
// width of the CPU the program is built on). A log written on one CPU then
// differs from the same run's log on another in the last bits, and training
// amplifies that within a few dozen steps.
//
// LANE_SUM fixes the order in the source instead: term i is added into lane
// i % SUM_LANES, lanes in index order, and the 16 lanes are added in one
// fixed tree (lane_total). The inner loop over the 16 lanes is independent
// element-wise work that any vector width computes with the same bits: two
// AVX2 registers, one AVX-512 register or four SSE ones. The Makefile adds
// -ffp-contract=off, so no build fuses a multiply and an add into an FMA on
// its own.
//
//   float s;
//   LANE_SUM(s, c, C, x[c] * x[c]);   // s = sum over c = 0..C-1 of x[c]^2
#ifndef ROPELAB_LANE_SUM_H
#define ROPELAB_LANE_SUM_H

#define SUM_LANES 16

// (l0 + l8) + (l4 + l12) ... : halves added pairwise, 16 -> 8 -> 4 -> 2 -> 1.
static inline float lane_total(const float lane[SUM_LANES]) {
    float t[SUM_LANES / 2];
    for (int l = 0; l < 8; l++) t[l] = lane[l] + lane[l + 8];
    for (int l = 0; l < 4; l++) t[l] = t[l] + t[l + 4];
    for (int l = 0; l < 2; l++) t[l] = t[l] + t[l + 2];
    return t[0] + t[1];
}

// sum = the sum over INDEX = 0..n-1 of TERM (an expression of INDEX, an int
// declared here), in SUM_LANES lanes: whole blocks of 16 first, then the
// remaining n % 16 terms into lanes 0.. in order.
#define LANE_SUM(sum, INDEX, n, TERM)                                                \
    do {                                                                             \
        float lane_[SUM_LANES] = {0};                                                \
        int base_ = 0;                                                               \
        for (; base_ + SUM_LANES <= (n); base_ += SUM_LANES)                         \
            for (int l_ = 0; l_ < SUM_LANES; l_++) {                                 \
                int INDEX = base_ + l_;                                              \
                lane_[l_] += (TERM);                                                 \
            }                                                                        \
        for (int l_ = 0; base_ + l_ < (n); l_++) {                                   \
            int INDEX = base_ + l_;                                                  \
            lane_[l_] += (TERM);                                                     \
        }                                                                            \
        (sum) = lane_total(lane_);                                                   \
    } while (0)

#endif
