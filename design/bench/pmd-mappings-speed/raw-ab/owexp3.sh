#!/bin/bash
# A/B in one boot: max_order 9 (default) against 8, overwrite of a shared,
# cached 128 MiB file with dd bs=1M, as make bench's overwrite_shared.
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
AUDIT=/sys/kernel/debug/shared_folio/audit
[ -r $AUDIT ] || mount -t debugfs none /sys/kernel/debug
ow() { local t0 t1 b0; b0=$(cat $K/breaks); t0=$(now); dd if=/tmp/src of=b/plain bs=1M conv=notrunc status=none; t1=$(now); echo "$1: $(echo "$t1 - $t0" | bc -l | cut -c1-6) s; breaks +$(( $(cat $K/breaks) - b0 ))"; sync; btrfs -q subvolume delete b >/dev/null; btrfs -q subvolume snapshot a b >/dev/null; sync; }
for r in 1 2 3; do
	for mo in 9 8; do
		echo $mo > $K/max_order
		drop_caches; cat a/plain b/plain >/dev/null
		echo -n "max_order=$mo $(sed -n 's/^alias orders/alias orders/p' $AUDIT) | "
		ow "overwrite"
	done
done
