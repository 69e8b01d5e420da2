# Shared folios for shared btrfs extents: build, boot, test, measure.
# See README.md.  Every target installs what it needs (qemu/deps).
#
# Kernels are built by qemu/kbuild FLAVOUR, which prints the bzImage's path
# on stdout; the recipes boot what it prints.  Where things are is defined
# once, in qemu/lib.sh.  Knobs reach the guest only through qemu/run --env.

SHELL := /bin/bash

.PHONY: all deps kernel stock debug rfc progs demo check check-host check-guest \
	check-debug soak bench bench-drgn fstests sync check-sync checkpatch bisect dev-tree \
	clean distclean help

all: kernel

help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

## deps        install the Debian packages the project uses
deps:
	@qemu/deps

## kernel      build the patched guest kernel; prints its bzImage
kernel: deps
	@bz=$$(qemu/kbuild patched) && echo "kernel: $$bz"

## stock       build the same config without the series
stock: deps
	@bz=$$(qemu/kbuild stock) && echo "stock: $$bz"

## debug       build the debug flavour (KASAN, lockdep, DEBUG_VM, kmemleak)
debug: deps
	@bz=$$(qemu/kbuild debug) && echo "debug: $$bz"

## rfc         build the 2021 RFC approach for comparison (patches/rfc2021,
##             mount option sharedext)
rfc: deps
	@bz=$$(qemu/kbuild rfc) && echo "rfc: $$bz"

## progs       build the C programs of the tests, the demo, the soak and the
##             benchmarks (tests/progs/*.c) into build/progs/; the one build
##             every recipe uses (make -C tests/progs [NAME...])
progs: deps
	@$(MAKE) --no-print-directory -C tests/progs

## demo        build, boot, and show what sharing does (the main job);
##             DEMO_N sharers (8) of a DEMO_MIB MiB file (128)
demo: deps
	@$(MAKE) -s --no-print-directory -C tests/progs maptouch && \
	bz=$$(qemu/kbuild patched) && \
	qemu/run -k "$$bz" -t 1800 --disk 4G --env DEMO_N --env DEMO_MIB -- qemu/demo

## check       check-sync, then build and run the tests; last line "N passed, N failed"
check: check-sync deps
	@bz=$$(qemu/kbuild patched) && tests/run -k "$$bz"

check-host: deps
	@bz=$$(qemu/kbuild patched) && tests/run -k "$$bz" --host-only

check-guest: deps
	@bz=$$(qemu/kbuild patched) && tests/run -k "$$bz" --guest-only

## check-debug the guest suite and the model checker on the debug kernel;
##             fails on any KASAN, lockdep, VM_BUG, WARN or kmemleak report;
##             DEBUG_CASES='026* 090*' runs only those cases
DEBUG_SFX_OPS ?= 10000
DEBUG_CASES ?=
check-debug: deps
	@bz=$$(qemu/kbuild debug) || exit 1; rc=0; \
	SF_CASE_TIMEOUT=5400 SF_SUITE_TIMEOUT=14400 SFX_OPS=$(DEBUG_SFX_OPS) SF_DRGN_SECS=2400 \
		tests/run -k "$$bz" --guest-only $(DEBUG_CASES) || rc=1; \
	tests/debug-scan build/test-logs/guest-dmesg-*.log || rc=1; exit $$rc

## soak        model checker soak: SOAK_OPS (10,000,000) operations, ops/s; SOAK_SECONDS and SOAK_RESUME=DIR run it in segments
soak: deps
	@bz=$$(qemu/kbuild patched) && tests/soak -k "$$bz"

## bench       benchmarks: stock, patched, patched with drop_behind, overlayfs and
##             the 2021 RFC (make rfc) booted alternately; build/bench/<date>/
##             results.md, results.json, plots/; BENCH_QUICK=1 for a short run
bench: deps
	@qemu/kbuild stock >/dev/null && qemu/kbuild patched >/dev/null && \
	{ [ "$${BENCH_RFC:-1}" = 0 ] || qemu/kbuild rfc >/dev/null; } && tests/bench/run

## bench-drgn  time live drgn looks over the gdbstub at 1 GiB of shared data
bench-drgn: deps
	@bz=$$(qemu/kbuild patched) && tests/bench/drgn-live -k "$$bz"

## fstests     a quick btrfs/generic fstests group (tests/fstests/quick.list) on the
##             patched and the stock kernel; prints what fails on patched only;
##             FSTESTS=/path/to/a/built/fstests (README.md, "fstests")
FSTESTS ?=
fstests: deps
	@tests/fstests/run --check-fstests "$(FSTESTS)" && \
	p=$$(qemu/kbuild patched) && s=$$(qemu/kbuild stock) && \
	tests/fstests/run "$(FSTESTS)" "$$p" "$$s"

## sync        rewrite mm-sharedfolio/ and fs-btrfs/ from the patch text (seconds)
sync:
	@patches/tools/sync --write

## check-sync  fail if mm-sharedfolio/ or fs-btrfs/ differ from the patch text
check-sync:
	@patches/tools/sync --check

## checkpatch  checkpatch.pl --strict on every patch, kernel-doc on the files it adds
checkpatch: deps
	@patches/tools/checkpatch

## bisect      build every prefix of the series, CONFIG_SHARED_FOLIO on and off
bisect: deps
	@patches/tools/bisect

## dev-tree    make build/dev (branch dev: base + the series) to develop the series in
dev-tree: deps
	@patches/tools/dev-tree

clean:
	rm -rf build/obj-* build/test-logs build/bisect build/progs

distclean:
	rm -rf build
