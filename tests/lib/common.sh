# tests/lib/common.sh: helpers for guest test cases (sourced, bash).
#
# A case is an executable script in tests/cases/.  It exits 0 to pass,
# 77 to skip (after calling skip "reason"), anything else to fail.  Its
# output goes to a log that the runner shows when it fails.

SF_ROOT=${SF_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# The C programs of tests/progs/, built on the host (tests/run runs their
# one build, make -C tests/progs) into the repository, which the guest shares.
# shellcheck disable=SC2034 # read by the cases
SF_PROGS=$SF_ROOT/build/progs
SCRATCH_MNT=${SCRATCH_MNT:-/mnt/scratch}

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
info() { echo "# $*"; }

# The n-th scratch disk (0-based), or skip when qemu/run gave none.
scratch_dev() {
	local n=${1:-0} i=0 d
	for d in $SF_SCRATCH; do
		[ "$i" = "$n" ] && { echo "$d"; return 0; }
		i=$((i + 1))
	done
	skip "no scratch disk $n (qemu/run --disk SIZE)"
}

require_guest() {
	[ -n "${SF_GUEST:-}" ] || skip "must run inside a qemu/run guest"
}

require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || skip "$c not installed"
	done
}

require_fs() {
	grep -qw "$1" /proc/filesystems || skip "kernel has no $1 support"
}

# Mount btrfs DEV on $SCRATCH_MNT; fail with MESSAGE if it will not.
_scratch_mount() {
	mount -t btrfs ${SCRATCH_MOUNT_OPTS:+-o "$SCRATCH_MOUNT_OPTS"} "$1" "$SCRATCH_MNT" ||
		fail "$2"
	SCRATCH_DEV=$1
	# Found once: running btrfs(8) later would grow the page cache (9p).
	SCRATCH_SYSFS=$(btrfs_sysfs)
	_scratch_knobs
}

# SF_LAZY=0: a case about what aliases do, with one reader, shares that
# reader's reads too (lazy sharing off; it has its own cases, 117 and 118).
# The knob is per mount: set again after every mount.
# SF_MAX_ORDER: the cap on physical folio orders (8 by default; 0 keeps
# them order 0, as before large physical folios).
# SF_LARGE_ALIASES: 0 installs an alias a page for read() too, as before
# large aliases (1 by default).
_scratch_knobs() {
	[ -n "${SF_LAZY:-}" ] && [ -f "$SCRATCH_SYSFS/shared_folio/lazy" ] &&
		echo "$SF_LAZY" >"$SCRATCH_SYSFS/shared_folio/lazy"
	[ -n "${SF_MAX_ORDER:-}" ] && [ -f "$SCRATCH_SYSFS/shared_folio/max_order" ] &&
		echo "$SF_MAX_ORDER" >"$SCRATCH_SYSFS/shared_folio/max_order"
	[ -n "${SF_LARGE_ALIASES:-}" ] && [ -f "$SCRATCH_SYSFS/shared_folio/large_aliases" ] &&
		echo "$SF_LARGE_ALIASES" >"$SCRATCH_SYSFS/shared_folio/large_aliases"
	return 0
}

# mkfs a btrfs on the n-th scratch disk and mount it on $SCRATCH_MNT.
scratch_btrfs() {
	local dev
	require_guest
	require_cmd mkfs.btrfs btrfs
	require_fs btrfs
	dev=$(scratch_dev "${1:-0}") || exit 77
	shift || true
	mkdir -p "$SCRATCH_MNT"
	umount "$SCRATCH_MNT" 2>/dev/null
	mkfs.btrfs -q -f "$@" "$dev" >/dev/null || fail "mkfs.btrfs $* $dev"
	_scratch_mount "$dev" "mount $dev"
}

# Mount scratch disk N as it is (no mkfs): a filesystem a previous run left.
scratch_mount_existing() {
	local dev
	require_guest
	require_fs btrfs
	dev=$(scratch_dev "${1:-0}") || exit 77
	mkdir -p "$SCRATCH_MNT"
	umount "$SCRATCH_MNT" 2>/dev/null
	_scratch_mount "$dev" "mount $dev (not the btrfs a previous run left?)"
}

scratch_cycle() {
	umount "$SCRATCH_MNT" || fail "umount $SCRATCH_MNT"
	mount -t btrfs ${SCRATCH_MOUNT_OPTS:+-o "$SCRATCH_MOUNT_OPTS"} "$SCRATCH_DEV" "$SCRATCH_MNT" ||
		fail "remount $SCRATCH_DEV"
	_scratch_knobs
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# Free the skbs that wait on each CPU's deferred-free list: a loopback
# datagram from a CPU runs NET_RX there, which empties it
# (skb_defer_free_flush()).  A receive on another CPU than the send queues
# them there (skb_attempt_defer_free()), and in a guest without a NIC
# nothing else runs NET_RX: skbs of a sendfile() of a shared file would
# keep its physical folio (027).  Stock 6.12 behaviour; called before a
# memory offline and before the scan for orphans.
flush_deferred_skbs() {
	local cpu
	[ -d /proc/sys/net/ipv4 ] || return 0
	for cpu in $(seq 0 $(( $(nproc --all) - 1 ))); do
		grep -qx 1 "/sys/devices/system/cpu/cpu$cpu/online" 2>/dev/null || [ "$cpu" = 0 ] || continue
		taskset -c "$cpu" /usr/bin/python3 -c 'import socket
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9))' 2>/dev/null
	done
	return 0
}

# no_orphans_left: once the skbs that wait on any CPU's list are freed, no
# large folio may be left outside any mapping (sfdrgn orphans: its last 20
# lines printed, all of it kept in ORPHANS_OUT).  For a guest with drgn.
no_orphans_left() {
	local rc
	flush_deferred_skbs
	ORPHANS_OUT=$("$SF_ROOT/tools-drgn/sfdrgn" orphans 2>&1); rc=$?
	echo "$ORPHANS_OUT" | tail -n 20
	case $rc in
	0) ;;
	1) fail "$(grep -c '^orphan:' <<<"$ORPHANS_OUT") large folio(s) left outside any mapping: $(grep '^orphan:' <<<"$ORPHANS_OUT" | head -n 3 | tr '\n' ';')";;
	*) fail "sfdrgn orphans: $ORPHANS_OUT";;
	esac
}

# Page cache in KiB ("Cached" in /proc/meminfo).
cached_kb() { awk '/^Cached:/ { print $2 }' /proc/meminfo; }
# HardwareCorrupted in KiB (/proc/meminfo): pages taken out by memory failure.
hw_corrupted_kb() { awk '/^HardwareCorrupted:/ { print $2 }' /proc/meminfo; }

# Deterministic pseudo-random data: gen_data FILE MIB SEED
gen_data() {
	openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass pass:"$3" -in /dev/zero 2>/dev/null |
		head -c "$(( $2 * 1048576 ))" >"$1"
	[ "$(stat -c %s "$1")" = $(( $2 * 1048576 )) ] || fail "gen_data $1 $2 MiB"
}

# Compressible text, every page different from every other (btrfs
# compresses it about tenfold): gen_text FILE MIB
gen_text() {
	seq -f '%015.0f compressible text of a shared file' 0 $(($2 * 1048576 / 48 + 1)) |
		head -c "$(( $2 * 1048576 ))" >"$1"
	[ "$(stat -c %s "$1")" = $(( $2 * 1048576 )) ] || fail "gen_text $1 $2 MiB"
}

# FILE holds STR at byte OFF: bytes_are FILE OFF STR
bytes_are() { dd if="$1" bs=1 skip="$2" count=${#3} status=none | cmp -s - <(printf %s "$3"); }

# The sysfs directory of the btrfs mounted on $SCRATCH_MNT.
btrfs_sysfs() {
	local uuid
	uuid=$(btrfs filesystem show "$SCRATCH_MNT" | awk '/uuid:/ { print $NF }')
	echo "/sys/fs/btrfs/$uuid"
}

# Skip unless this kernel shares btrfs page cache.
require_sharing() {
	[ -f "$SCRATCH_SYSFS/shared_folio/enabled" ] ||
		skip "kernel without shared folios (no shared_folio/ in btrfs sysfs)"
}

# The debug kernel (KASAN, kmemleak): its large allocations fail far more
# often (the first 122 run there got orders 1 to 8 where the normal kernel
# gets 8), so cases report density figures there instead of asserting them.
debug_kernel() {
	[ -e /sys/kernel/debug/kmemleak ] || dmesg | grep -q 'KernelAddressSanitizer initialized'
}

sf_stat() { cat "$SCRATCH_SYSFS/shared_folio/$1"; }

# Sectors read from a block device so far.
dev_read_sectors() { awk '{ print $3 }' "/sys/block/${1#/dev/}/stat"; }
# dev_read_ios DEV: read requests completed (field 1 of the same file).
dev_read_ios() { awk '{ print $1 }' "/sys/block/${1#/dev/}/stat"; }
# vmstat_of NAME: the /proc/vmstat counter NAME, per-CPU deltas folded in.
vmstat_of() { echo 1 >/proc/sys/vm/stat_refresh; awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }

# expect_same FILE REF: contents equal, or fail with the first difference.
expect_same() {
	cmp "$1" "$2" >/tmp/cmp.out 2>&1 || fail "$1 differs from $2: $(head -c 200 /tmp/cmp.out)"
}
