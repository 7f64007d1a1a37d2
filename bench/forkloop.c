/* forkloop W N: W processes, each looping fork -> the child exits at once -> wait for it,
 * each holding N extra memory mappings of one touched page (one region of 2N pages, every
 * other page read-only so the kernel cannot merge them). The reference for how a fork's
 * cost (the mappings it copies) drives a neighbour's tail: bench/RESULTS.md, "Fork bomb
 * against stress-ng, settled". Build: gcc -O2 -o bench/out/forkloop bench/forkloop.c;
 * use: python3 bench/tail.py --only custom --arm 'c160=cmd:bench/out/forkloop 2 160' ... */
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    int workers = atoi(argv[1]);
    long n = atol(argv[2]);
    long page = sysconf(_SC_PAGESIZE);
    if (n > 0) {
        char *p = mmap(0, page * 2 * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 1;
        for (long i = 0; i < 2 * n; i++)
            p[i * page] = 1;
        for (long i = 0; i < n; i++)
            mprotect(p + (2 * i + 1) * page, page, PROT_READ);
    }
    for (int i = 1; i < workers; i++)
        if (fork() == 0)
            break;
    for (;;) {
        pid_t c = fork();
        if (c == 0)
            _exit(0);
        if (c > 0)
            waitpid(c, 0, 0);
    }
}
