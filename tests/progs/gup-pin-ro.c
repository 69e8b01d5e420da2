// SPDX-License-Identifier: GPL-2.0
/*
 * gup-pin-ro: a read-only long-term pin (FOLL_PIN | FOLL_LONGTERM, no
 * FOLL_WRITE, as RDMA read-only memory regions or vfio take) of a page of a
 * MAP_SHARED file mapping must keep seeing the file: write() to the file
 * after pinning, then read the pinned page back.  Uses the kernel's
 * gup_test (CONFIG_GUP_TEST, /sys/kernel/debug/gup_test).
 *
 * Usage: gup-pin-ro [-f] [-A] FILE
 *   -f: pin_user_pages_fast()
 *   -A: map the file's first 2 MiB at an address aligned to 2 MiB, so that
 *       a PMD can map the page before the pin (FILE at least 2 MiB)
 * Prints "pfn before B pinned P; the pinned page sees the write: yes|no",
 * and with -A "; FilePmdMapped before the pin K kB".
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

/* FilePmdMapped (kB) of the mapping at @start, from /proc/self/smaps. */
static long pmd_kb(uintptr_t start)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	long kb = -1;
	int in = 0;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
			in = lo == start;
		else if (in && !strncmp(line, "FilePmdMapped:", 14))
			kb = strtol(line + 14, NULL, 10);
	}
	if (f)
		fclose(f);
	return kb;
}

int main(int argc, char **argv)
{
	const size_t pmd = 2UL << 20;
	const char *file = argv[argc - 1];
	int fast = 0, align = 0, i;
	size_t len = 4096;
	long pmdkb = -1;
	void *at = NULL;
	struct pin_longterm_test t = { .size = 4096 };
	static char want[4096], got[4096];
	uint64_t before, pinned, buf = (uintptr_t)got;
	volatile char *p;
	int fd, wfd, g;

	for (i = 1; i < argc - 1; i++) {
		if (!strcmp(argv[i], "-f"))
			fast = 1;
		else if (!strcmp(argv[i], "-A"))
			align = 1;
		else
			argc = 0;
	}
	if (argc < 2)
		return fprintf(stderr, "usage: gup-pin-ro [-f] [-A] FILE\n"), 2;
	fd = open(file, O_RDONLY);
	wfd = open(file, O_WRONLY);
	g = open("/sys/kernel/debug/gup_test", O_RDWR);
	if (fd < 0 || wfd < 0 || g < 0)
		return perror("open (file, or /sys/kernel/debug/gup_test)"), 2;
	if (align) {
		char *r = mmap(NULL, 2 * pmd, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (r == MAP_FAILED)
			return perror("mmap reserve"), 2;
		at = (void *)(((uintptr_t)r + pmd - 1) & ~(uintptr_t)(pmd - 1));
		len = pmd;
	}
	p = mmap(at, len, PROT_READ, MAP_SHARED | (align ? MAP_FIXED : 0), fd, 0);
	if (p == MAP_FAILED)
		return perror("mmap"), 2;
	(void)p[0];
	if (align)
		pmdkb = pmd_kb((uintptr_t)p);
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
	printf("pfn before %" PRIu64 " pinned %" PRIu64 "; the pinned page sees the write: %s",
	       before, pinned, memcmp(got, want, sizeof(got)) ? "no" : "yes");
	if (align)
		printf("; FilePmdMapped before the pin %ld kB", pmdkb);
	printf("\n");
	return memcmp(got, want, sizeof(got)) ? 1 : 0;
}
