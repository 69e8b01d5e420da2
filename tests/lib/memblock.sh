# Memory offline for the guest cases (110, 121).  Source after common.sh.
#
# offline_block_of PFNS WHAT: offline the memory block that holds the most
# of PFNS (decimal, one per line) and sets BLK, BLK_PAGES (how many of PFNS
# it held) and BLK_SECS; fails if that does not end within 30 s.
# offline_pages() refuses a block with a hole in it (-EINVAL, "memory
# holes"), as on stock: the top block of a QEMU guest holds the firmware's
# reserved range.  So the block is the one with the most of PFNS among
# those that are wholly "System RAM" in /proc/iomem, online in
# ZONE_MOVABLE and without a reserved page; without one, the case is skipped unless the guest was
# booted with movablecore= (tests/run does), when it fails.
# online_block_again: put BLK back online.
# in_block: how many of the PFNS on stdin lie in BLK.
# cpu_of_node N: the first CPU of node N, or nothing.
# pfn_nodes: "PFN NODE" for each PFN (decimal) on stdin, from the memory
# blocks' nodes in sysfs (memoryB/nodeN).

_mb_bs() { echo $(( 16#$(cat /sys/devices/system/memory/block_size_bytes) )); }

pfn_nodes() {
	awk -v bs="$(_mb_bs)" 'NR == FNR { node[$1] = $2; next } { print $1, node[int($1 * 4096 / bs)] }' \
		<(for l in /sys/devices/system/memory/memory*/node*; do
			b=${l%/node*}; echo "${b##*memory} ${l##*/node}"; done) -
}

# cpu_of_node N: the first CPU of node N (sysfs cpuC/nodeN links), or nothing.
cpu_of_node() {
	local c
	for c in /sys/devices/system/cpu/cpu[0-9]*; do
		[ -e "$c/node$1" ] && { echo "${c##*cpu}"; return; }
	done
}

in_block() {
	local bs
	bs=$(_mb_bs)
	awk -v lo=$((BLK * bs / 4096)) -v hi=$(((BLK + 1) * bs / 4096)) '$1 >= lo && $1 < hi' | wc -l
}

# _mb_no_reserved BLOCK: true if no page of BLOCK is PG_reserved (kpageflags
# bit 32).  Boot-time allocations may land at the top of ZONE_MOVABLE (the
# debug kernel's do), and offline_pages() fails on them as on stock.
_mb_no_reserved() {
	local per=$(( $(_mb_bs) / 4096 ))
	[ -r /proc/kpageflags ] || return 0
	dd if=/proc/kpageflags bs=65536 iflag=skip_bytes,count_bytes \
		skip=$(( $1 * per * 8 )) count=$(( per * 8 )) status=none 2>/dev/null |
		od -An -v -t u8 -w8 |
		awk '{ if (int($1 / 4294967296) % 2) r++ } END { exit r > 0 }'
}

offline_block_of() {
	local pfns=$1 what=$2 bs ram n b n_best=0 st t0
	[ -d /sys/devices/system/memory ] || skip "no memory hotplug in this kernel"
	bs=$(_mb_bs)
	ram=$(awk -F'[- :]+' '/^[0-9a-f]+-[0-9a-f]+ : System RAM$/ { print $1, $2 }' /proc/iomem)
	[ -n "$ram" ] || fail "no System RAM in /proc/iomem"
	_mb_whole() {	# the block lies inside one System RAM range
		local lo hi
		while read -r lo hi; do
			(( 16#$lo <= $1 * bs && 16#$hi >= ($1 + 1) * bs - 1 )) && return 0
		done <<<"$ram"
		return 1
	}
	BLK=
	while read -r n b; do
		[ "$n" -gt "$n_best" ] || continue
		grep -qx 'online' "/sys/devices/system/memory/memory$b/state" 2>/dev/null || continue
		grep -q 'Movable' "/sys/devices/system/memory/memory$b/valid_zones" 2>/dev/null || continue
		_mb_whole "$b" || continue
		_mb_no_reserved "$b" || continue
		BLK=$b n_best=$n
	done < <(awk -v bs="$bs" '{ print int($1 * 4096 / bs) }' <<<"$pfns" | sort -n | uniq -c)
	if [ -z "$BLK" ]; then
		grep -q movablecore= /proc/cmdline &&
			fail "no $what in an online movable memory block without holes, booted with $(grep -o 'movablecore=[^ ]*' /proc/cmdline)"
		skip "no $what in a movable memory block without holes (boot with movablecore=)"
	fi
	BLK_PAGES=$n_best
	st=/sys/devices/system/memory/memory$BLK/state
	info "memory block $BLK ($(cat "/sys/devices/system/memory/memory$BLK/valid_zones" 2>/dev/null)) holds $BLK_PAGES of the $what"
	# offline_pages() gives its reason for a failure with pr_debug() (with
	# CONFIG_DYNAMIC_DEBUG); an unmovable page is dumped with pr_warn().
	echo "file memory_hotplug.c +p" 2>/dev/null >/sys/kernel/debug/dynamic_debug/control || true
	flush_deferred_skbs
	t0=$(date +%s)
	if ! timeout 60 sh -c "echo offline >$st" 2>/tmp/offline.err; then
		# Which page held it up, and whether it is a large folio that
		# left its page cache still referenced (998).
		local orph=
		/usr/bin/python3 -c 'import drgn' 2>/dev/null &&
			orph=$("$SF_ROOT/tools-drgn/sfdrgn" orphans 2>&1 | tail -n 4)
		fail "offlining memory block $BLK failed after $(( $(date +%s) - t0 )) s: $(cat /tmp/offline.err); state $(cat "$st"); $(dmesg | grep -iE 'offlin|unmovable|isolat|migrating pfn' | tail -n 8); $(dmesg | grep -m1 -A3 'migrating pfn'); ${orph:+sfdrgn orphans: $orph; }$(dmesg | tail -n 5)"
	fi
	BLK_SECS=$(( $(date +%s) - t0 ))
	[ "$BLK_SECS" -le 30 ] || fail "offlining memory block $BLK took $BLK_SECS s"
}

online_block_again() {
	local st=/sys/devices/system/memory/memory$BLK/state
	{ echo online_movable >"$st" || echo online >"$st"; } 2>/dev/null || info "block $BLK did not come back online"
}
