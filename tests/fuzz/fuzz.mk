# tests/fuzz/fuzz.mk: libFuzzer targets, included by the Makefile.
#
#   make fuzz                      build, make the seeds, run every target FUZZ_SECONDS each
#   make fuzz FUZZ_SECONDS=600 FUZZ_TARGETS="weights tokenizer"
#   make fuzz-build                only build build/fuzz/fuzz_NAME
#   make fuzz-seeds                only (re)make the seeds in build/fuzz/seeds/
#
# The library is compiled again with clang into build/fuzz/obj/ with
# -fsanitize=fuzzer-no-link,address,undefined (every UBSan check fatal), and
# each tests/fuzz/fuzz_NAME.c is linked against it with -fsanitize=fuzzer.
# Needs clang with libFuzzer and the OpenMP runtime (Debian: clang,
# libclang-rt-14-dev, libomp-14-dev); see tests/fuzz/README.md.

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= safetensors weights checkpoint tokens tokenizer ini args
# Extra libFuzzer flags for every target, e.g. FUZZ_FLAGS=-seed=1
FUZZ_FLAGS   ?=

FUZZ_DIR      := build/fuzz
FUZZ_SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS   := -std=c11 -D_GNU_SOURCE -fopenmp -fno-math-errno -Isrc -g -O1 -fno-omit-frame-pointer \
                 -Wall -Wextra -Wno-unused-parameter -Wno-pass-failed $(FUZZ_SANITIZE)
FUZZ_LIB_OBJ  := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(LIB_SRC))
FUZZ_LIB      := $(FUZZ_DIR)/libropelab_fuzz.a
FUZZ_ALL      := safetensors weights checkpoint tokens tokenizer ini args
FUZZ_BINS     := $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_ALL))

.PHONY: fuzz fuzz-deps fuzz-run fuzz-build fuzz-seeds

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< $(FUZZ_LIB) $(LDLIBS)

fuzz-build: $(FUZZ_BINS)

# The seeds come from the real programs (gcc build, like `make`).
fuzz-seeds: $(PROGRAMS)
	@bash tests/fuzz/make_seeds.sh

fuzz: fuzz-deps
	@$(MAKE) -s --no-print-directory fuzz-run

fuzz-deps:
	@ROPELAB_CLANG_DEPS=1 bash scripts/run/install_deps.sh

fuzz-run: fuzz-build fuzz-seeds
	@FUZZ_SECONDS='$(FUZZ_SECONDS)' FUZZ_FLAGS='$(FUZZ_FLAGS)' bash tests/fuzz/run_fuzz.sh $(FUZZ_TARGETS)
