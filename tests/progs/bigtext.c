// SPDX-License-Identifier: GPL-2.0
/*
 * bigtext: a program with 6 MiB of text, linked with segments aligned to
 * 2 MiB (p_align; tests/progs/Makefile links it with -z max-page-size=2M),
 * so that the ELF loader puts it at a 2 MiB-aligned load bias and each
 * aligned 2 MiB of its text can be mapped by a PMD, as an executable
 * built for huge pages is.  It runs through all of its text (every page is
 * faulted in by execution, as a program's are), prints "ready" and its
 * pid, and waits for SIGTERM, or exits at once with -x.
 *
 * Usage: bigtext [-x]   Exit: 0.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* 6 MiB of NOPs and a return, in .text. */
asm(".pushsection .text.bigtext_pad, \"ax\", @progbits\n"
    ".globl bigtext_pad\n"
    ".type bigtext_pad, @function\n"
    "bigtext_pad:\n"
    ".fill 6291456, 1, 0x90\n"
    "ret\n"
    ".popsection\n");
void bigtext_pad(void);

static volatile sig_atomic_t quit;

static void on_term(int sig)
{
	quit = 1;
}

int main(int argc, char **argv)
{
	signal(SIGTERM, on_term);
	bigtext_pad();
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (argc > 1 && !strcmp(argv[1], "-x"))
		return 0;
	while (!quit)
		pause();
	return 0;
}
