// test_data_pretokenize.c: the pre-split rules (src/data/pretokenize.c) and
// the Unicode table GPT-2's rule reads (src/data/unicode_classes.c).
//   - the byte-class rule on hand-made cases;
//   - GPT-2's regex on hand-made cases, each list of pieces worked out from
//     the regex's definition (the alternatives in order, each run greedy);
//   - GPT-2's regex against a regex engine: Python's `regex` module (the one
//     OpenAI's encoder.py uses) on random texts (skipped without
//     /usr/bin/python3's regex: Debian's python3-regex);
//   - the table against the Unicode Character Database itself, every code
//     point, read here in C, and scripts/gen/unicode_classes.py --check
//     (skipped without Debian's unicode-data, or with another version of it).
// Runs from the repository root.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "util_shell.h"

#include "common/rng.h"
#include "data/bpe.h"
#include "data/pretokenize.h"
#include "data/unicode_classes.h"

#define UCD "/usr/share/unicode"

// Splits s (n bytes) by the rule and checks the pieces against the
// NULL-terminated list of expected pieces.
static void check_split_n(BpePretok rule, const char *s, size_t n, const char *const *want) {
    size_t i = 0;
    int k = 0;
    while (i < n) {
        size_t j = pretok_piece_end(rule, (const uint8_t *)s, n, i);
        assert_true(j > i && j <= n);
        if (!want[k] || j - i != strlen(want[k]) || memcmp(s + i, want[k], j - i) != 0) {
            print_error("%s, piece %d of \"%s\": got \"%.*s\", want \"%s\"\n", pretok_name(rule), k, s, (int)(j - i),
                        s + i, want[k] ? want[k] : "(no more pieces)");
            fail();
        }
        k++;
        i = j;
    }
    if (want[k]) { print_error("%s: \"%s\" has fewer pieces than expected\n", pretok_name(rule), s); fail(); }
}

#define SPLIT(rule, s, ...) check_split_n(rule, s, strlen(s), (const char *const[]){__VA_ARGS__, NULL})
#define GPT2(s, ...) SPLIT(BPE_PRETOK_GPT2, s, __VA_ARGS__)

// ---------------------------------------------------------------- names

static void test_names(void **state) {
    (void)state;
    BpePretok r;
    assert_int_equal(pretok_from_name("gpt2", &r), 0);
    assert_int_equal(r, BPE_PRETOK_GPT2);
    assert_int_equal(pretok_from_name("byte-classes", &r), 0);
    assert_int_equal(r, BPE_PRETOK_BYTE_CLASSES);
    assert_int_equal(pretok_from_name("gpt-2", &r), -1);
    assert_string_equal(pretok_name(BPE_PRETOK_GPT2), "gpt2");
    assert_string_equal(pretok_name(BPE_PRETOK_BYTE_CLASSES), "byte-classes");
    assert_int_equal(BPE_PRETOK_DEFAULT, BPE_PRETOK_GPT2);
}

// ---------------------------------------------------------------- byte classes

static void test_byte_classes(void **state) {
    (void)state;
    const BpePretok B = BPE_PRETOK_BYTE_CLASSES;
    SPLIT(B, "\n  1 In the beginning", "\n ", " 1", " In", " the", " beginning");
    SPLIT(B, "Hello, world!!", "Hello", ",", " world", "!!");
    SPLIT(B, "a  b", "a", " ", " b");
    SPLIT(B, "x\t\ty", "x", "\t\t", "y");
    SPLIT(B, "caf\xc3\xa9 12ab (x)", "caf\xc3\xa9", " 12", "ab", " (", "x", ")");
    SPLIT(B, "end.\n\nExodus", "end", ".", "\n\n", "Exodus");
    SPLIT(B, "a  ", "a", "  ");
    SPLIT(B, " ", " ");
    SPLIT(B, "LORD's", "LORD", "'", "s");
    SPLIT(B, "x\xc2\xb2 it\xe2\x80\x99s", "x\xc2\xb2", " it\xe2\x80\x99s");   // every byte >= 0x80 a letter
    // A run longer than BPE_MAX_PIECE is cut every BPE_MAX_PIECE bytes.
    char longrun[600];
    memset(longrun, 'a', 599);
    size_t i = 0, n = 599, pieces[4], k = 0;
    while (i < n) { size_t j = pretok_piece_end(B, (const uint8_t *)longrun, n, i); pieces[k++] = j - i; i = j; }
    assert_int_equal(k, 3);
    assert_int_equal(pieces[0], BPE_MAX_PIECE);
    assert_int_equal(pieces[1], BPE_MAX_PIECE);
    assert_int_equal(pieces[2], 599 - 2 * BPE_MAX_PIECE);
}

// ---------------------------------------------------------------- GPT-2's regex, by hand
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// At each position the first alternative that matches, as long as it goes.

// 's 't 're 've 'm 'll 'd: the apostrophe U+0027 and these lower-case letters only.
static void test_gpt2_contractions(void **state) {
    (void)state;
    GPT2("LORD's house", "LORD", "'s", " house");
    GPT2("thou cam'st", "thou", " cam", "'s", "t");   // 's, then the letter run "t"
    GPT2("'tis we're you've I'm we'll he'd", "'t", "is", " we", "'re", " you", "'ve", " I", "'m", " we", "'ll",
         " he", "'d");
    GPT2("'ll'd", "'ll", "'d");
    // case-sensitive: "'T" is no contraction; "'" alone is a run of others
    GPT2("DON'T", "DON", "'", "T");
    GPT2("we'r", "we", "'", "r");   // 're needs its e
    GPT2("'", "'");
    // after a space, " '" is the optional space and a run of others (alternative 4)
    GPT2("a 's", "a", " '", "s");
    // before the apostrophe, a run of others takes it ("!" and "'" are both others)
    GPT2("!'s", "!'", "s");
    // U+2019, the curly apostrophe, is punctuation: no contraction
    GPT2("it\xe2\x80\x99s", "it", "\xe2\x80\x99", "s");
}

// \s+(?!\S) and \s+: a run of white space before a non-space leaves its last
// code point to the next piece; at the end of the text it is whole.
static void test_gpt2_whitespace(void **state) {
    (void)state;
    GPT2("the end.\n\nExodus 1", "the", " end", ".", "\n", "\n", "Exodus", " 1");   // "\n\n" before a letter
    GPT2("a  b", "a", " ", " b");
    GPT2("a    b", "a", "   ", " b");       // runs of spaces: the last one goes with the word
    GPT2("x   ", "x", "   ");               // at the end: the whole run
    GPT2("\n  1 In", "\n ", " 1", " In");
    GPT2("x\t\ty", "x", "\t", "\t", "y");   // the last tab alone (alternative 6)
    GPT2("a  \n  b", "a", "  \n ", " b");
    GPT2(" \n", " \n");
    GPT2("  !", " ", " !");
    GPT2(" ", " ");
    GPT2("\n", "\n");
    GPT2("if x:\n\t\treturn", "if", " x", ":", "\n\t", "\t", "return");
}

static void test_gpt2_letters_numbers_others(void **state) {
    (void)state;
    GPT2("1189 chapters, 31102 verses", "1189", " chapters", ",", " 31102", " verses");   // no 3-digit groups
    GPT2("Hello!!! (Genesis 1:2).", "Hello", "!!!", " (", "Genesis", " 1", ":", "2", ").");
    GPT2("x2y", "x", "2", "y");
    GPT2("a_b", "a", "_", "b");
    GPT2("$100 + 5%", "$", "100", " +", " 5", "%");
    // superscripts and fractions are numbers (No); x² is a letter, then a number
    GPT2("x\xc2\xb2 + y\xc2\xb3", "x", "\xc2\xb2", " +", " y", "\xc2\xb3");
    GPT2("\xc2\xbd cup", "\xc2\xbd", " cup");            // ½
    GPT2("\xe2\x85\xab.", "\xe2\x85\xab", ".");           // Ⅻ, a letter number (Nl)
    GPT2("\xd9\xa1\xd9\xa2\xd9\xa3", "\xd9\xa1\xd9\xa2\xd9\xa3");   // Arabic-Indic digits (Nd)
    // curly quotes are punctuation
    GPT2("\xe2\x80\x9cLight,\xe2\x80\x9d he said", "\xe2\x80\x9c", "Light", ",\xe2\x80\x9d", " he", " said");
    // Greek, precomposed: letters (Ἐν ἀρχῇ ἦν ὁ λόγος)
    GPT2("\xe1\xbc\x98\xce\xbd \xe1\xbc\x80\xcf\x81\xcf\x87\xe1\xbf\x87 \xe1\xbc\xa6\xce\xbd \xe1\xbd\x81 "
         "\xce\xbb\xcf\x8c\xce\xb3\xce\xbf\xcf\x82",
         "\xe1\xbc\x98\xce\xbd", " \xe1\xbc\x80\xcf\x81\xcf\x87\xe1\xbf\x87", " \xe1\xbc\xa6\xce\xbd", " \xe1\xbd\x81",
         " \xce\xbb\xcf\x8c\xce\xb3\xce\xbf\xcf\x82");
    // combining accents (Mn) are neither letters nor numbers: they cut the word
    GPT2("cafe\xcc\x81 na\xcc\x88ive", "cafe", "\xcc\x81", " na", "\xcc\x88", "ive");
    GPT2("caf\xc3\xa9", "caf\xc3\xa9");   // é precomposed is a letter
    // CJK ideographs are letters: a sentence without spaces is one piece up to its punctuation
    GPT2("\xe6\x9c\xaf\xe8\xaf\xad\xe3\x80\x82\xe5\xa5\xbd", "\xe6\x9c\xaf\xe8\xaf\xad", "\xe3\x80\x82",
         "\xe5\xa5\xbd");
    // emoji and their modifiers (So, Sk), joiners (Cf): others, one run with "!"
    GPT2("hi \xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd!", "hi", " \xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd!");
    GPT2("\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 ok", "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9", " ok");
    // unassigned (U+0378) and private use (U+E000): others
    GPT2("a\xcd\xb8" "b\xee\x80\x80", "a", "\xcd\xb8", "b", "\xee\x80\x80");
}

// White space beyond ASCII: \s is Unicode's White_Space; only U+0020 is the
// optional space before a word.
static void test_gpt2_unicode_space(void **state) {
    (void)state;
    GPT2("10\xc2\xa0" "000", "10", "\xc2\xa0", "000");          // no-break space alone (alternative 6)
    GPT2("a \xc2\xa0" "b", "a", " ", "\xc2\xa0", "b");         // " " leaves the run, NBSP alone
    GPT2("a\xc2\xa0\xc2\xa0" "b", "a", "\xc2\xa0", "\xc2\xa0", "b");
    GPT2("a\xe3\x80\x80" "b\xe2\x80\xa8" "c", "a", "\xe3\x80\x80", "b", "\xe2\x80\xa8", "c");   // U+3000, U+2028
    GPT2("a\xc2\x85" "b", "a", "\xc2\x85", "b");                // U+0085 (NEL)
    GPT2("a\xe2\x80\x8b" "b", "a", "\xe2\x80\x8b", "b");        // U+200B zero width space: Cf, not White_Space
    GPT2("a\x1c" "b", "a", "\x1c", "b");                        // U+001C: not White_Space (Python's str.isspace says yes)
    GPT2("x \xc2\xa0", "x", " \xc2\xa0");                       // white space to the end: one run
}

// Bytes that are not UTF-8: read as llama.cpp reads them (pretokenize.c).
static void test_gpt2_invalid_utf8(void **state) {
    (void)state;
    GPT2("a\xff" "b", "a", "\xff", "b");                   // FF: U+FFFD, a symbol
    GPT2("a\x80\x80" "b", "a", "\x80\x80", "b");           // two stray continuation bytes: two U+FFFD, one run
    GPT2("ok \xc3", "ok", " \xc3");                         // a lead byte at the end: U+FFFD after the space
    GPT2("\xc3(", "\xc3(");                                 // a lead byte without its continuation: U+FFFD, then "("
    GPT2("x\xc1\xa1y", "x\xc1\xa1y");                       // overlong 'a' (C1 A1) reads as 'a': one word
    GPT2("a\xed\xa0\x80" "b", "a", "\xed\xa0\x80", "b");    // a surrogate, U+D800: other
    GPT2("a\xf4\x90\x80\x80" "b", "a", "\xf4\x90\x80\x80", "b");   // 0x110000, beyond Unicode: other
    GPT2("a\xf8\x88\x80\x80\x80" "b", "a", "\xf8\x88\x80\x80\x80", "b");   // F8: no lead byte; 5 x U+FFFD
    // NUL is a control character (Cc): other, a piece of its own between letters
    const uint8_t nul[] = {'a', 0, 'b'};
    assert_int_equal(pretok_piece_end(BPE_PRETOK_GPT2, nul, 3, 0), 1);
    assert_int_equal(pretok_piece_end(BPE_PRETOK_GPT2, nul, 3, 1), 2);
}

// No length limit: a piece is what the regex matches, however long.
static void test_gpt2_long_pieces(void **state) {
    (void)state;
    enum { N = 1000 };
    char s[N + 2];
    memset(s, 'a', N);
    assert_int_equal(pretok_piece_end(BPE_PRETOK_GPT2, (const uint8_t *)s, N, 0), N);
    memset(s, ' ', N);
    s[N] = 'x';
    assert_int_equal(pretok_piece_end(BPE_PRETOK_GPT2, (const uint8_t *)s, N + 1, 0), N - 1);
    assert_int_equal(pretok_piece_end(BPE_PRETOK_GPT2, (const uint8_t *)s, N + 1, N - 1), N + 1);   // " x"
}

// ---------------------------------------------------------------- against a regex engine

// The pattern of OpenAI's encoder.py, applied by Python's regex module to
// texts separated by NUL; prints each text's pieces as their lengths in bytes.
static const char REGEX_SPLIT_PY[] =
    "import regex, sys\n"
    "pat = regex.compile(r\"\"\"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+\"\"\")\n"
    "for text in open(sys.argv[1], 'rb').read().decode('utf-8').split('\\0'):\n"
    "    print(' '.join(str(len(p.encode('utf-8'))) for p in pat.findall(text)))\n";

// A code point for a random text: often ASCII letters, spaces, newlines, the
// apostrophe and the contractions' letters, else from blocks of every class.
static uint32_t random_code_point(Rng *r) {
    static const uint32_t picks[] = {' ', ' ', ' ', '\n', '\n', '\t', '\'', '\'', 's', 't', 'r', 'e', 'v', 'm', 'l',
                                     'd', 'L', 'x', '1', '9', '.', '!', '(', '_', 0xA0, 0x2019, 0x201C, 0xB2, 0x301,
                                     0x3000, 0x2028, 0x85, 0x200D, 0xFFFD, 0x1F44B, 0x1F3FD, 0x378, 0x1C, 0x200B};
    static const uint32_t blocks[][2] = {{0x80, 0x250}, {0x370, 0x400}, {0x400, 0x500}, {0x590, 0x700},
                                         {0x900, 0x980}, {0x2000, 0x2070}, {0x2070, 0x20A0}, {0x2150, 0x2190},
                                         {0x3000, 0x3040}, {0x4E00, 0x4E80}, {0x1F300, 0x1F650}, {0xE000, 0xE010}};
    if (rng_below(r, 2)) return picks[rng_below(r, sizeof picks / sizeof picks[0])];
    const uint32_t *b = blocks[rng_below(r, sizeof blocks / sizeof blocks[0])];
    return b[0] + (uint32_t)rng_below(r, b[1] - b[0]);
}

static size_t put_utf8(uint32_t cp, uint8_t *o) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = 0xC0 | cp >> 6; o[1] = 0x80 | (cp & 0x3F); return 2; }
    if (cp < 0x10000) { o[0] = 0xE0 | cp >> 12; o[1] = 0x80 | (cp >> 6 & 0x3F); o[2] = 0x80 | (cp & 0x3F); return 3; }
    o[0] = 0xF0 | cp >> 18; o[1] = 0x80 | (cp >> 12 & 0x3F); o[2] = 0x80 | (cp >> 6 & 0x3F); o[3] = 0x80 | (cp & 0x3F);
    return 4;
}

static void test_gpt2_against_regex_module(void **state) {
    (void)state;
    if (run_shell("/usr/bin/python3 -c 'import regex' 2>/dev/null") != 0) {
        fprintf(stderr, "no Python regex module (Debian: python3-regex): skipped\n");
        skip();
    }
    enum { N_TEXTS = 2000, MAX_CPS = 60 };
    char texts[64], script[64], pieces[64], cmd[300];
    snprintf(texts, sizeof texts, "/tmp/ropelab_pretok_%d.txt", (int)getpid());
    snprintf(script, sizeof script, "/tmp/ropelab_pretok_%d.py", (int)getpid());
    snprintf(pieces, sizeof pieces, "/tmp/ropelab_pretok_%d.out", (int)getpid());
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fputs(REGEX_SPLIT_PY, f);
    fclose(f);
    uint8_t *buf = malloc((size_t)N_TEXTS * (MAX_CPS * 4 + 1));
    size_t *start = malloc((N_TEXTS + 1) * sizeof *start), n = 0;
    assert_non_null(buf);
    assert_non_null(start);
    Rng r;
    rng_seed(&r, 36);
    for (int t = 0; t < N_TEXTS; t++) {
        start[t] = n;
        for (int k = 1 + (int)rng_below(&r, MAX_CPS); k > 0; k--) n += put_utf8(random_code_point(&r), buf + n);
        buf[n++] = 0;   // the separator (not part of the text)
    }
    start[N_TEXTS] = n;
    f = fopen(texts, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n - 1, f), n - 1);
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s > %s", script, texts, pieces);
    assert_int_equal(run_shell("%s", cmd), 0);
    f = fopen(pieces, "r");
    assert_non_null(f);
    static char line[1 << 16];
    long n_pieces = 0;
    for (int t = 0; t < N_TEXTS; t++) {
        assert_non_null(fgets(line, sizeof line, f));
        const uint8_t *s = buf + start[t];
        size_t len = start[t + 1] - start[t] - 1, i = 0;
        char *p = line;
        for (char *tok = strtok(p, " \n"); tok; tok = strtok(NULL, " \n"), n_pieces++) {
            size_t want = (size_t)atol(tok), j = i < len ? pretok_piece_end(BPE_PRETOK_GPT2, s, len, i) : i;
            if (j - i != want) {
                print_error("text %d, at byte %zu: the regex's piece is %zu bytes, ours %zu: \"%.*s\"\n", t, i, want,
                            j - i, (int)len, (const char *)s);
                fail();
            }
            i = j;
        }
        assert_int_equal(i, len);
    }
    fclose(f);
    print_message("%d random texts, %ld pieces: GPT-2's pattern in Python's regex module cuts them as we do\n",
                  N_TEXTS, n_pieces);
    unlink(texts); unlink(script); unlink(pieces);
    free(buf);
    free(start);
}

// ---------------------------------------------------------------- cuts

// The piece ends of text[0..n) by the rule into ends; returns how many.
static size_t piece_ends(BpePretok rule, const uint8_t *text, size_t n, size_t *ends) {
    size_t k = 0;
    for (size_t i = 0; i < n; i = ends[k++]) ends[k] = pretok_piece_end(rule, text, n, i);
    return k;
}

// pretok_chunk_end's cuts: the rule applied to each part gives the pieces of
// the whole. GPT-2's rule is not cut after a piece of white space.
static void test_chunk_ends(void **state) {
    (void)state;
    const uint8_t *t = (const uint8_t *)".\n\nExodus";
    size_t ends[64], part_ends[64];
    assert_int_equal(piece_ends(BPE_PRETOK_GPT2, t, 9, ends), 4);   // "." "\n" "\n" "Exodus"
    assert_int_equal(ends[2], 3);
    assert_int_equal(pretok_piece_end(BPE_PRETOK_GPT2, t, 3, 1), 3);   // cut at 3, ".\n\n" ends in "\n\n"
    assert_int_equal(pretok_chunk_end(BPE_PRETOK_GPT2, t, 9, 0, 1), 1);   // after "."
    assert_int_equal(pretok_chunk_end(BPE_PRETOK_GPT2, t, 9, 0, 2), 9);   // not after either "\n"
    assert_int_equal(pretok_chunk_end(BPE_PRETOK_BYTE_CLASSES, t, 9, 0, 2), 3);   // "\n\n" is one piece there
    Rng r;
    rng_seed(&r, 2);
    uint8_t text[64 * 4];
    for (int trial = 0; trial < 4000; trial++) {
        BpePretok rule = trial % 2 ? BPE_PRETOK_GPT2 : BPE_PRETOK_BYTE_CLASSES;
        size_t n = 0;
        for (int k = 1 + (int)rng_below(&r, 60); k > 0; k--) {
            uint32_t cp = random_code_point(&r);
            if (rng_below(&r, 50) == 0) text[n++] = (uint8_t)(0x80 + rng_below(&r, 128));   // not UTF-8
            else n += put_utf8(cp, text + n);
        }
        size_t n_whole = piece_ends(rule, text, n, ends), n_parts = 0;
        for (size_t start = 0; start < n;) {
            size_t end = pretok_chunk_end(rule, text, n, start, rng_below(&r, 12));
            size_t m = piece_ends(rule, text + start, end - start, part_ends);
            for (size_t k = 0; k < m; k++) {
                assert_true(n_parts < n_whole);
                if (start + part_ends[k] != ends[n_parts])
                    fail_msg("%s, trial %d: a part [%zu, %zu) has a piece end at %zu, the whole at %zu",
                             pretok_name(rule), trial, start, end, start + part_ends[k], ends[n_parts]);
                n_parts++;
            }
            start = end;
        }
        assert_int_equal(n_parts, n_whole);
    }
}

// ---------------------------------------------------------------- the table

// llama.cpp's \s (scripts/gen-unicode-data.py lists it by hand, from PropList.txt's White_Space).
static const uint32_t LLAMA_WHITESPACE[] = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000,
                                            0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
                                            0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};

static void test_table_whitespace_is_llamas(void **state) {
    (void)state;
    size_t k = 0, n = sizeof LLAMA_WHITESPACE / sizeof LLAMA_WHITESPACE[0];
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        int space = k < n && LLAMA_WHITESPACE[k] == cp;
        k += space;
        if ((unicode_class(cp) == UC_SPACE) != space) fail_msg("U+%04X: white space %d in the table", cp, !space);
    }
    assert_int_equal(unicode_class(0x110000), UC_OTHER);
    assert_int_equal(unicode_class(UINT32_MAX), UC_OTHER);
}

// The version of the UCD in UCD/PropList.txt's first line, or "" without one.
static void ucd_version(char *out, size_t cap) {
    out[0] = 0;
    FILE *f = fopen(UCD "/PropList.txt", "r");
    char line[200];
    if (f && fgets(line, sizeof line, f) && sscanf(line, "# PropList-%31[0-9.]", out) == 1) {
        size_t n = strlen(out);
        if (n && out[n - 1] == '.') out[n - 1] = 0;   // "15.0.0." of "15.0.0.txt"
    }
    if (f) fclose(f);
    (void)cap;
}

static int have_ucd_of_table(void) {
    char v[32];
    ucd_version(v, sizeof v);
    if (!v[0] || access(UCD "/UnicodeData.txt", R_OK) != 0) {
        fprintf(stderr, "no %s (Debian: unicode-data): skipped\n", UCD);
        return 0;
    }
    if (strcmp(v, unicode_classes_version) != 0) {
        fprintf(stderr, "%s is Unicode %s, the table %s: skipped\n", UCD, v, unicode_classes_version);
        return 0;
    }
    return 1;
}

// Every code point's class, from UnicodeData.txt (field 2, the general
// category; "<..., First>" and "<..., Last>" lines give a range) and
// PropList.txt (White_Space), against unicode_class.
static void test_table_against_ucd(void **state) {
    (void)state;
    if (!have_ucd_of_table()) skip();
    uint8_t *want = calloc(0x110000, 1);   // UC_OTHER = 0
    assert_non_null(want);
    FILE *f = fopen(UCD "/UnicodeData.txt", "r");
    assert_non_null(f);
    char line[512];
    long first = -1;
    while (fgets(line, sizeof line, f)) {
        char *name = strchr(line, ';'), *cat = name ? strchr(name + 1, ';') : NULL;
        assert_non_null(cat);
        long cp = strtol(line, NULL, 16);
        int cls = cat[1] == 'L' ? UC_LETTER : cat[1] == 'N' ? UC_NUMBER : UC_OTHER;
        if (strstr(name, ", First>;")) { first = cp; continue; }
        for (long c = strstr(name, ", Last>;") ? first : cp; c <= cp; c++) want[c] = (uint8_t)cls;
    }
    fclose(f);
    f = fopen(UCD "/PropList.txt", "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f)) {   // "0009..000D    ; White_Space # ..." or "0020          ; White_Space ..."
        unsigned lo, hi;
        char prop[64];
        if (sscanf(line, "%x..%x ; %63s", &lo, &hi, prop) != 3) {
            if (sscanf(line, "%x ; %63s", &lo, prop) != 2) continue;
            hi = lo;
        }
        if (strcmp(prop, "White_Space") == 0)
            for (unsigned c = lo; c <= hi; c++) want[c] = UC_SPACE;
    }
    fclose(f);
    long count[4] = {0};
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (unicode_class(cp) != want[cp]) fail_msg("U+%04X: class %d in the table, %d in the UCD", cp,
                                                    unicode_class(cp), want[cp]);
        count[want[cp]]++;
    }
    print_message("Unicode %s: %ld letters, %ld numbers, %ld white space, %ld others: the table agrees\n",
                  unicode_classes_version, count[UC_LETTER], count[UC_NUMBER], count[UC_SPACE], count[UC_OTHER]);
    free(want);
}

// The committed table is what the generator makes of this machine's UCD.
static void test_table_is_generated(void **state) {
    (void)state;
    if (!have_ucd_of_table()) skip();
    assert_int_equal(run_shell("/usr/bin/python3 scripts/gen/unicode_classes.py --check"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_byte_classes),
        cmocka_unit_test(test_gpt2_contractions),
        cmocka_unit_test(test_gpt2_whitespace),
        cmocka_unit_test(test_gpt2_letters_numbers_others),
        cmocka_unit_test(test_gpt2_unicode_space),
        cmocka_unit_test(test_gpt2_invalid_utf8),
        cmocka_unit_test(test_gpt2_long_pieces),
        cmocka_unit_test(test_gpt2_against_regex_module),
        cmocka_unit_test(test_chunk_ends),
        cmocka_unit_test(test_table_whitespace_is_llamas),
        cmocka_unit_test(test_table_against_ucd),
        cmocka_unit_test(test_table_is_generated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
