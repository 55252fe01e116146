// pretokenize.c: the two pre-split rules (pretokenize.h). A piece is what
// BPE works on alone: a merge never joins the bytes of two pieces.
#include "data/pretokenize.h"

#include <string.h>

#include "data/unicode_classes.h"

static const char *const NAMES[] = {[BPE_PRETOK_BYTE_CLASSES] = "byte-classes", [BPE_PRETOK_GPT2] = "gpt2"};

const char *pretok_name(BpePretok rule) {
    return (unsigned)rule < sizeof NAMES / sizeof NAMES[0] ? NAMES[rule] : "?";
}

int pretok_from_name(const char *name, BpePretok *rule) {
    for (unsigned r = 0; r < sizeof NAMES / sizeof NAMES[0]; r++)
        if (strcmp(name, NAMES[r]) == 0) { *rule = (BpePretok)r; return 0; }
    return -1;
}

// ---------------------------------------------------------------- byte classes
//
// Every byte has a class: space (' ', \t, \n, \v, \f, \r), letter (A-Z, a-z and
// every byte >= 0x80, so a UTF-8 sequence stays inside its word), digit (0-9),
// or other (punctuation, control bytes, NUL). The text is cut into pieces:
//   - an optional single ' ' followed by a run of letters,   " Lord"
//   - an optional single ' ' followed by a run of digits,    " 1189"
//   - an optional single ' ' followed by a run of others,    " ("  ".\n" is two)
//   - a run of whitespace; if it is followed by a non-space and ends in ' ',
//     that last ' ' is left to start the next piece:  "\n  1 In" ->
//     "\n ", " 1", " In".
// A run longer than BPE_MAX_PIECE (256) bytes is cut every 256 bytes, which
// bounds the cost of encoding one piece on pathological input.

enum { CLS_SPACE, CLS_LETTER, CLS_DIGIT, CLS_OTHER };

static inline int byte_class(uint8_t c) {
    if (c == ' ' || (c >= '\t' && c <= '\r')) return CLS_SPACE;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CLS_LETTER;
    if (c >= '0' && c <= '9') return CLS_DIGIT;
    return CLS_OTHER;
}

static size_t byte_classes_piece_end(const uint8_t *s, size_t n, size_t i) {
    size_t limit = n - i > BPE_MAX_PIECE ? i + BPE_MAX_PIECE : n;
    size_t j = i;
    if (s[j] == ' ' && j + 1 < limit && byte_class(s[j + 1]) != CLS_SPACE) j++;  // leading ' '
    int c = byte_class(s[j]);
    while (j < limit && byte_class(s[j]) == c) j++;
    // A whitespace run gives its last ' ' to the word that follows it.
    if (c == CLS_SPACE && j < n && j - 1 > i && s[j - 1] == ' ' && byte_class(s[j]) != CLS_SPACE) j--;
    return j;
}

// ---------------------------------------------------------------- GPT-2's regex
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// A regex engine tries the alternatives in order at the start of the rest of
// the text and takes the first that matches, each run as long as it goes
// (greedy); the piece is the match. Here the same, alternative by alternative,
// on code points with the classes of unicode_classes.h:
//   1. an apostrophe (U+0027 only) and s, t, m or d, or re, ve or ll, in lower
//      case: "LORD's" is "LORD" "'s", "cam'st" "cam" "'s" "t", "DON'T" "DON" "'" "T";
//   2-4. an optional ' ' (U+0020 only) and a run of letters, of numbers, or of
//      others: " Lord", " 1189", " (", "x²" is "x" "²" (a number), "é" written
//      e + U+0301 is "e" "\u0301" (a mark, other), " 👋🏽!" one piece of others;
//   5. \s+(?!\S): white space not followed by a non-space. The run of white
//      space is greedy and then backs off until what follows is not a
//      non-space: at the end of the text the whole run, and before a non-space
//      the run without its last code point, which starts the next piece (when
//      that is ' ', the word after it takes it: "a  b" is "a" " " " b"; when
//      it is not, alternative 6 makes it a piece alone: ".\n\nExodus" is "."
//      "\n" "\n" "Exodus");
//   6. \s+: a single white space before a non-space ("\n" before "Exodus").
// Nothing else is left: every code point is of one of the four classes.
//
// Bytes that are not UTF-8. The regex is defined on code points; llama.cpp
// reads bytes as code points by unicode_cpts_from_utf8, and the pieces here
// are the pieces of the code points it reads, which decode() reproduces:
// a lead byte followed by all its continuation bytes is the code point their
// bits make, without strict UTF-8's checks (an overlong form such as C1 A1
// reads as 'a', a surrogate or a number up to 0x1FFFFF passes); any other
// byte (80..BF or F8..FF as a lead, a lead byte without all its continuation
// bytes) reads as one code point U+FFFD, a symbol, so it is "other". Unlike
// llama.cpp, which then encodes U+FFFD's three bytes (EF BF BD) in place of
// such a byte, the piece keeps the text's own bytes: encoding stays lossless
// (decode(encode(text)) == text for every byte string).

#define UC_END 4   // the class past the end of the text

typedef struct { uint32_t cp; int cls; size_t len; } CodePoint;

static CodePoint decode(const uint8_t *s, size_t n, size_t i) {
    if (i >= n) return (CodePoint){UINT32_MAX, UC_END, 0};
    uint8_t c = s[i];
    if (c < 0x80) return (CodePoint){c, unicode_ascii_class[c], 1};
    // the bytes the lead byte announces: 110xxxxx 1, 1110xxxx 2, 11110xxx 3
    size_t extra = c >= 0xC0 && c < 0xE0 ? 1 : c >= 0xE0 && c < 0xF0 ? 2 : c >= 0xF0 && c < 0xF8 ? 3 : 0;
    uint32_t cp = c & (0x3F >> extra);
    int ok = extra > 0 && extra < n - i;
    for (size_t k = 1; ok && k <= extra; k++) {
        ok = (s[i + k] & 0xC0) == 0x80;
        cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if (!ok) return (CodePoint){0xFFFD, UC_OTHER, 1};
    return (CodePoint){cp, unicode_class(cp), extra + 1};
}

// The end of the piece at s[i]; *white: whether it is white space (5-6).
static size_t gpt2_piece_end(const uint8_t *s, size_t n, size_t i, int *white) {
    CodePoint c = decode(s, n, i);
    *white = 0;
    // 1. 's|'t|'re|'ve|'m|'ll|'d
    if (c.cp == '\'') {
        CodePoint c1 = decode(s, n, i + 1);
        if (c1.cp == 's' || c1.cp == 't' || c1.cp == 'm' || c1.cp == 'd') return i + 1 + c1.len;
        CodePoint c2 = decode(s, n, i + 1 + c1.len);
        if ((c1.cp == 'r' && c2.cp == 'e') || (c1.cp == 'v' && c2.cp == 'e') || (c1.cp == 'l' && c2.cp == 'l'))
            return i + 1 + c1.len + c2.len;
    }
    // 2-4. ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': the optional ' ' is taken when
    // a letter, number or other follows it
    size_t j = i;
    int run = c.cls;
    if (c.cp == ' ') {
        CodePoint next = decode(s, n, i + c.len);
        if (next.cls != UC_SPACE && next.cls != UC_END) { j += c.len; run = next.cls; }
    }
    if (run != UC_SPACE) {
        for (CodePoint d = decode(s, n, j); d.cls == run; d = decode(s, n, j)) j += d.len;
        return j;
    }
    // 5-6. '\s+(?!\S)|\s+': the run of white space, less its last code point when a non-space follows
    *white = 1;
    size_t last = i;
    int count = 0;
    for (CodePoint d = decode(s, n, j); d.cls == UC_SPACE; d = decode(s, n, j)) {
        last = j;
        j += d.len;
        count++;
    }
    return count > 1 && j < n ? last : j;
}

// ---------------------------------------------------------------- either

size_t pretok_piece_end(BpePretok rule, const uint8_t *text, size_t n, size_t i) {
    int white;
    return rule == BPE_PRETOK_GPT2 ? gpt2_piece_end(text, n, i, &white) : byte_classes_piece_end(text, n, i);
}

// Where a text may be cut. No alternative of either rule looks behind its
// start, so the pieces after a cut are the whole text's. Before it, each
// piece but the last was decided by bytes before the cut. The last: a
// byte-class piece looks one byte past its end, a letter, number or other
// run of GPT-2's one code point, and at the end of a part these see the
// same as in the whole (a run ends either way; a ' ' takes no word). But a
// white-space piece of GPT-2's depends on the run it is in: "\n\nExodus" is
// "\n" "\n" "Exodus", and cut after its second "\n", "\n\n" is one piece. So
// GPT-2's rule is cut only after a piece that is not white space.
size_t pretok_chunk_end(BpePretok rule, const uint8_t *text, size_t n, size_t start, size_t min_len) {
    size_t end = start;
    while (end < n) {
        int white = 0;
        end = rule == BPE_PRETOK_GPT2 ? gpt2_piece_end(text, n, end, &white) : byte_classes_piece_end(text, n, end);
        if (end - start >= min_len && !white) break;
    }
    return end;
}
