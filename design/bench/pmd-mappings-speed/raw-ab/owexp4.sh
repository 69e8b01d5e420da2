#!/bin/bash
# Overwrite of a shared, cached 128 MiB file with dd bs=1M (make bench's
# overwrite_shared), 4 times in one boot, default settings.
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
[ -z "${MO:-}" ] || echo "$MO" >$K/max_order
for r in 1 2 3 4; do
	drop_caches; cat a/plain b/plain >/dev/null
	b0=$(cat $K/breaks) t0=$(now)
	dd if=/tmp/src of=b/plain bs=1M conv=notrunc status=none
	t1=$(now)
	echo "$(uname -v | cut -c1-3) max_order=$(cat $K/max_order) overwrite: $(echo "$t1 - $t0" | bc -l | cut -c1-6) s; breaks +$(( $(cat $K/breaks) - b0 ))"
	sync; btrfs -q subvolume delete b >/dev/null; btrfs -q subvolume snapshot a b >/dev/null; sync
done
