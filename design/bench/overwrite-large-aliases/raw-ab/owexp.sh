#!/bin/bash
# Overwrite timing: shared large aliases vs uncached vs private cached.
. "$SF_ROOT/tests/lib/common.sh"
export SCRATCH_MOUNT_OPTS=noatime
scratch_btrfs 0
cd "$SCRATCH_MNT"
btrfs -q subvolume create a >/dev/null
head -c $((128 << 20)) /dev/urandom > /tmp/src
cp /tmp/src a/plain; sync
btrfs -q subvolume snapshot a b >/dev/null; sync
now() { date +%s.%N; }
ow() { local t0 t1; t0=$(now); dd if=/tmp/src of=b/plain bs=1M conv=notrunc status=none; t1=$(now); echo "$1: $(echo "$t1 - $t0" | bc -l | cut -c1-6) s; $(cat $SCRATCH_SYSFS/shared_folio/overwrites 2>/dev/null) overwrites $(cat $SCRATCH_SYSFS/shared_folio/breaks 2>/dev/null) breaks"; sync; btrfs -q subvolume delete b >/dev/null; btrfs -q subvolume snapshot a b >/dev/null; sync; }
for r in 1 2 3; do
	drop_caches; cat a/plain b/plain >/dev/null
	grep -E "^(Cached|Dirty)" /proc/meminfo | tr '\n' ' '; echo
	ow "shared (default)"
	drop_caches
	ow "nothing cached"
	drop_caches; cat b/plain > /dev/null
	ow "b alone cached (lazy: private)"
	drop_caches; cat b/plain b/plain > /dev/null; cat a/plain >/dev/null
	ow "b cached first, a second"
done
