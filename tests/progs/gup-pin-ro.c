// SPDX-License-Identifier: GPL-2.0
/*
 * gup-pin-ro: a read-only long-term pin (FOLL_PIN | FOLL_LONGTERM, no
 * FOLL_WRITE, as RDMA read-only memory regions or vfio take) of a page of a
 * MAP_SHARED file mapping must keep seeing the file: write() to the file
 * after pinning, then read the pinned page back.  Uses the kernel's
 * gup_test (CONFIG_GUP_TEST, /sys/kernel/debug/gup_test).
 *
 * Usage: gup-pin-ro [-f] FILE    (-f: pin_user_pages_fast())
 * Prints "pfn before B pinned P; the pinned page sees the write: yes|no".
 * Exit: 0 coherent, 1 not, 2 setup error.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/types.h>

struct pin_longterm_test {
	__u64 addr;
	__u64 size;
	__u32 flags;
};
#define PIN_LONGTERM_TEST_START	_IOW('g', 7, struct pin_longterm_test)
#define PIN_LONGTERM_TEST_STOP	_IO('g', 8)
#define PIN_LONGTERM_TEST_READ	_IOW('g', 9, __u64)
#define PIN_LONGTERM_TEST_FLAG_USE_FAST	2

static uint64_t pfn_of(void *p)
{
	uint64_t e = 0;
	int pm = open("/proc/self/pagemap", O_RDONLY);

	if (pm < 0 || pread(pm, &e, 8, (uintptr_t)p / 4096 * 8) != 8)
		e = 0;
	close(pm);
	return (e >> 63) & 1 ? e & ((1ULL << 55) - 1) : 0;
}

int main(int argc, char **argv)
{
	int fast = argc == 3 && !strcmp(argv[1], "-f");
	const char *file = argv[argc - 1];
	struct pin_longterm_test t = { .size = 4096 };
	static char want[4096], got[4096];
	uint64_t before, pinned, buf = (uintptr_t)got;
	volatile char *p;
	int fd, wfd, g;

	if (argc < 2)
		return fprintf(stderr, "usage: gup-pin-ro [-f] FILE\n"), 2;
	fd = open(file, O_RDONLY);
	wfd = open(file, O_WRONLY);
	g = open("/sys/kernel/debug/gup_test", O_RDWR);
	if (fd < 0 || wfd < 0 || g < 0)
		return perror("open (file, or /sys/kernel/debug/gup_test)"), 2;
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return perror("mmap"), 2;
	(void)p[0];
	before = pfn_of((void *)p);
	t.addr = (uintptr_t)p;
	t.flags = fast ? PIN_LONGTERM_TEST_FLAG_USE_FAST : 0;
	if (ioctl(g, PIN_LONGTERM_TEST_START, &t))
		return perror("PIN_LONGTERM_TEST_START"), 2;
	pinned = pfn_of((void *)p);
	memset(want, 'W', sizeof(want));
	if (pwrite(wfd, want, sizeof(want), 0) != sizeof(want))
		return perror("pwrite"), 2;
	if (ioctl(g, PIN_LONGTERM_TEST_READ, &buf))
		return perror("PIN_LONGTERM_TEST_READ"), 2;
	ioctl(g, PIN_LONGTERM_TEST_STOP);
	printf("pfn before %" PRIu64 " pinned %" PRIu64 "; the pinned page sees the write: %s\n",
	       before, pinned, memcmp(got, want, sizeof(got)) ? "no" : "yes");
	return memcmp(got, want, sizeof(got)) ? 1 : 0;
}
