// test_data_tokens.c: llm.c token files: round trips in both layouts, files
// written by hand in llm.c's layout, and every bad-file case with its message.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "data/tokens.h"

static char err[1024];

// Writes a file the way llm.c's data scripts do (numpy: int32 header of 256,
// then the tokens as uint16 or uint32), independent of tokens_write.
static void write_llmc(const char *path, int32_t magic, int32_t version, int32_t count,
                       const void *tokens, size_t n, int token_bytes) {
    int32_t header[256] = {0};
    header[0] = magic; header[1] = version; header[2] = count;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(header, 4, 256, f), 256);
    if (n) assert_int_equal(fwrite(tokens, token_bytes, n, f), n);
    fclose(f);
}

static void expect_open_error(const char *path, int vocab, const char *want) {
    TokenFile tf;
    err[0] = 0;
    assert_int_equal(tokens_open(&tf, path, vocab, err, sizeof err), -1);
    if (!strstr(err, want) || strncmp(err, path, strlen(path)) != 0) {
        print_error("error \"%s\" should name %s and say \"%s\"\n", err, path, want);
        fail();
    }
}

static void test_roundtrip_uint16(void **state) {
    const char *path = "build/test_tokens_u16.bin";
    size_t n = 100000;
    uint32_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (uint32_t)((i * 2654435761u) % 65536);
    const uint64_t checksum = 0x0123456789abcdefull;   // the tokenizer's, as ./prepare records it
    assert_int_equal(tokens_write(path, t, n, 65536, checksum, ATOMIC_REPLACE, err, sizeof err), 0);

    // The bytes on disk, read without the library.
    FILE *f = fopen(path, "rb");
    uint32_t header[256];
    assert_int_equal(fread(header, 4, 256, f), 256);
    assert_int_equal(header[0], 20240520);
    assert_int_equal(header[1], 1);
    assert_int_equal(header[2], n);
    assert_int_equal(header[3], 0x89abcdefu);   // the checksum's low 32 bits, then its high ones
    assert_int_equal(header[4], 0x01234567u);
    for (int i = 5; i < 256; i++) assert_int_equal(header[i], 0);
    uint16_t first[3];
    assert_int_equal(fread(first, 2, 3, f), 3);
    for (int i = 0; i < 3; i++) assert_int_equal(first[i], t[i]);
    fseek(f, 0, SEEK_END);
    assert_int_equal(ftell(f), 1024 + 2 * n);
    fclose(f);

    TokenFile tf;
    assert_int_equal(tokens_open(&tf, path, 65536, err, sizeof err), 0);
    assert_int_equal(tf.n_tokens, n);
    assert_int_equal(tf.token_bytes, 2);
    assert_true(tf.tokenizer_checksum == checksum);
    for (size_t i = 0; i < n; i++) assert_int_equal(tokens_get(&tf, i), t[i]);
    // Its tokenizer is accepted, another one refused in one line naming both files.
    assert_int_equal(tokens_check_tokenizer(&tf, checksum, "tok.bin", err, sizeof err), 0);
    assert_int_equal(tokens_check_tokenizer(&tf, 0x0123456789abcdeeull, "other.bin", err, sizeof err), -1);
    assert_string_equal(err, "build/test_tokens_u16.bin and other.bin are of different tokenizers (tokenizer "
                             "checksum 0123456789abcdef in the token file, 0123456789abcdee for other.bin)");
    tokens_close(&tf);
    free(t);
}

static void test_roundtrip_uint32(void **state) {
    const char *path = "build/test_tokens_u32.bin";
    uint32_t t[5] = {0, 65535, 65536, 99999, 7};
    assert_int_equal(tokens_write(path, t, 5, 100000, 0, ATOMIC_REPLACE, err, sizeof err), 0);
    FILE *f = fopen(path, "rb");
    int32_t header[3];
    assert_int_equal(fread(header, 4, 3, f), 3);
    fclose(f);
    assert_int_equal(header[0], 20240801);
    assert_int_equal(header[1], 7);
    assert_int_equal(header[2], 5);
    TokenFile tf;
    assert_int_equal(tokens_open(&tf, path, 100000, err, sizeof err), 0);
    assert_int_equal(tf.token_bytes, 4);
    for (int i = 0; i < 5; i++) assert_int_equal(tokens_get(&tf, i), t[i]);
    tokens_close(&tf);
    // Without a vocabulary the ids are not checked; with a smaller one they fail.
    assert_int_equal(tokens_open(&tf, path, 0, err, sizeof err), 0);
    tokens_close(&tf);
    expect_open_error(path, 65536, "token 2 is 65536, beyond the vocabulary of 65536");
}

static void test_reads_llmc_files(void **state) {
    const char *path = "build/test_tokens_llmc.bin";
    uint16_t t16[4] = {50256, 15496, 11, 995};   // GPT-2 ids: <|endoftext|>Hello, world
    write_llmc(path, 20240520, 1, 4, t16, 4, 2);
    TokenFile tf;
    assert_int_equal(tokens_open(&tf, path, 50257, err, sizeof err), 0);
    assert_int_equal(tf.n_tokens, 4);
    for (int i = 0; i < 4; i++) assert_int_equal(tokens_get(&tf, i), t16[i]);
    assert_true(tf.tokenizer_checksum == 0);   // not recorded: any tokenizer is taken
    assert_int_equal(tokens_check_tokenizer(&tf, 0x0123456789abcdefull, "tok.bin", err, sizeof err), 0);
    tokens_close(&tf);
    expect_open_error(path, 50000, "token 0 is 50256, beyond the vocabulary of 50000");
    // An empty file (header only) is valid.
    write_llmc(path, 20240520, 1, 0, NULL, 0, 2);
    assert_int_equal(tokens_open(&tf, path, 10, err, sizeof err), 0);
    assert_int_equal(tf.n_tokens, 0);
    tokens_close(&tf);
}

static void test_bad_token_files(void **state) {
    const char *path = "build/test_tokens_bad.bin";
    uint16_t t[4] = {1, 2, 3, 4};
    expect_open_error("build/no_such_tokens.bin", 0, "No such file or directory");
    expect_open_error("build", 0, "not a regular file");
    write_llmc(path, 12345, 1, 4, t, 4, 2);
    expect_open_error(path, 0, "bad magic 12345");
    write_llmc(path, 20240520, 7, 4, t, 4, 2);
    expect_open_error(path, 0, "version 7 does not match magic 20240520 (expected 1)");
    write_llmc(path, 20240801, 1, 2, t, 2, 4);
    expect_open_error(path, 0, "version 1 does not match magic 20240801 (expected 7)");
    write_llmc(path, 20240520, 1, 5, t, 4, 2);   // header says 5, file holds 4
    expect_open_error(path, 0, "file is 1032 bytes but the header's 5 tokens need 1034");
    write_llmc(path, 20240520, 1, 3, t, 4, 2);   // one token too many
    expect_open_error(path, 0, "file is 1032 bytes but the header's 3 tokens need 1030");
    write_llmc(path, 20240520, 1, -1, t, 4, 2);
    expect_open_error(path, 0, "negative token count");
    write_llmc(path, 20240520, 1, 4, t, 4, 2);
    expect_open_error(path, 4, "token 3 is 4, beyond the vocabulary of 4");
    FILE *f = fopen(path, "wb");
    fwrite("short", 1, 5, f);
    fclose(f);
    expect_open_error(path, 0, "5 bytes is too short for a token file");
}

static void test_write_rejects_bad_ids(void **state) {
    const char *path = "build/test_tokens_reject.bin";
    remove(path);
    uint32_t t[3] = {1, 500, 2};
    assert_int_equal(tokens_write(path, t, 3, 500, 0, ATOMIC_REPLACE, err, sizeof err), -1);
    assert_non_null(strstr(err, "token 1 is 500, beyond the vocabulary of 500"));
    FILE *f = fopen(path, "rb");
    assert_null(f);   // nothing written
    assert_int_equal(tokens_write("build/no_such_dir/x.bin", t, 3, 501, 0, ATOMIC_REPLACE, err, sizeof err), -1);
    assert_non_null(strstr(err, "build/no_such_dir/x.bin: cannot create"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_uint16),
        cmocka_unit_test(test_roundtrip_uint32),
        cmocka_unit_test(test_reads_llmc_files),
        cmocka_unit_test(test_bad_token_files),
        cmocka_unit_test(test_write_rejects_bad_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
