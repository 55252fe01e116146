# ropelab build.  `make` builds the programs, `make test` runs the cmocka suite.
#
# Layout convention (so new files need no Makefile edit):
#   src/*/NAME_main.c   -> the program ./NAME   (train, sample, eval, prepare, ...)
#   src/*/*.c (others)  -> build/libropelab.a, linked into every program and test
#   tests/test_*.c      -> build/tests/test_*, each a cmocka binary run by `make test`
#   tests/util_*.c      -> shared test helpers, linked into every test
#   bench/bench_*.c     -> build/bench_*, benchmarks (not run by `make test`; bench/README.md)

CC      ?= gcc
# -march=native where the compiler accepts it (portable fallback: plain -O3).
MARCH   := $(shell $(CC) -march=native -E -x c /dev/null >/dev/null 2>&1 && echo -march=native)
OPT     ?= -O3 $(MARCH)
# CFLAGS and LDFLAGS are the user's (`make CFLAGS=-O1` replaces them); the
# flags the code needs to build at all are in ALL_CFLAGS, which always has them.
CFLAGS  ?= $(OPT) -g
# -fno-math-errno: sqrtf etc. never set errno (nothing here reads errno after
# a maths call), so they compile to single instructions and loops over them
# vectorise (AdamW's update). Not -ffast-math: float semantics stay IEEE.
# -ffp-contract=off: a*b + c is never fused into one FMA behind the code's
# back, so the same source rounds the same whatever -march enables (with the
# fixed-order sums of src/engine/kernels.h, a run's log is the same on every
# x86-64 CPU; docs/TRAINING.md, "Bit for bit on any CPU").
# -fno-trapping-math: no code here traps on or reads the floating-point
# exception flags, so the compiler may evaluate both sides of a float
# comparison; without it GCC keeps exp_fast's clamps (x < -87 ? -87 : x) as
# branches and no loop over exp_fast or tanh_fast vectorises (the softmaxes,
# cross-entropy, GELU). It changes no value: each element still gets the
# same IEEE operations in the same order.
ALL_CFLAGS = -fno-math-errno -fno-trapping-math -ffp-contract=off -std=c11 -D_GNU_SOURCE -fopenmp -Wall -Wextra -Wno-unused-parameter \
             -Isrc -MMD -MP $(CFLAGS)
LDLIBS  := -lopenblas -ldnnl -lcjson -linih -lm
TEST_LDLIBS := -lcmocka
# Open MPI, for data-parallel ./train (`mpirun -np N ./train`): MPI=1 compiles
# src/train/dist.c, the one file that includes mpi.h, with -DROPELAB_MPI and
# the flags of the mpicc wrapper (Debian: openmpi-bin, libopenmpi-dev), and
# links ./train with libmpi; MPI=0 builds a ./train for one process, which
# refuses to start under mpirun. The default is 1 where mpicc is found
# (`make MPI=0` builds without it anyway: make test-no-mpi). dist.o is compiled
# again when MPI changes (build/mpi.setting remembers it).
ifndef MPI
MPI := $(if $(shell command -v mpicc 2>/dev/null),1,0)
endif
MPI_CFLAGS = $(if $(filter 1,$(MPI)),-DROPELAB_MPI $(shell mpicc --showme:compile 2>/dev/null))
MPI_LIBS   = $(if $(filter 1,$(MPI)),$(shell mpicc --showme:link 2>/dev/null))
MPI_INSTALL = sudo apt-get update && sudo apt-get install -y openmpi-bin libopenmpi-dev
MPI_MISSING = MPI=1 but Open MPI is missing (mpicc not found); run\n  $(MPI_INSTALL)\n(or: sudo bash scripts/run/install_deps.sh)
# What dist.o's compilation says it built.
MPI_BUILT = $(if $(filter 1,$(MPI)),./train: with Open MPI (mpirun -np N ./train trains data-parallel),$(if \
  $(filter file,$(origin MPI)),./train: without MPI (mpicc not found): one process; it refuses to start under \
  mpirun. For mpirun -np N ./train: $(MPI_INSTALL); then make,./train: without MPI (MPI=$(MPI)): one process; it \
  refuses to start under mpirun))

LIB_SRC   := $(filter-out %_main.c,$(wildcard src/*/*.c))
MAIN_SRC  := $(wildcard src/*/*_main.c)
PROGRAMS  := $(patsubst %_main.c,%,$(notdir $(MAIN_SRC)))
TEST_SRC  := $(wildcard tests/test_*.c)
TESTS     := $(patsubst tests/%.c,build/tests/%,$(TEST_SRC))
# The tests whose verdicts OpenBLAS's kernels cannot change: no matrix
# product runs in them (tokenizers, data, files, the reports' Python, the
# docs, the include graph), or, in test_reading_path, products run only to
# count which code runs. make test-kernels (CI's second pass, under
# OPENBLAS_CORETYPE=Haswell) leaves them out; make test runs them.
KERNEL_FREE_TESTS := test_atomic_file test_data_bpe test_data_corpus test_data_loader test_data_prepare \
                     test_data_pretokenize test_data_tokens test_deps test_docs test_frontier_report \
                     test_sweep_report test_reading_path test_fuzz_regress
$(if $(filter-out $(notdir $(TESTS)),$(KERNEL_FREE_TESTS)),\
  $(error KERNEL_FREE_TESTS names no test: $(filter-out $(notdir $(TESTS)),$(KERNEL_FREE_TESTS))))
TUTIL_SRC := $(wildcard tests/util_*.c)
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCHES   := $(patsubst bench/%.c,build/%,$(BENCH_SRC))

LIB_OBJ   := $(patsubst %.c,build/%.o,$(LIB_SRC))
TUTIL_OBJ := $(patsubst %.c,build/%.o,$(TUTIL_SRC))
LIB       := build/libropelab.a

# The test build of ./train, build/test-programs/train: ./train with the fault
# injection of src/train/fault_inject.h (a crash in a save, log writes that
# fail, SIGINT at a step, a perturbed weight; ROPELAB_TEST_* variables), which
# the shipped ./train does not contain. The sources that include that header
# (found by grep: no list to keep) are compiled again with
# -DROPELAB_FAULT_INJECTION into build/test-programs/obj/; every other object
# is ./train's own. The tests run it as TRAIN_WITH_FAULTS (tests/util_run.h);
# the test binaries that do are built after it, `make test` builds it too.
FAULT_DIR       := build/test-programs
TRAIN_SRC       := $(LIB_SRC) $(filter %/train_main.c,$(MAIN_SRC))
FAULT_SRC       := $(shell grep -l '^\#include "train/fault_inject.h"' $(TRAIN_SRC))
# $(call fault_train_objs,OBJ_DIR,FAULT_OBJ_DIR): its objects (also for the
# sanitizer builds, tests/sanitize.mk).
fault_train_objs = $(patsubst %.c,$(2)/%.o,$(FAULT_SRC)) $(patsubst %.c,$(1)/%.o,$(filter-out $(FAULT_SRC),$(TRAIN_SRC)))
FAULT_TRAIN_OBJ := $(call fault_train_objs,build,$(FAULT_DIR)/obj)
FAULT_TESTS     := $(patsubst tests/%.c,%,$(shell grep -l TRAIN_WITH_FAULTS $(TEST_SRC)))

.PHONY: all test test-kernels test-llamacpp test-no-mpi bench bench-data bench-mpi run compare reproduce clean
all: $(PROGRAMS)

build/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(FAULT_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DROPELAB_FAULT_INJECTION -c $< -o $@

# The flags a run records in RUN_DIR/machine.txt (src/common/machine.c).
build/src/common/machine.o: ALL_CFLAGS += -DROPELAB_BUILD_FLAGS='"$(strip $(CFLAGS))"'

# build/mpi.setting holds the MPI of the last build; it is rewritten (and
# the dist.o files that depend on it are compiled again) only when MPI changes.
build/mpi.setting: FORCE
	@mkdir -p $(dir $@)
	@echo '$(MPI)' | cmp -s - $@ || echo '$(MPI)' >$@
.PHONY: FORCE
build/src/train/dist.o: src/train/dist.c build/mpi.setting
	@[ '$(MPI)' = 0 ] || command -v mpicc >/dev/null || { printf '%b\n' "$(MPI_MISSING)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(MPI_CFLAGS) -c $< -o $@
	@echo '$(MPI_BUILT)'
train $(FAULT_DIR)/train: LDLIBS += $(MPI_LIBS)
# The fuzz and sanitizer builds compile every library file again
# (tests/fuzz/fuzz.mk, tests/sanitize.mk).
build/fuzz/obj/src/train/dist.o: FUZZ_CFLAGS += $(MPI_CFLAGS)
build-san/obj/src/train/dist.o: ALL_CFLAGS += $(MPI_CFLAGS)
build-san/obj/src/train/dist.o build-tsan/obj/src/train/dist.o: build/mpi.setting
build-san/train: LDLIBS += $(MPI_LIBS)

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# ./train, ./sample, ... from src/*/NAME_main.c
define program_rule
$(1): build/$(2:.c=.o) $(LIB)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $$@ $$^ $$(LDLIBS)
endef
$(foreach m,$(MAIN_SRC),$(eval $(call program_rule,$(patsubst %_main.c,%,$(notdir $(m))),$(m))))

$(FAULT_DIR)/train: $(FAULT_TRAIN_OBJ)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(addprefix build/tests/,$(FAULT_TESTS)): | $(FAULT_DIR)/train

build/tests/%: build/tests/%.o $(TUTIL_OBJ) $(LIB)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(TEST_LDLIBS)

build/bench_%: build/bench/bench_%.o $(TUTIL_OBJ) $(LIB)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(TEST_LDLIBS)

# Every test binary runs even if one fails; the summary line counts them.
# On a clean machine it installs what the tests need first (as root; otherwise
# it prints the one apt line and fails), so no test is skipped for a missing package.
test:
	@bash scripts/run/install_deps.sh
	@$(MAKE) -s --no-print-directory $(PROGRAMS) $(FAULT_DIR)/train $(TESTS)
	@bash scripts/run/run_tests.sh $(TESTS)

# make test but for KERNEL_FREE_TESTS, which it names: the tests another set
# of OpenBLAS kernels could change.
test-kernels:
	@bash scripts/run/install_deps.sh
	@$(MAKE) -s --no-print-directory $(PROGRAMS) $(FAULT_DIR)/train $(TESTS)
	@echo "test-kernels: left out, as OpenBLAS's kernels cannot change them (make test runs them): $(KERNEL_FREE_TESTS)"
	@bash scripts/run/run_tests.sh $(filter-out $(addprefix build/tests/,$(KERNEL_FREE_TESTS)),$(TESTS))

# ./train as a machine without Open MPI builds it (make MPI=0, in a tree of its
# own, build/no-mpi/), trained beside the ./train of this build: the same log
# and model, bit for bit; under mpirun it must refuse (tests/no_mpi_check.sh).
test-no-mpi: train prepare
	@bash tests/no_mpi_check.sh

# The exported models run in llama.cpp (tests/llamacpp_check.c); it runs make run first
# and installs node-llama-cpp from tests/llamacpp/package-lock.json (tests/llamacpp/run.sh).
test-llamacpp:
	@bash tests/llamacpp/run.sh

bench-data: $(PROGRAMS) $(BENCHES)
	@bash bench/bench_data.sh

# On a clean machine: install what is missing first (python3-torch for the
# PyTorch side), then build, then measure.
bench:
	@bash scripts/run/install_deps.sh
	@$(MAKE) -s --no-print-directory $(PROGRAMS) $(BENCHES)
	@bash bench/bench.sh

# Data-parallel speed: ./train np=1 x 2 threads against np=2 x 1 thread, and
# PyTorch DDP (gloo) the same way (bench/bench_mpi.sh).
bench-mpi:
	@bash scripts/run/install_deps.sh
	@$(MAKE) -s --no-print-directory $(PROGRAMS) build/bench_model
	@bash bench/bench_mpi.sh

# The all-reduce cost model against a shaped link: 2 ranks in two network
# namespaces joined by a veth pair shaped with tc (root; bench/link/bench_link.sh).
.PHONY: bench-link
bench-link:
	@$(MAKE) -s --no-print-directory $(PROGRAMS)
	@bash bench/link/bench_link.sh

run:
	@bash scripts/run/run.sh

compare: $(PROGRAMS)
	@bash scripts/run/compare.sh --setup $(if $(QUICK),quick,$(or $(SETUP),default)) $(if $(JOBS),--jobs $(JOBS)) $(if $(RETRAIN),--retrain)

# make reproduce RUN=RUN_DIR (or RUN=STUDY/logs/VARIANT-sSEED.csv) [STEPS=N]: trains the
# run again on its recorded data and says "bit-identical" or where its log first differs
# (scripts/run/reproduce.sh; it builds the programs itself, under scripts/run/build.sh's lock).
reproduce:
	@bash scripts/run/reproduce.sh "$(RUN)" $(if $(STEPS),--steps "$(STEPS)")

include scripts/dev/reading_path.mk

clean: clean-sanitize
	rm -rf build $(PROGRAMS)

# libFuzzer targets (make fuzz) and the sanitizer build (make sanitize):
# their own rules, next to their sources.
-include tests/fuzz/fuzz.mk
-include tests/sanitize.mk

-include $(shell find build -path build/no-mpi -prune -o -name '*.d' -print 2>/dev/null)
.SECONDARY:
