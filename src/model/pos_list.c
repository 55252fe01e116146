// pos_list.c: the scheme and its exports for a PosKind, from the one list of
// schemes (config.h's POS_SCHEME_LIST): each scheme's file defines its
// pos_scheme_NAME and pos_exports_NAME (pos.h), so a scheme added to the list
// without them does not link.
#include "model/pos.h"

#define POS_SCHEME_ENTRY_(E, name) [POS_##E] = &pos_scheme_##name,
static const PosScheme *const SCHEMES[POS_COUNT] = {POS_SCHEME_LIST(POS_SCHEME_ENTRY_)};

const PosScheme *pos_scheme(PosKind kind) {
    return (kind >= 0 && kind < POS_COUNT) ? SCHEMES[kind] : NULL;
}

#define POS_EXPORTS_ENTRY_(E, name) [POS_##E] = &pos_exports_##name,
static const PosExports *const EXPORTS[POS_COUNT] = {POS_SCHEME_LIST(POS_EXPORTS_ENTRY_)};

const PosExports *pos_exports(PosKind kind) {
    return (kind >= 0 && kind < POS_COUNT) ? EXPORTS[kind] : NULL;
}
