// SPDX-License-Identifier: GPL-2.0
/*
 * uring-lat: how long io_uring_enter() blocks the submitter of a buffered
 * 4 KiB read.
 *
 * io_uring issues a buffered read first with IOCB_NOWAIT; on -EAGAIN it
 * retries inline, in the submitting thread, with IOCB_WAITQ, expecting the
 * filesystem to queue the read and return.  A filesystem that waits for the
 * disk in that retry blocks io_uring_enter() for the disk's latency.  fio's
 * slat is taken before io_uring_enter() and cannot show this; this program
 * times the submitting io_uring_enter() call alone.
 *
 * For each of COUNT reads of 4 KiB at pseudo-random page-aligned offsets of
 * FILE (fixed seed, distinct pages while the file has enough of them):
 *  1. fill one SQE (IORING_OP_READ, 4096 bytes at the offset);
 *  2. "submit": wall time of io_uring_enter(ring, 1, 0, 0) alone;
 *  3. io_uring_enter(ring, 0, 1, IORING_ENTER_GETEVENTS) until the CQE is
 *     there; "complete": wall time from before step 2 to the CQE;
 *  4. the CQE's res must be 4096, and the bytes must equal a pread() of the
 *     same range done afterwards.
 * No liburing: raw io_uring_setup/io_uring_enter and the rings mmap()ed.
 *
 * usage: uring-lat FILE COUNT     (FILE: at least one 4 KiB page)
 * Prints one line per read, then
 * "uring-lat: reads N submit_max_ms S complete_max_ms C" (integers, ms,
 * truncated).
 * exit: 0 all reads complete and equal, 1 a read failed, was short or
 * differs, 2 usage or setup error (message names the call).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BS 4096
#define ENTRIES 4
#define SEED 0x5f3759df2545f491ULL

static int ring_fd = -1;

/* SQ ring */
static unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
static struct io_uring_sqe *sqes;
/* CQ ring */
static unsigned *cq_head, *cq_tail, *cq_mask;
static struct io_uring_cqe *cqes;

static void die_setup(const char *call)
{
	fprintf(stderr, "uring-lat: %s: %s\n", call, strerror(errno));
	exit(2);
}

static int sys_io_uring_setup(unsigned entries, struct io_uring_params *p)
{
	return (int)syscall(__NR_io_uring_setup, entries, p);
}

static int sys_io_uring_enter(int fd, unsigned to_submit, unsigned min_complete,
			      unsigned flags)
{
	return (int)syscall(__NR_io_uring_enter, fd, to_submit, min_complete,
			    flags, NULL, (size_t)0);
}

static void ring_setup(void)
{
	struct io_uring_params p;
	size_t sq_sz, cq_sz, sqes_sz;
	char *sq_ptr, *cq_ptr;

	memset(&p, 0, sizeof(p));
	ring_fd = sys_io_uring_setup(ENTRIES, &p);
	if (ring_fd < 0)
		die_setup("io_uring_setup");

	sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		if (cq_sz > sq_sz)
			sq_sz = cq_sz;
		cq_sz = sq_sz;
	}
	sq_ptr = mmap(NULL, sq_sz, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_POPULATE, ring_fd, IORING_OFF_SQ_RING);
	if (sq_ptr == MAP_FAILED)
		die_setup("mmap(IORING_OFF_SQ_RING)");
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		cq_ptr = sq_ptr;
	} else {
		cq_ptr = mmap(NULL, cq_sz, PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_POPULATE, ring_fd,
			      IORING_OFF_CQ_RING);
		if (cq_ptr == MAP_FAILED)
			die_setup("mmap(IORING_OFF_CQ_RING)");
	}
	sqes_sz = p.sq_entries * sizeof(struct io_uring_sqe);
	sqes = mmap(NULL, sqes_sz, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_POPULATE, ring_fd, IORING_OFF_SQES);
	if (sqes == MAP_FAILED)
		die_setup("mmap(IORING_OFF_SQES)");

	sq_head = (unsigned *)(sq_ptr + p.sq_off.head);
	sq_tail = (unsigned *)(sq_ptr + p.sq_off.tail);
	sq_mask = (unsigned *)(sq_ptr + p.sq_off.ring_mask);
	sq_array = (unsigned *)(sq_ptr + p.sq_off.array);
	cq_head = (unsigned *)(cq_ptr + p.cq_off.head);
	cq_tail = (unsigned *)(cq_ptr + p.cq_off.tail);
	cq_mask = (unsigned *)(cq_ptr + p.cq_off.ring_mask);
	cqes = (struct io_uring_cqe *)(cq_ptr + p.cq_off.cqes);
}

/* Queue one read in the SQ ring (not yet submitted). */
static void queue_read(int fd, void *buf, unsigned len, uint64_t off,
		       uint64_t user_data)
{
	/* The application owns the SQ tail; the kernel advances the head. */
	unsigned tail = *sq_tail;
	unsigned head = __atomic_load_n(sq_head, __ATOMIC_ACQUIRE);
	unsigned idx;
	struct io_uring_sqe *sqe;

	if (tail - head >= ENTRIES) {
		fprintf(stderr, "uring-lat: SQ ring full (head %u tail %u)\n",
			head, tail);
		exit(2);
	}
	idx = tail & *sq_mask;
	sqe = &sqes[idx];
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_READ;
	sqe->fd = fd;
	sqe->addr = (uint64_t)(uintptr_t)buf;
	sqe->len = len;
	sqe->off = off;
	sqe->user_data = user_data;
	sq_array[idx] = idx;
	/* The SQE and array entry must be visible before the new tail. */
	__atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
}

/* Take one CQE if there is one; return 1 if taken. */
static int reap_cqe(struct io_uring_cqe *out)
{
	/* The application owns the CQ head; the kernel advances the tail. */
	unsigned head = *cq_head;
	unsigned tail = __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE);

	if (head == tail)
		return 0;
	*out = cqes[head & *cq_mask];
	/* Done reading the CQE before the kernel may reuse its slot. */
	__atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
	return 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t rng = SEED;

static uint64_t xorshift64(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(int argc, char **argv)
{
	unsigned char *buf, *ref;
	uint64_t *used, npages, submit_max = 0, complete_max = 0;
	long count, i;
	struct stat st;
	char *end;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: uring-lat FILE COUNT\n");
		return 2;
	}
	count = strtol(argv[2], &end, 10);
	if (*argv[2] == '\0' || *end != '\0' || count < 1) {
		fprintf(stderr, "uring-lat: COUNT must be a positive integer: %s\n",
			argv[2]);
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "uring-lat: open %s: %s\n", argv[1],
			strerror(errno));
		return 2;
	}
	if (fstat(fd, &st) < 0)
		die_setup("fstat");
	npages = (uint64_t)st.st_size / BS;
	if (npages == 0) {
		fprintf(stderr, "uring-lat: %s: smaller than %d bytes\n",
			argv[1], BS);
		return 2;
	}
	if (posix_memalign((void **)&buf, BS, BS) ||
	    posix_memalign((void **)&ref, BS, BS)) {
		fprintf(stderr, "uring-lat: posix_memalign failed\n");
		return 2;
	}
	used = calloc((size_t)count, sizeof(*used));
	if (!used) {
		fprintf(stderr, "uring-lat: calloc failed\n");
		return 2;
	}

	ring_setup();

	for (i = 0; i < count; i++) {
		struct io_uring_cqe cqe;
		uint64_t page, off, t0, t1, t2, submit, complete;
		long j;
		ssize_t n;
		int ret;

		/* A fresh page when the file has enough: a repeat would hit
		 * the page cache. */
		for (;;) {
			page = xorshift64() % npages;
			for (j = 0; j < i && used[j] != page; j++)
				;
			if (j == i || (uint64_t)i >= npages)
				break;
		}
		used[i] = page;
		off = page * BS;
		memset(buf, 0xa5, BS);

		queue_read(fd, buf, BS, off, (uint64_t)i + 1);
		t0 = now_ns();
		ret = sys_io_uring_enter(ring_fd, 1, 0, 0);
		t1 = now_ns();
		if (ret < 0)
			die_setup("io_uring_enter (submit)");
		if (ret != 1) {
			fprintf(stderr, "uring-lat: io_uring_enter (submit) submitted %d, not 1\n",
				ret);
			return 2;
		}
		while (!reap_cqe(&cqe)) {
			ret = sys_io_uring_enter(ring_fd, 0, 1,
						 IORING_ENTER_GETEVENTS);
			if (ret < 0 && errno != EINTR && errno != EAGAIN)
				die_setup("io_uring_enter (getevents)");
		}
		t2 = now_ns();
		submit = t1 - t0;
		complete = t2 - t0;
		if (submit > submit_max)
			submit_max = submit;
		if (complete > complete_max)
			complete_max = complete;
		printf("read %ld offset %llu submit_ms %.3f complete_ms %.3f res %d\n",
		       i, (unsigned long long)off, submit / 1e6, complete / 1e6,
		       cqe.res);
		fflush(stdout);

		if (cqe.user_data != (uint64_t)i + 1) {
			fprintf(stderr, "uring-lat: read %ld: CQE user_data %llu, expected %ld\n",
				i, (unsigned long long)cqe.user_data, i + 1);
			return 1;
		}
		if (cqe.res < 0) {
			fprintf(stderr, "uring-lat: read %ld at offset %llu: %s\n",
				i, (unsigned long long)off, strerror(-cqe.res));
			return 1;
		}
		if (cqe.res != BS) {
			fprintf(stderr, "uring-lat: read %ld at offset %llu: short read, %d of %d bytes\n",
				i, (unsigned long long)off, cqe.res, BS);
			return 1;
		}
		n = pread(fd, ref, BS, (off_t)off);
		if (n != BS) {
			fprintf(stderr, "uring-lat: pread at offset %llu: %s\n",
				(unsigned long long)off,
				n < 0 ? strerror(errno) : "short read");
			return 1;
		}
		if (memcmp(buf, ref, BS)) {
			for (j = 0; j < BS && buf[j] == ref[j]; j++)
				;
			fprintf(stderr, "uring-lat: read %ld at offset %llu differs from pread() at byte %ld (0x%02x, pread 0x%02x)\n",
				i, (unsigned long long)off, j, buf[j], ref[j]);
			return 1;
		}
	}
	printf("uring-lat: reads %ld submit_max_ms %llu complete_max_ms %llu\n",
	       count, (unsigned long long)(submit_max / 1000000),
	       (unsigned long long)(complete_max / 1000000));
	return 0;
}
