// SPDX-License-Identifier: GPL-2.0
/*
 * maptouch: map a file, touch every page, and report what is mapped.
 *
 *   maptouch [-A] [-P] [-W] [-T SECS] [-F] [-L|-O] FILE OUT
 *                              map FILE whole, read-only (MAP_SHARED, or
 *                              MAP_PRIVATE with -P), read a byte of every
 *                              page, write OUT.0; on each SIGUSR1 touch the
 *                              pages again and write OUT.1, OUT.2, ...; exit
 *                              0 on SIGTERM.  OUT.k: "sum S pages N pss KB
 *                              rss KB pmd KB flt F" (pmd: FilePmdMapped;
 *                              flt: the page faults, minor and major, that
 *                              this touch of every page took), then
 *                              "INDEX PFN" per page (PFN 0:
 *                              not present).  Written whole, then renamed.
 *                              -F: then fork a child that keeps the mapping
 *                              and reports to OUT.c.K alike (with -P the
 *                              mapping is made writable and page 0 written
 *                              first, so that fork copies the PTEs); the
 *                              parent forwards its signals to the child.
 *                              -L: mlock() the mapping after the first touch
 *                              (before the first report); -O: the same with
 *                              mlock2(MLOCK_ONFAULT), which populates nothing.
 *                              -A: map at an address aligned to 2 MiB, so
 *                              that a PMD can map each aligned 2 MiB of the
 *                              file.
 *                              -W: map it writable (with -P; a MAP_SHARED
 *                              mapping opens FILE read-write), and still
 *                              only read it: NUMA balancing scans only
 *                              writable file mappings.
 *                              -T SECS: each touch (the first and each one
 *                              a SIGUSR1 asks for) reads every page over
 *                              and over for SECS seconds, on the CPU.
 *   maptouch -w OFF STR FILE   write STR at byte OFF of FILE through a
 *                              MAP_SHARED mapping (or with -P a MAP_PRIVATE
 *                              one, which must leave FILE unchanged), msync,
 *                              and print the PFN of the page before and
 *                              after the write: "before P after Q".
 *   maptouch -p PID MATCH      for every mapping of process PID whose path
 *                              contains MATCH: "PATH PERMS OFFSET PFN" per
 *                              present page (file offset in pages; PERMS as
 *                              in /proc/PID/maps, "r-xp" for text).
 *
 * PFNs come from /proc/PID/pagemap (root only).  Exit: 0 fine, 1 error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static long psz;
static volatile sig_atomic_t again, quit;

static void die(const char *what)
{
	fprintf(stderr, "maptouch: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t pfn_of(int pm, unsigned long addr)
{
	uint64_t e;

	if (pread(pm, &e, sizeof(e), (addr / psz) * sizeof(e)) != sizeof(e))
		die("read pagemap");
	return (e >> 63) & 1 ? e & ((1ULL << 55) - 1) : 0;
}

/* Pss, Rss and FilePmdMapped (kB) of the mapping at @start, from smaps. */
static void smaps_of(unsigned long start, long *pss, long *rss, long *pmd)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0;

	*pss = *rss = *pmd = -1;
	if (!f)
		die("open smaps");
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		/* a header line; field names ("Pss:") never parse so */
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			in = lo == start;
			continue;
		}
		if (in && !strncmp(line, "Pss:", 4))
			*pss = strtol(line + 4, NULL, 10);
		if (in && !strncmp(line, "Rss:", 4))
			*rss = strtol(line + 4, NULL, 10);
		if (in && !strncmp(line, "FilePmdMapped:", 14))
			*pmd = strtol(line + 14, NULL, 10);
	}
	fclose(f);
}

/* Page faults of this process so far, minor and major. */
static long faults(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		die("getrusage");
	return ru.ru_minflt + ru.ru_majflt;
}

static void report(const char *out, int k, const unsigned char *p, size_t pages,
		   long flt)
{
	char tmp[4096], name[4096];
	uint64_t sum = 0;
	long pss, rss, pmd;
	int pm;
	FILE *f;
	size_t i, j;

	for (i = 0; i < pages; i++)
		for (j = 0; j < (size_t)psz; j += 64)
			sum = sum * 31 + p[i * psz + j];
	pm = open("/proc/self/pagemap", O_RDONLY);
	if (pm < 0)
		die("open pagemap");
	smaps_of((unsigned long)p, &pss, &rss, &pmd);
	snprintf(name, sizeof(name), "%s.%d", out, k);
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	f = fopen(tmp, "w");
	if (!f)
		die(tmp);
	fprintf(f, "sum %016" PRIx64 " pages %zu pss %ld rss %ld pmd %ld flt %ld\n",
		sum, pages, pss, rss, pmd, flt);
	for (i = 0; i < pages; i++)
		fprintf(f, "%zu %" PRIu64 "\n", i, pfn_of(pm, (unsigned long)p + i * psz));
	if (fclose(f) || rename(tmp, name))
		die(name);
	close(pm);
}

static void on_sig(int sig)
{
	if (sig == SIGUSR1)
		again = 1;
	else
		quit = 1;
}

static int do_write(int private, off_t off, const char *str, const char *file)
{
	size_t len = strlen(str), mlen;
	off_t moff = off & ~(off_t)(psz - 1);
	unsigned char *p;
	uint64_t before, after;
	int fd, pm;

	fd = open(file, O_RDWR);
	if (fd < 0)
		die(file);
	mlen = (off - moff) + len;
	p = mmap(NULL, mlen, PROT_READ | PROT_WRITE,
		 private ? MAP_PRIVATE : MAP_SHARED, fd, moff);
	if (p == MAP_FAILED)
		die("mmap");
	pm = open("/proc/self/pagemap", O_RDONLY);
	if (pm < 0)
		die("open pagemap");
	/* a read fault first: it maps the shared page, if there is one */
	before = *(volatile unsigned char *)p;
	before = pfn_of(pm, (unsigned long)p);
	memcpy(p + (off - moff), str, len);
	after = pfn_of(pm, (unsigned long)p);
	if (!private && msync(p, mlen, MS_SYNC))
		die("msync");
	printf("before %" PRIu64 " after %" PRIu64 "\n", before, after);
	munmap(p, mlen);
	close(fd);
	return 0;
}

static int do_pid(const char *pid, const char *match)
{
	char path[64], line[4096];
	FILE *maps;
	int pm;

	snprintf(path, sizeof(path), "/proc/%s/maps", pid);
	maps = fopen(path, "r");
	if (!maps)
		die(path);
	snprintf(path, sizeof(path), "/proc/%s/pagemap", pid);
	pm = open(path, O_RDONLY);
	if (pm < 0)
		die(path);
	while (fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi, pgoff, a;
		char *name = strchr(line, '/'), perms[8];

		if (!name || !strstr(name, match))
			continue;
		name[strcspn(name, "\n")] = 0;
		if (sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perms, &pgoff) != 4)
			continue;
		for (a = lo; a < hi; a += psz) {
			uint64_t pfn = pfn_of(pm, a);

			if (pfn)
				printf("%s %s %lu %" PRIu64 "\n", name, perms,
				       pgoff / psz + (a - lo) / psz, pfn);
		}
	}
	fclose(maps);
	return 0;
}

int main(int argc, char **argv)
{
	int private = 0, write = 0, fork_child = 0, lock = 0, align = 0, opt, fd, k = 0;
	int writable = 0;
	double spin = 0;
	pid_t child = 0;
	char cout[4096];
	const char *wstr = NULL, *pid = NULL;
	off_t woff = 0;
	unsigned char *p;
	struct stat st;
	size_t pages, i;
	volatile unsigned char sink = 0;

	psz = sysconf(_SC_PAGESIZE);
	while ((opt = getopt(argc, argv, "APFLOWT:w:p:")) != -1) {
		switch (opt) {
		case 'W':
			writable = 1;
			break;
		case 'T':
			spin = strtod(optarg, NULL);
			break;
		case 'A':
			align = 1;
			break;
		case 'L':
			lock = 1;
			break;
		case 'O':
			lock = 2;
			break;
		case 'F':
			fork_child = 1;
			break;
		case 'P':
			private = 1;
			break;
		case 'w':
			write = 1;
			woff = strtoll(optarg, NULL, 0);
			break;
		case 'p':
			pid = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (pid)
		return argc - optind == 1 ? do_pid(pid, argv[optind]) : 1;
	if (write) {
		if (argc - optind != 2)
			goto usage;
		wstr = argv[optind];
		return do_write(private, woff, wstr, argv[optind + 1]);
	}
	if (argc - optind != 2)
		goto usage;

	fd = open(argv[optind], writable && !private ? O_RDWR : O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		die(argv[optind]);
	pages = (st.st_size + psz - 1) / psz;
	if (!pages) {
		fprintf(stderr, "maptouch: %s is empty\n", argv[optind]);
		return 1;
	}
	p = NULL;
	if (align) {
		/* reserve 2 MiB more, then map over its first aligned address */
		const size_t pmd = 2UL << 20;
		unsigned char *r = mmap(NULL, pages * psz + pmd, PROT_NONE,
					MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (r == MAP_FAILED)
			die("mmap reserve");
		p = (unsigned char *)(((uintptr_t)r + pmd - 1) & ~(uintptr_t)(pmd - 1));
	}
	p = mmap(p, pages * psz,
		 PROT_READ | ((private && fork_child) || writable ? PROT_WRITE : 0),
		 (private ? MAP_PRIVATE : MAP_SHARED) | (align ? MAP_FIXED : 0), fd, 0);
	if (p == MAP_FAILED)
		die("mmap");
	signal(SIGUSR1, on_sig);
	signal(SIGTERM, on_sig);
	for (i = 0; i < pages; i++)
		sink += p[i * psz];
	if (lock == 1 && mlock(p, pages * psz))
		die("mlock");
	if (lock == 2 && syscall(SYS_mlock2, p, pages * psz, 1 /* MLOCK_ONFAULT */))
		die("mlock2");
	if (fork_child) {
		if (private)
			p[0] ^= 0xff;	/* an anonymous page: fork copies the PTEs */
		child = fork();
		if (child < 0)
			die("fork");
		if (!child) {
			snprintf(cout, sizeof(cout), "%s.c", argv[optind + 1]);
			argv[optind + 1] = cout;
		}
	}
	for (;;) {
		long f0 = faults();
		struct timespec t0, t;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			for (i = 0; i < pages; i++)
				sink += p[i * psz];
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 < spin);
		report(argv[optind + 1], k++, p, pages, faults() - f0);
		while (!again && !quit)
			pause();
		if (child > 0)
			kill(child, quit ? SIGTERM : SIGUSR1);
		if (quit) {
			if (child > 0)
				waitpid(child, NULL, 0);
			return 0;
		}
		again = 0;
	}
usage:
	fprintf(stderr, "usage: maptouch [-A] [-P] [-W] [-T SECS] [-F] [-L|-O] FILE OUT | maptouch [-P] -w OFF STR FILE | maptouch -p PID MATCH\n");
	return 1;
}
