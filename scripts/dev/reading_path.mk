# make reading-path: the functions one training step runs, in the order it
# first enters them, with their files and lengths (scripts/dev/reading_path.py),
# on the reference engine and on the one matmul = auto picks. The library is
# compiled again, unoptimised and with -finstrument-functions (every entry,
# inlined functions too, calls the driver's hook), into build/reading-path/;
# dist.c without MPI (the driver trains no ranks).
RP_DIR := build/reading-path
RP_OBJ := $(patsubst %.c,$(RP_DIR)/obj/%.o,$(LIB_SRC))
RP_CFLAGS = $(filter-out -O% -march=% -g,$(ALL_CFLAGS)) -O0 -gdwarf-4 -finstrument-functions

$(RP_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(CC) $(RP_CFLAGS) -c $< -o $@

$(RP_DIR)/libropelab.a: $(RP_OBJ)
	@rm -f $@ && ar rcs $@ $^

$(RP_DIR)/reading_path: scripts/dev/reading_path.c $(RP_DIR)/libropelab.a
	@$(CC) $(filter-out -MMD -MP,$(ALL_CFLAGS)) -no-pie -o $@ $^ $(LDLIBS)

.PHONY: reading-path
reading-path: $(RP_DIR)/reading_path
	@/usr/bin/python3 scripts/dev/reading_path.py $(RP_DIR)/reading_path
