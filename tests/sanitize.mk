# tests/sanitize.mk: the sanitizer builds, included by the Makefile
# (reasons, findings and the ThreadSanitizer story: tests/SANITIZERS.md).
#
#   make sanitize         everything (programs, tests) with AddressSanitizer,
#                         UndefinedBehaviorSanitizer and LeakSanitizer into
#                         build-san/, then the whole test suite against it
#   make sanitize-build   only the build: build-san/train, build-san/tests/test_*,
#                         build-san/test-programs/train (the test build of ./train), ...
#   make tsan             the threaded tests with ThreadSanitizer: clang, LLVM's
#                         libomp and its Archer tool, into build-tsan/
#   make clean-sanitize   removes build-san/ and build-tsan/
#
# The normal build (build/, ./train, ...) is untouched. The tests run the
# programs as ./train, ./prepare, ... from the repository root; the sanitizer
# suite runs them from build-san/root/, a directory of symlinks to every
# top-level entry of the repository except the programs (which point at
# build-san/train, ...) and build/ (a real directory for the tests' scratch
# files, holding only test-programs/train, a link to build-san/test-programs/train:
# the test build of ./train with fault injection, the Makefile's FAULT_DIR).
# No test needs to know: same relative paths, other binaries.
#
# SAN_OPT: optimisation of the sanitizer build (-O1: ASan's advice, good
# stack traces; the float tests' tolerances hold for any order of operations).

SAN_DIR       := build-san
SAN_OPT       ?= -O1
SAN_FLAGS     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
SAN_LIB_OBJ   := $(patsubst %.c,$(SAN_DIR)/obj/%.o,$(LIB_SRC))
SAN_TUTIL_OBJ := $(patsubst %.c,$(SAN_DIR)/obj/%.o,$(TUTIL_SRC))
SAN_LIB       := $(SAN_DIR)/libropelab.a
SAN_PROGRAMS  := $(addprefix $(SAN_DIR)/,$(PROGRAMS))
# Not run under the sanitizers: tests whose own work is Python or a document
# (the reports, the docs and include-graph checks, the float64 cross-check,
# whose C side is ./train --debug-state, run by test_train_* here too) and
# test_reading_path, which builds the programs again with coverage through
# the repository's Makefile. make test runs them.
SAN_NOT_RUN   := test_torch_crosscheck test_compare_studies test_frontier_report test_sweep_report \
                 test_docs test_deps test_reading_path
SAN_TESTS     := $(patsubst tests/%.c,$(SAN_DIR)/tests/%,$(filter-out $(addprefix tests/,$(addsuffix .c,$(SAN_NOT_RUN))),$(TEST_SRC)))
SAN_ROOT      := $(SAN_DIR)/root
SAN_FAULT_TRAIN := $(SAN_DIR)/test-programs/train

# Sanitizer runtime options for every process of the suite (the test binaries
# and the programs they start inherit them):
#   detect_leaks=1             LeakSanitizer at every exit, error exits included;
#   exitcode=99                a finding is never mistaken for the exit status 1
#                              of a program refusing bad input;
#   allocator_may_return_null  a failed malloc returns NULL as glibc's does, so
#                              the programs' own out-of-memory paths run;
#   detect_stack_use_after_return=1;
#   fast_unwind_on_malloc=0    full allocation stacks (through libraries built
#                              without frame pointers), so the suppressions
#                              below can match a library's frames; no
#                              measurable cost in this suite;
#   intercept_strstr=0         ASan's strstr wrapper takes strlen of the whole
#                              haystack on every call: test_data_corpus's scan of
#                              a 29 MB text turns quadratic (> 10 min instead of
#                              7 s). Only the ranges strstr reads go unchecked;
#                              every access of our own code still is.
# LeakSanitizer's suppressions, tests/lsan.supp: third-party libraries only
# (Open MPI), each with its reason. libgomp, OpenBLAS and oneDNN need none.
SAN_ENV := ASAN_OPTIONS=detect_leaks=1:exitcode=99:allocator_may_return_null=1:detect_stack_use_after_return=1:fast_unwind_on_malloc=0:intercept_strstr=0 \
           LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=99

.PHONY: sanitize sanitize-build tsan tsan-run clean-sanitize

clean-sanitize:
	rm -rf $(SAN_DIR) $(TSAN_DIR)

# Every target under build-san/ is built with SAN_OPT instead of the user's
# CFLAGS (ALL_CFLAGS keeps the flags the code needs).
$(SAN_DIR)/%: CFLAGS = $(SAN_OPT) -g

$(SAN_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -c $< -o $@

$(SAN_LIB): $(SAN_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

define san_program_rule
$(SAN_DIR)/$(1): $(SAN_DIR)/obj/$(2:.c=.o) $(SAN_LIB)
	$$(CC) $$(ALL_CFLAGS) $$(SAN_FLAGS) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS)
endef
$(foreach m,$(MAIN_SRC),$(eval $(call san_program_rule,$(patsubst %_main.c,%,$(notdir $(m))),$(m))))

$(SAN_DIR)/tests/%: $(SAN_DIR)/obj/tests/%.o $(SAN_TUTIL_OBJ) $(SAN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(TEST_LDLIBS)

# The test build of ./train (the Makefile's FAULT_DIR): the files that include
# src/train/fault_inject.h again with -DROPELAB_FAULT_INJECTION.
$(SAN_DIR)/test-programs/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -DROPELAB_FAULT_INJECTION -c $< -o $@

$(SAN_FAULT_TRAIN): LDLIBS += $(MPI_LIBS)
$(SAN_FAULT_TRAIN): $(call fault_train_objs,$(SAN_DIR)/obj,$(SAN_DIR)/test-programs/obj)
	$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

sanitize-build: $(SAN_PROGRAMS) $(SAN_TESTS) $(SAN_FAULT_TRAIN)

# The run root: symlinks to the repository, the programs from build-san/ (or
# build-tsan/), their test build of ./train as build/test-programs/train. Its
# Makefile is not the repository's: scripts/run/compare.sh (test_compare) runs
# `make all` first, which in the root would compile ./train, ./prepare, ...
# again without sanitizers (build/ is empty there) over the links, and every
# later test would run those. There `make all` has nothing to do.
define san_make_root
	@rm -rf $(1) && mkdir -p $(1)/$(FAULT_DIR)
	@for f in $(filter-out build $(SAN_DIR) $(PROGRAMS) Makefile,$(wildcard *)); do ln -s $(CURDIR)/$$f $(1)/$$f; done
	@for p in $(PROGRAMS); do ln -s $(CURDIR)/$(2)/$$p $(1)/$$p; done
	@ln -s $(CURDIR)/$(2)/test-programs/train $(1)/$(FAULT_DIR)/train
	@printf '%s\n' '# A sanitizer run root (tests/sanitize.mk): the programs are links to $(2)/, built' \
	  '# by the repository'"'"'s Makefile; nothing is built here.' 'all:' '.PHONY: all' >$(1)/Makefile
endef

sanitize:
	@bash scripts/run/install_deps.sh
	@$(MAKE) -s --no-print-directory sanitize-build
	$(call san_make_root,$(SAN_ROOT),$(SAN_DIR))
	@cd $(SAN_ROOT) && $(SAN_ENV) bash scripts/run/run_tests.sh $(addprefix $(CURDIR)/,$(SAN_TESTS))

# ---- ThreadSanitizer: clang, its libomp (which carries TSan annotations of
# its barriers and locks) and Archer (LLVM's OMPT tool that tells TSan about
# every OpenMP synchronisation). GCC's libgomp is not instrumented: TSan
# reports its barriers as races (tests/SANITIZERS.md). OpenBLAS and oneDNN
# call GOMP_* entry points, which libomp also provides, so one runtime serves
# all; their own code is not instrumented, so TSan checks ours only.
TSAN_CC    ?= clang
TSAN_DIR   := build-tsan
TSAN_OPT   ?= -O1
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer -Wno-pass-failed
ARCHER     ?= $(abspath $(shell $(TSAN_CC) -print-resource-dir 2>/dev/null)/../../libarcher.so)
# The tests with threaded paths (2 OpenMP threads at least somewhere).
TSAN_TEST_NAMES ?= test_model_threads test_model_layers test_model_gradcheck test_model_kernels test_model_linear \
                   test_model_init test_train_run test_train_mpi
TSAN_LIB_OBJ   := $(patsubst %.c,$(TSAN_DIR)/obj/%.o,$(LIB_SRC))
TSAN_TUTIL_OBJ := $(patsubst %.c,$(TSAN_DIR)/obj/%.o,$(TUTIL_SRC))
TSAN_LIB       := $(TSAN_DIR)/libropelab.a
TSAN_PROGRAMS  := $(addprefix $(TSAN_DIR)/,$(PROGRAMS))
TSAN_TESTS     := $(addprefix $(TSAN_DIR)/tests/,$(filter $(TSAN_TEST_NAMES),$(patsubst tests/%.c,%,$(TEST_SRC))))
TSAN_FAULT_TRAIN := $(TSAN_DIR)/test-programs/train
# halt_on_error: the first race ends the process with status 66, so the test fails.
TSAN_ENV := OMP_TOOL_LIBRARIES=$(ARCHER) \
            TSAN_OPTIONS=ignore_noninstrumented_modules=1:halt_on_error=1:exitcode=66:second_deadlock_stack=1

$(TSAN_DIR)/%: CFLAGS = $(TSAN_OPT) -g
# OpenMPI's flags for the one file that includes mpi.h and for ./train (as the
# Makefile does for build/ and build-san/).
$(TSAN_DIR)/obj/src/train/dist.o: ALL_CFLAGS += $(MPI_CFLAGS)
$(TSAN_DIR)/train: LDLIBS += $(MPI_LIBS)

$(TSAN_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(TSAN_CC) $(ALL_CFLAGS) $(TSAN_FLAGS) -c $< -o $@

$(TSAN_LIB): $(TSAN_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

define tsan_program_rule
$(TSAN_DIR)/$(1): $(TSAN_DIR)/obj/$(2:.c=.o) $(TSAN_LIB)
	$$(TSAN_CC) $$(ALL_CFLAGS) $$(TSAN_FLAGS) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS)
endef
$(foreach m,$(MAIN_SRC),$(eval $(call tsan_program_rule,$(patsubst %_main.c,%,$(notdir $(m))),$(m))))

# The test build of ./train, as for build-san/.
$(TSAN_DIR)/test-programs/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(TSAN_CC) $(ALL_CFLAGS) $(TSAN_FLAGS) -DROPELAB_FAULT_INJECTION -c $< -o $@

$(TSAN_FAULT_TRAIN): LDLIBS += $(MPI_LIBS)
$(TSAN_FAULT_TRAIN): $(call fault_train_objs,$(TSAN_DIR)/obj,$(TSAN_DIR)/test-programs/obj)
	$(TSAN_CC) $(ALL_CFLAGS) $(TSAN_FLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(TSAN_DIR)/tests/%: $(TSAN_DIR)/obj/tests/%.o $(TSAN_TUTIL_OBJ) $(TSAN_LIB)
	@mkdir -p $(dir $@)
	$(TSAN_CC) $(ALL_CFLAGS) $(TSAN_FLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(TEST_LDLIBS)

# clang is installed first, then a new make finds Archer where clang says it is.
tsan:
	@ROPELAB_CLANG_DEPS=1 bash scripts/run/install_deps.sh
	@$(MAKE) -s --no-print-directory tsan-run

tsan-run:
	@test -f '$(ARCHER)' || { echo "tsan: needs clang with libomp and Archer (Debian: clang libomp-dev libclang-rt-dev; $(ARCHER) not found)"; exit 1; }
	@$(MAKE) -s --no-print-directory $(TSAN_PROGRAMS) $(TSAN_TESTS) $(TSAN_FAULT_TRAIN)
	$(call san_make_root,$(TSAN_DIR)/root,$(TSAN_DIR))
	@cd $(TSAN_DIR)/root && $(TSAN_ENV) bash scripts/run/run_tests.sh $(addprefix $(CURDIR)/,$(TSAN_TESTS))

-include $(shell find $(SAN_DIR) $(TSAN_DIR) -name '*.d' 2>/dev/null)
