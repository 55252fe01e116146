// pretokenize.h: the pre-tokenizers, the rules that cut a text into pieces
// before BPE (merges never cross a piece). A tokenizer file records the rule
// it was trained with (docs/FORMAT.md), and encoding follows it.
#ifndef ROPELAB_PRETOKENIZE_H
#define ROPELAB_PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    // ropelab's first rule: classes of bytes (ASCII, and every byte >= 0x80 a
    // letter), runs cut every 256 bytes. Every tokenizer file of version 1.
    BPE_PRETOK_BYTE_CLASSES = 0,
    // GPT-2's regular expression, exactly as llama.cpp's pre-tokenizer "gpt-2"
    // applies it:
    //   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    // on Unicode code points (unicode_classes.h); no length limit.
    BPE_PRETOK_GPT2 = 1,
} BpePretok;

#define BPE_PRETOK_DEFAULT BPE_PRETOK_GPT2   // what ./prepare trains with unless told

// The longest token in bytes: training counts pairs in pieces of at most
// this many bytes (a longer piece is counted in parts), so no merge it learns
// is longer; the byte-class rule cuts its pieces at this length.
#define BPE_MAX_PIECE 256

// The rule's name ("gpt2", "byte-classes": ./prepare --pretokenizer), and the
// rule of a name (0, or -1 for an unknown name).
const char *pretok_name(BpePretok rule);
int pretok_from_name(const char *name, BpePretok *rule);

// The end of the piece that starts at text[i], i < n: the piece is text[i..end).
size_t pretok_piece_end(BpePretok rule, const uint8_t *text, size_t n, size_t i);
// The end of a part of text[start..n) at least min_len bytes long, or n: a
// piece end where the text may be cut, such that the rule applied to each
// part gives the pieces of the whole (so encoding the parts gives the ids of
// encoding the whole). Not every piece end is one (pretokenize.c).
size_t pretok_chunk_end(BpePretok rule, const uint8_t *text, size_t n, size_t start, size_t min_len);

#endif
