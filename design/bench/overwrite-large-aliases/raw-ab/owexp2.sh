#!/bin/bash
. "$SF_ROOT/tests/lib/common.sh"
export SCRATCH_MOUNT_OPTS=noatime
scratch_btrfs 0
cd "$SCRATCH_MNT"
btrfs -q subvolume create a >/dev/null
head -c $((128 << 20)) /dev/urandom > /tmp/src
cp /tmp/src a/plain; sync
btrfs -q subvolume snapshot a b >/dev/null; sync
now() { date +%s.%N; }
K=$SCRATCH_SYSFS/shared_folio
ow() { local t0 t1; t0=$(now); dd if=/tmp/src of=b/plain bs=1M conv=notrunc status=none; t1=$(now); echo "$1: $(echo "$t1 - $t0" | bc -l | cut -c1-6) s; large $(cat $K/large_alias_count) before"; sync; btrfs -q subvolume delete b >/dev/null; btrfs -q subvolume snapshot a b >/dev/null; sync; }
for r in 1 2 3 4; do
	for la in 1 0; do
		echo $la > $K/large_aliases
		drop_caches; cat a/plain b/plain >/dev/null
		echo -n "la=$la large_alias_count=$(cat $K/large_alias_count) aliases=$(cat $K/aliases) | "
		ow "overwrite"
	done
done
