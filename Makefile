# Shared folios for shared btrfs extents: build, boot, test, measure.
# See README.md.  Every target installs what it needs (qemu/deps).

SHELL := /bin/bash
ROOT := $(CURDIR)
BZ_PATCHED := build/obj-patched/arch/x86/boot/bzImage
BZ_STOCK := build/obj-stock/arch/x86/boot/bzImage
BZ_DEBUG := build/obj-debug/arch/x86/boot/bzImage

.PHONY: all deps kernel stock debug demo check check-host check-guest \
	check-debug soak bench bench-drgn sync check-sync checkpatch bisect clean distclean help

all: kernel

help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

## deps        install the Debian packages the project uses
deps:
	@qemu/deps

## kernel      build the patched guest kernel (build/obj-patched)
kernel: deps
	@qemu/kbuild patched >/dev/null

## stock       build the same config without the series (build/obj-stock)
stock: deps
	@qemu/kbuild stock >/dev/null

## debug       build the debug flavour (KASAN, lockdep, DEBUG_VM, kmemleak)
debug: deps
	@qemu/kbuild debug >/dev/null

## demo        build, boot, and show what sharing does (the main job)
demo: kernel
	@qemu/run -k $(BZ_PATCHED) -t 1800 --disk 4G -- qemu/demo

## check       build and run the tests; last line "N passed, N failed"
check: kernel check-sync
	@tests/run -k $(BZ_PATCHED)

check-host: kernel
	@tests/run -k $(BZ_PATCHED) --host-only

check-guest: kernel
	@tests/run -k $(BZ_PATCHED) --guest-only

## check-debug the guest suite and the model checker on the debug kernel;
##             fails on any KASAN, lockdep, VM_BUG, WARN or kmemleak report;
##             DEBUG_CASES='026* 090*' runs only those cases
DEBUG_SFX_OPS ?= 10000
DEBUG_CASES ?=
check-debug: debug
	@rc=0; SF_CASE_TIMEOUT=5400 SF_SUITE_TIMEOUT=14400 SFX_OPS=$(DEBUG_SFX_OPS) \
		tests/run -k $(BZ_DEBUG) --guest-only $(DEBUG_CASES) || rc=1; \
	tests/debug-scan build/test-logs/guest-dmesg.log || rc=1; exit $$rc

## soak        model checker soak: SOAK_OPS (10,000,000) operations, ops/s; SOAK_SECONDS and SOAK_RESUME=DIR run it in segments
soak: kernel
	@tests/soak -k $(BZ_PATCHED)

## bench       benchmarks, patched against stock in the same run
bench: kernel stock
	@tests/bench/run $(BZ_STOCK) $(BZ_PATCHED)

## bench-drgn  time live drgn looks over the gdbstub at 1 GiB of shared data
bench-drgn: kernel
	@tests/bench/drgn-live -k $(BZ_PATCHED)

## sync        refresh mm-sharedfolio/ and fs-btrfs/ from the series
sync:
	@qemu/sync-copies --write

## check-sync  fail if mm-sharedfolio/ or fs-btrfs/ differ from the series
check-sync:
	@qemu/sync-copies --check

## checkpatch  run scripts/checkpatch.pl on every patch of the series
checkpatch: deps
	@qemu/checkpatch

## bisect      build every prefix of the series (bisectability)
bisect: deps
	@n=$$(grep -v '^\s*\(#\|$$\)' patches/series | grep -cv 'cover-letter'); \
	for i in $$(seq 1 $$n); do qemu/kbuild -q prefix:$$i >/dev/null || exit 1; done; \
	echo "all $$n prefixes of the series build"

clean:
	rm -rf build/obj-* build/test-logs

distclean:
	rm -rf build
