// pos_none.c: NoPE, no positional information besides the causal mask.
// The scheme with no hooks: everything it would do is the default.
#include "model/pos.h"

const PosScheme pos_scheme_none = {
    .kind = POS_NONE,
};
