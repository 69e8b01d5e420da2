# tests/lib/mmap.sh: processes that map files (tests/progs/maptouch.c), for
# guest cases; sourced after common.sh.
#
#   mapper I FILE [-P]   start mapper I: it maps FILE, touches every page
#                        and reports to /tmp/mapper.I.0; MAPPER[I] is its pid
#   mapper_wait I K      wait (up to 300 s) for its K-th report
#   pfns_of I K          the PFN of every page in report K, one per line
#   sum_of I K, pss_of I K, rss_of I K   (as the mapper saw them then)
#   flt_of I K           the page faults that touch of every page took
#   pss_now I MATCH      Pss (KiB) now of mapper I's mappings of a path
#                        containing MATCH, from /proc/PID/smaps
#   mapper_stop_all      SIGTERM every mapper, and wait for them
#   audit_expect PTES    the debugfs audit: no mismatch, PTES PTEs in all
#   sfx_begin TAG        before the model checker's mmap runs (103, 129):
#                        counts kernel warnings so far; TAP lines read
#                        "sfx -mTAG: ..."
#   sfx_res OK|"not ok" TEXT, sfx_run NAME SFX-ARGS...   a TAP result; one
#                        run of tests/progs/sfx.c and the audit after it
#   sfx_end              no kernel warning since sfx_begin

MT=$SF_PROGS/maptouch
AUDIT=/sys/kernel/debug/shared_folio/audit
declare -a MAPPER=()

require_maptouch() {
	[ -x "$MT" ] || skip "build/progs/maptouch not built (tests/run builds it on the host)"
	[ -d /sys/kernel/debug/shared_folio ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null
	[ -r "$AUDIT" ] || fail "no $AUDIT in a kernel with shared folios"
	rm -f /tmp/mapper.*
	trap mapper_stop_all EXIT
}

mapper() {
	local i=$1 file=$2
	shift 2
	rm -f "/tmp/mapper.$i".*
	"$MT" "$@" "$file" "/tmp/mapper.$i" &
	MAPPER[i]=$!
}

mapper_wait() {
	local t=0
	while [ ! -f "/tmp/mapper.$1.$2" ]; do
		kill -0 "${MAPPER[$1]}" 2>/dev/null || fail "mapper $1 died before its report $2"
		sleep 0.2
		t=$((t + 1))
		[ $t -le 1500 ] || fail "mapper $1: no report $2 after 300 s"
	done
}

pfns_of() { tail -n +2 "/tmp/mapper.$1.$2" | cut -d' ' -f2; }
_field() { head -n1 "/tmp/mapper.$2.$3" | awk -v f="$1" '{ for (i = 1; i < NF; i++) if ($i == f) print $(i + 1) }'; }
sum_of() { _field sum "$1" "$2"; }
pss_of() { _field pss "$1" "$2"; }
rss_of() { _field rss "$1" "$2"; }
flt_of() { _field flt "$1" "$2"; }

pss_now() {
	awk -v m="$2" '/^[0-9a-f]+-[0-9a-f]+ / { in_ = index($0, m) > 0; next }
		in_ && /^Pss:/ { kb += $2 } END { print kb + 0 }' "/proc/${MAPPER[$1]}/smaps"
}

# pfns_changed A B: how many lines (PFNs, index by index) differ.
pfns_changed() { paste -d' ' <(echo "$1") <(echo "$2") | awk '$1 != $2' | wc -l; }

mapper_stop_all() {
	local i
	for i in "${!MAPPER[@]}"; do kill "${MAPPER[$i]}" 2>/dev/null; done
	for i in "${!MAPPER[@]}"; do wait "${MAPPER[$i]}" 2>/dev/null; done
	MAPPER=()
}

# Mapped file pages in KiB ("Mapped" in /proc/meminfo).
mapped_kb() { awk '/^Mapped:/ { print $2 }' /proc/meminfo; }

# The audit's first line, the physical folios by order: " 0:N 8:M".
audit_orders() { sed -n 's/^orders//p' "$AUDIT"; }

audit_expect() {
	local out
	out=$(cat "$AUDIT") || fail "read $AUDIT"
	info "audit: $(tail -n1 <<<"$out")"
	grep -q 'mismatches 0$' <<<"$out" || fail "audit: $out"
	[ -z "${1:-}" ] || grep -q " ptes $1 mismatches" <<<"$out" ||
		fail "audit: expected $1 PTEs of shared pages: $(tail -n1 <<<"$out")"
}

sfx_begin() {
	SFX_TAG=$1
	SFX_K0=$(dmesg | grep -cE 'WARNING:|BUG:|KASAN|Bad page|possible circular')
}

sfx_res() { echo "TAP $1 - sfx -m$SFX_TAG: $2"; }

sfx_run() {
	local name=$1 u0 h0
	shift
	u0=$(sf_stat unshares) h0=$(sf_stat hits)
	if "$SF_PROGS/sfx" "$@" >/tmp/sfx.out 2>&1; then
		sfx_res ok "$name: $(tail -n1 /tmp/sfx.out | sed 's/^sfx: //'), hits $(( $(sf_stat hits) - h0 )), unshares $(( $(sf_stat unshares) - u0 )); audit: $(tail -n1 "$AUDIT")"
	else
		sfx_res "not ok" "$name: $(tail -n1 /tmp/sfx.out)"; tail -n 40 /tmp/sfx.out
	fi
	grep -q 'mismatches 0$' "$AUDIT" || sfx_res "not ok" "$name: audit after the run: $(cat "$AUDIT")"
}

sfx_end() {
	local k
	k=$(( $(dmesg | grep -cE 'WARNING:|BUG:|KASAN|Bad page|possible circular') - SFX_K0 ))
	if [ "$k" = 0 ]; then
		sfx_res ok "0 kernel warnings"
	else
		sfx_res "not ok" "$k kernel warnings"
		dmesg | grep -E -A5 'WARNING:|BUG:|KASAN|Bad page' | head -40
	fi
}
