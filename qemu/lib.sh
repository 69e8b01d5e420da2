# shellcheck shell=bash disable=SC2120
# qemu/lib.sh: what the harness and the series tools know about the build,
# in one place.  Sourced (bash) by qemu/*, patches/tools/*, tests/* and the
# Makefile; defines SF_TOP, SF_BUILD, SF_PROGS and the sf_* functions below,
# nothing else, and changes no shell option.
#
# SF_PROGS, build/progs/, holds the C programs of tests/progs/ that the
# guest runs, built by their one build, tests/progs/Makefile
# (make -C tests/progs [NAME...]); the guest finds them there through the
# repository's share (tests/lib/common.sh sets SF_PROGS alike).
#
# Build flavours (qemu/kbuild FLAVOUR builds one):
#   patched       base + patches/series, qemu/guest.config         build/obj-patched
#   stock         base only, the same config                      build/obj-stock
#   debug         base + series, guest.config + debug.config      build/obj-debug
#   prefix:N      base + the first N patches, guest.config        build/obj-prefix
#   prefix-off:N  the same with CONFIG_SHARED_FOLIO* off          build/obj-prefix-off
#   rfc           base + patches/rfc2021/series (the 2021 RFC      build/obj-rfc
#                 approach, for comparison), CONFIG_SHARED_FOLIO* off
#
# Functions (each prints one path or list on stdout):
#   sf_flavour_ok FLAVOUR    status 0 if FLAVOUR is one of the above
#   sf_objdir FLAVOUR        the object directory of FLAVOUR
#   sf_bzimage [FLAVOUR]     its bzImage; sf_bzimage patched is the default
#                            kernel of every script: build/obj-patched/arch/x86/boot/bzImage
#   sf_vmlinux [FLAVOUR]     its vmlinux (with debug info, for drgn)
#   sf_vmlinux_of BZIMAGE    the vmlinux built with BZIMAGE; status 1 if none
#   sf_kernel BZIMAGE|FLAVOUR  a bzImage path given either (for -k options)
#   sf_fragment FLAVOUR      the config fragment of FLAVOUR (its text)
#   sf_series_patches [N]    the patches of patches/series in order, the
#                            cover letter left out (first N only if given)
#   sf_series_count          how many
#   sf_rfc_patches           the patches of patches/rfc2021/series in order
#   sf_patch_subject FILE    the Subject of a patch file, "[PATCH]" removed
#   sf_base_tree             build/stock, the pristine base (tag "base"),
#                            made by qemu/kbuild if it is not there yet

SF_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SF_BUILD=$SF_TOP/build
# shellcheck disable=SC2034 # read by the scripts that source this file
SF_PROGS=$SF_BUILD/progs

# The bzImage inside an object directory (x86 only).
_SF_BZ_IN_OBJ=arch/x86/boot/bzImage

sf_flavour_ok() {
	case ${1:-} in
	patched|stock|debug|rfc) return 0;;
	prefix:[0-9]*|prefix-off:[0-9]*) [[ ${1#*:} =~ ^[0-9]+$ ]];;
	*) return 1;;
	esac
}

sf_objdir() {
	local f=${1:-patched}
	sf_flavour_ok "$f" || { echo "sf_objdir: unknown flavour '$f'" >&2; return 1; }
	echo "$SF_BUILD/obj-${f%%:*}"
}

sf_bzimage() {
	local o
	o=$(sf_objdir "${1:-patched}") || return 1
	echo "$o/$_SF_BZ_IN_OBJ"
}

sf_vmlinux() {
	local o
	o=$(sf_objdir "${1:-patched}") || return 1
	echo "$o/vmlinux"
}

sf_vmlinux_of() {
	local bz=$1 v
	case $bz in
	*/"$_SF_BZ_IN_OBJ") v=${bz%/"$_SF_BZ_IN_OBJ"}/vmlinux;;
	*) v=$(dirname "$bz")/vmlinux;;	# a bzImage copied somewhere with its vmlinux
	esac
	echo "$v"
	[ -f "$v" ]
}

sf_kernel() {
	if sf_flavour_ok "$1"; then sf_bzimage "$1"; else echo "$1"; fi
}

sf_fragment() {
	local f=${1:-patched}
	case $f in
	patched|stock|prefix:*) cat "$SF_TOP/qemu/guest.config";;
	debug) cat "$SF_TOP/qemu/guest.config" "$SF_TOP/qemu/debug.config";;
	prefix-off:*|rfc)
		grep -v '^CONFIG_SHARED_FOLIO' "$SF_TOP/qemu/guest.config"
		echo '# CONFIG_SHARED_FOLIO is not set';;
	*) echo "sf_fragment: unknown flavour '$f'" >&2; return 1;;
	esac
}

sf_series_patches() {
	local n=${1:-}
	sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e 's/^[[:space:]]*//' "$SF_TOP/patches/series" |
		{ grep -v -e '^$' -e '^0000-cover-letter.patch$' || true; } |
		if [ -n "$n" ]; then head -n "$n"; else cat; fi
}

sf_series_count() {
	sf_series_patches | wc -l
}

sf_rfc_patches() {
	sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e 's/^[[:space:]]*//' "$SF_TOP/patches/rfc2021/series" |
		{ grep -v -e '^$' || true; }
}

sf_patch_subject() {
	# RFC 2822 folding: continuation lines start with white space.
	awk '/^Subject: / { s = substr($0, 10); on = 1; next }
	     on && /^[ \t]/ { sub(/^[ \t]+/, " "); s = s $0; next }
	     on { exit }
	     END { sub(/^\[[^]]*\] */, "", s); print s }' "$1"
}

sf_base_tree() {
	if [ -f "$SF_BUILD/stock/.git/sharedfolio-base" ] &&
	   git -C "$SF_BUILD/stock" rev-parse -q --verify base >/dev/null 2>&1; then
		echo "$SF_BUILD/stock"
	else
		KBUILD_APPLY_ONLY=1 "$SF_TOP/qemu/kbuild" -q stock
	fi
}
