// bpe_train.c: learning the BPE merges from a corpus.
//
// 1. Pre-split every text into pieces (pretok_piece_end, the rules in
//    pretokenize.c) and count the distinct pieces ("words") in a hash table:
//    training works on the distinct words weighted by their counts, never on
//    the raw text again. A piece longer than BPE_MAX_PIECE bytes (GPT-2's rule
//    does not cut its pieces) is counted as parts of BPE_MAX_PIECE bytes and a
//    last shorter one, so no merge learned is longer than BPE_MAX_PIECE.
// 2. Count every adjacent pair of symbols in every word, weighted by the
//    word's count. Overlapping pairs count: "aaa" holds (a,a) twice.
// 3. Repeat: take the pair with the highest count (ties: the lowest
//    (left, right) ids, so the result is deterministic), give it the next id,
//    and rewrite only the words that contain it (each pair keeps the list of
//    words it occurs in), merging occurrences left to right. Pair counts are
//    updated incrementally: for every rewritten word, its old pairs are
//    subtracted and its new pairs added.
//
// The pair with the highest count comes from a max-heap with lazy
// invalidation: a heap entry holds the count its pair had when pushed. A
// merge can only lower the counts of existing pairs, and the pairs it creates
// (which contain the new id) are new, so they are pushed once with their
// final count after the rewrite. A popped entry whose count is stale is pushed
// again with the current count; the first popped entry that is up to date is
// the true maximum.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bpe.h"
#include "data/hashmap.h"

typedef struct {
    uint32_t start, len;   // symbols in syms[start .. start + len)
    int64_t count;         // how often the word occurs in the corpus
} Word;

typedef struct {
    uint32_t left, right;
    int64_t count;         // weighted occurrences right now
    int32_t *words;        // words that contained it when it was counted (may be stale)
    uint32_t n_words, cap_words;
    int32_t last_word;     // last word appended, to skip duplicates
} Pair;

typedef struct {
    int64_t count;
    uint32_t left, right, pair;
} HeapEntry;

typedef struct {
    Word *words;     size_t n_words;
    uint32_t *syms;  size_t n_syms;
    Pair *pairs;     size_t n_pairs, cap_pairs;
    U64Map pair_index;                       // (left << 32 | right) -> index in pairs
    HeapEntry *heap; size_t n_heap, cap_heap;
} Trainer;

// ---------------------------------------------------------------- words

typedef struct {
    uint64_t hash;
    const uint8_t *bytes;   // inside the caller's text
    uint32_t len;
    int32_t word;           // -1: empty slot
} WordSlot;

// realloc that leaves *p untouched and returns -1 when memory runs out.
static int grow(void *p, size_t bytes) {
    void *q = realloc(*(void **)p, bytes ? bytes : 1);
    if (!q) return -1;
    *(void **)p = q;
    return 0;
}

// 0, or -1 when out of memory (tr then holds nothing to free).
static int count_words(Trainer *tr, BpePretok rule, const uint8_t *const *texts, const size_t *lens, int n_texts) {
    size_t cap = 1 << 16, n_words = 0, cap_words = 1024;
    WordSlot *slots = malloc(cap * sizeof *slots);
    Word *words = malloc(cap_words * sizeof *words);
    const uint8_t **first = malloc(cap_words * sizeof *first);   // bytes of each word
    if (!slots || !words || !first) goto oom;
    for (size_t i = 0; i < cap; i++) slots[i].word = -1;
    size_t n_syms = 0;
    for (int t = 0; t < n_texts; t++) {
        const uint8_t *s = texts[t];
        for (size_t i = 0, piece_end = 0; i < lens[t];) {
            if (i == piece_end) piece_end = pretok_piece_end(rule, s, lens[t], i);
            size_t j = piece_end - i > BPE_MAX_PIECE ? i + BPE_MAX_PIECE : piece_end;
            uint32_t len = (uint32_t)(j - i);
            uint64_t h = hash_bytes(s + i, len);
            size_t mask = cap - 1, k = h & mask;
            while (slots[k].word >= 0 &&
                   !(slots[k].hash == h && slots[k].len == len && memcmp(slots[k].bytes, s + i, len) == 0))
                k = (k + 1) & mask;
            if (slots[k].word >= 0) {
                words[slots[k].word].count++;
            } else {
                if (n_words == cap_words) {
                    cap_words *= 2;
                    if (grow(&words, cap_words * sizeof *words) || grow(&first, cap_words * sizeof *first))
                        goto oom;
                }
                words[n_words] = (Word){(uint32_t)n_syms, len, 1};
                first[n_words] = s + i;
                slots[k] = (WordSlot){h, s + i, len, (int32_t)n_words};
                n_words++;
                n_syms += len;
                if (2 * n_words > cap) {   // rehash into a table twice the size
                    size_t new_cap = 2 * cap;
                    WordSlot *bigger = malloc(new_cap * sizeof *bigger);
                    if (!bigger) goto oom;
                    for (size_t q = 0; q < new_cap; q++) bigger[q].word = -1;
                    for (size_t q = 0; q < cap; q++)
                        if (slots[q].word >= 0) {
                            size_t r = slots[q].hash & (new_cap - 1);
                            while (bigger[r].word >= 0) r = (r + 1) & (new_cap - 1);
                            bigger[r] = slots[q];
                        }
                    free(slots);
                    slots = bigger;
                    cap = new_cap;
                }
            }
            i = j;
        }
    }
    tr->syms = malloc((n_syms ? n_syms : 1) * sizeof *tr->syms);
    if (!tr->syms) goto oom;
    for (size_t w = 0; w < n_words; w++)
        for (uint32_t k = 0; k < words[w].len; k++) tr->syms[words[w].start + k] = first[w][k];
    tr->words = words;
    tr->n_words = n_words;
    tr->n_syms = n_syms;
    free(slots);
    free(first);
    return 0;
oom:
    free(slots); free(words); free(first);
    return -1;
}

// ---------------------------------------------------------------- pairs and heap

static uint64_t pair_key(uint32_t left, uint32_t right) { return ((uint64_t)left << 32) | right; }

// Index of the pair (left, right), added with count 0 if new; NO_PAIR when out of memory.
#define NO_PAIR UINT32_MAX
static uint32_t pair_get(Trainer *tr, uint32_t left, uint32_t right) {
    if (tr->n_pairs == tr->cap_pairs) {   // room for a new pair before the index can point at it
        size_t cap = tr->cap_pairs ? 2 * tr->cap_pairs : 4096;
        if (grow(&tr->pairs, cap * sizeof *tr->pairs)) return NO_PAIR;
        tr->cap_pairs = cap;
    }
    int inserted;
    uint32_t *idx = u64map_put(&tr->pair_index, pair_key(left, right), (uint32_t)tr->n_pairs, &inserted);
    if (!idx) return NO_PAIR;
    if (inserted) {
        tr->pairs[tr->n_pairs++] = (Pair){left, right, 0, NULL, 0, 0, -1};
    }
    return *idx;
}

static int pair_note_word(Pair *p, int32_t w) {
    if (p->last_word == w) return 0;
    if (p->n_words == p->cap_words) {
        uint32_t cap = p->cap_words ? 2 * p->cap_words : 4;
        if (grow(&p->words, cap * sizeof *p->words)) return -1;
        p->cap_words = cap;
    }
    p->words[p->n_words++] = w;
    p->last_word = w;
    return 0;
}

// Heap order: higher count first, then lower left id, then lower right id.
static int heap_before(const HeapEntry *a, const HeapEntry *b) {
    if (a->count != b->count) return a->count > b->count;
    if (a->left != b->left) return a->left < b->left;
    return a->right < b->right;
}

static int heap_push(Trainer *tr, uint32_t pair) {
    if (tr->n_heap == tr->cap_heap) {
        size_t cap = tr->cap_heap ? 2 * tr->cap_heap : 4096;
        if (grow(&tr->heap, cap * sizeof *tr->heap)) return -1;
        tr->cap_heap = cap;
    }
    const Pair *p = &tr->pairs[pair];
    HeapEntry e = {p->count, p->left, p->right, pair};
    size_t i = tr->n_heap++;
    while (i > 0 && heap_before(&e, &tr->heap[(i - 1) / 2])) {
        tr->heap[i] = tr->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    tr->heap[i] = e;
    return 0;
}

static HeapEntry heap_pop(Trainer *tr) {
    HeapEntry top = tr->heap[0], last = tr->heap[--tr->n_heap];
    size_t i = 0, n = tr->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(&tr->heap[c + 1], &tr->heap[c])) c++;
        if (!heap_before(&tr->heap[c], &last)) break;
        tr->heap[i] = tr->heap[c];
        i = c;
    }
    if (n > 0) tr->heap[i] = last;
    return top;
}

// Adds count to every adjacent pair of word w (count < 0 subtracts). When
// note_id is a valid id, the pairs that contain it are new: they learn that
// they occur in w and are collected in *fresh for one heap push each.
// 0, or -1 when out of memory.
static int add_word_pairs(Trainer *tr, int32_t w, int64_t count, uint32_t note_id,
                           uint32_t **fresh, size_t *n_fresh, size_t *cap_fresh) {
    const Word *wd = &tr->words[w];
    const uint32_t *s = tr->syms + wd->start;
    for (uint32_t i = 0; i + 1 < wd->len; i++) {
        uint32_t idx = pair_get(tr, s[i], s[i + 1]);
        if (idx == NO_PAIR) return -1;
        Pair *p = &tr->pairs[idx];
        p->count += count;
        if (s[i] == note_id || s[i + 1] == note_id) {
            if (p->last_word == w) continue;   // already noted for this word
            if (p->n_words == 0) {             // first time seen: push after the rewrite
                if (*n_fresh == *cap_fresh) {
                    size_t cap = *cap_fresh ? 2 * *cap_fresh : 256;
                    if (grow(fresh, cap * sizeof **fresh)) return -1;
                    *cap_fresh = cap;
                }
                (*fresh)[(*n_fresh)++] = idx;
            }
            if (pair_note_word(p, w)) return -1;
        }
    }
    return 0;
}

// Rewrites word w with every occurrence of (left, right) merged into id, left to
// right. Returns 0 if the word no longer contains the pair (a stale list entry).
static int merge_in_word(Trainer *tr, int32_t w, uint32_t left, uint32_t right, uint32_t id) {
    Word *wd = &tr->words[w];
    uint32_t *s = tr->syms + wd->start;
    uint32_t m = 0;
    int found = 0;
    for (uint32_t i = 0; i < wd->len;) {
        if (i + 1 < wd->len && s[i] == left && s[i + 1] == right) { s[m++] = id; i += 2; found = 1; }
        else s[m++] = s[i++];
    }
    wd->len = m;
    return found;
}

static int word_has_pair(const Trainer *tr, int32_t w, uint32_t left, uint32_t right) {
    const Word *wd = &tr->words[w];
    const uint32_t *s = tr->syms + wd->start;
    for (uint32_t i = 0; i + 1 < wd->len; i++)
        if (s[i] == left && s[i + 1] == right) return 1;
    return 0;
}

// ---------------------------------------------------------------- training

int bpe_train_multi(Tokenizer *tok, BpePretok rule, const uint8_t *const *texts, const size_t *lens, int n_texts,
                    int vocab_size, BpeProgress progress, void *user, char *err, size_t errlen) {
    memset(tok, 0, sizeof *tok);
    if (vocab_size < BPE_MIN_VOCAB || vocab_size > BPE_MAX_VOCAB) {
        snprintf(err, errlen, "vocabulary size %d out of range (%d..%d: the 256 bytes and eot at least)",
                 vocab_size, BPE_MIN_VOCAB, BPE_MAX_VOCAB);
        return -1;
    }
    size_t total = 0;
    for (int t = 0; t < n_texts; t++) total += lens[t];
    if (total == 0) { snprintf(err, errlen, "the training text is empty"); return -1; }

    Trainer tr = {0};
    uint32_t *fresh = NULL, (*merges)[2] = NULL;
    size_t n_fresh = 0, cap_fresh = 0;
    int want = vocab_size - 257, n_merges = 0, rc = -1;
    if (count_words(&tr, rule, texts, lens, n_texts) || u64map_init(&tr.pair_index, 1 << 14)) goto oom;
    for (size_t w = 0; w < tr.n_words; w++)   // every initial pair is new: note all
        for (uint32_t i = 0; i + 1 < tr.words[w].len; i++) {
            const uint32_t *s = tr.syms + tr.words[w].start;
            uint32_t idx = pair_get(&tr, s[i], s[i + 1]);   // may move tr.pairs
            if (idx == NO_PAIR) goto oom;
            Pair *p = &tr.pairs[idx];
            p->count += tr.words[w].count;
            if (pair_note_word(p, (int32_t)w)) goto oom;
        }
    for (size_t i = 0; i < tr.n_pairs; i++)
        if (heap_push(&tr, (uint32_t)i)) goto oom;

    merges = malloc((size_t)(want ? want : 1) * sizeof *merges);
    if (!merges) goto oom;
    int report_every = want / 100 > 0 ? want / 100 : 1;
    while (n_merges < want && tr.n_heap > 0) {
        HeapEntry top = heap_pop(&tr);
        Pair *p = &tr.pairs[top.pair];
        if (p->count <= 0) continue;
        if (p->count != top.count) {   // stale: re-queue
            if (heap_push(&tr, top.pair)) goto oom;
            continue;
        }

        uint32_t left = p->left, right = p->right, id = 256 + n_merges;
        merges[n_merges][0] = left;
        merges[n_merges][1] = right;
        n_merges++;
        // The list of p is not appended to while we walk it (new pairs contain
        // id, p does not), but tr.pairs may move: keep the list itself.
        int32_t *list = p->words;
        uint32_t n_list = p->n_words;
        p->words = NULL; p->n_words = p->cap_words = 0;
        n_fresh = 0;
        int failed = 0;
        for (uint32_t k = 0; k < n_list && !failed; k++) {
            int32_t w = list[k];
            if (!word_has_pair(&tr, w, left, right)) continue;
            int64_t c = tr.words[w].count;
            failed = add_word_pairs(&tr, w, -c, UINT32_MAX, &fresh, &n_fresh, &cap_fresh);
            merge_in_word(&tr, w, left, right, id);
            failed = failed || add_word_pairs(&tr, w, +c, id, &fresh, &n_fresh, &cap_fresh);
        }
        free(list);
        for (size_t k = 0; k < n_fresh && !failed; k++) failed = heap_push(&tr, fresh[k]);
        if (failed) goto oom;
        if (progress && (n_merges % report_every == 0 || n_merges == want)) progress(n_merges, want, user);
    }
    if (progress && n_merges < want) progress(n_merges, want, user);
    rc = bpe_from_merges(tok, rule, NULL, (const uint32_t (*)[2])merges, n_merges, err, errlen);
    goto done;
oom:
    snprintf(err, errlen, "out of memory while training the tokenizer (%zu distinct words, %zu pairs)",
             tr.n_words, tr.n_pairs);
done:
    for (size_t i = 0; i < tr.n_pairs; i++) free(tr.pairs[i].words);
    free(tr.pairs); free(tr.heap); free(tr.words); free(tr.syms); free(fresh); free(merges);
    u64map_free(&tr.pair_index);
    return rc;
}

int bpe_train(Tokenizer *tok, const uint8_t *text, size_t n, int vocab_size,
              BpeProgress progress, void *user, char *err, size_t errlen) {
    return bpe_train_multi(tok, BPE_PRETOK_DEFAULT, &text, &n, 1, vocab_size, progress, user, err, errlen);
}
