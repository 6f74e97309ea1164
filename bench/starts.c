/* Starts CGI programs one after another, as a web server would for refused requests, and
 * prints each program's median CPU time (user + system, from wait4) and wall time per start.
 * The programs take turns in blocks, each block starting with the next program, so that a
 * machine busy with other work slows them alike. Loopback only: nothing here opens a socket.
 *
 * Each program gets this program's own environment: the CGI variables of the request.
 *
 * Usage: bench/starts BLOCKS STARTS_PER_BLOCK PROGRAM...
 * (built and started by bench/starts.sh, which also sets up a client over its limit)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_PROGRAMS 8
#define MAX_BLOCKS 1000

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc - 3 > MAX_PROGRAMS) {
        fprintf(stderr, "usage: %s BLOCKS STARTS_PER_BLOCK PROGRAM... (at most %d)\n", argv[0],
                MAX_PROGRAMS);
        return 2;
    }
    int blocks = atoi(argv[1]), starts = atoi(argv[2]), programs = argc - 3;
    if (blocks < 1 || blocks > MAX_BLOCKS || starts < 1) {
        fprintf(stderr, "BLOCKS must be 1 to %d and STARTS_PER_BLOCK at least 1\n", MAX_BLOCKS);
        return 2;
    }
    static double cpu[MAX_PROGRAMS][MAX_BLOCKS], wall[MAX_PROGRAMS][MAX_BLOCKS];
    int null = open("/dev/null", O_WRONLY);
    for (int b = 0; b < blocks; b++) {
        for (int k = 0; k < programs; k++) {
            int p = (k + b) % programs;
            double used = 0, began = now_us();
            for (int i = 0; i < starts; i++) {
                pid_t pid = fork();
                if (pid == 0) {
                    dup2(null, 1);
                    char *args[] = {argv[3 + p], NULL};
                    execve(argv[3 + p], args, environ);
                    _exit(127);
                }
                int status;
                struct rusage ru;
                if (pid < 0 || wait4(pid, &status, 0, &ru) < 0) {
                    perror("fork or wait4");
                    return 1;
                }
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    fprintf(stderr, "%s did not exit with 0\n", argv[3 + p]);
                    return 1;
                }
                used += ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec +
                        ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
            }
            cpu[p][b] = used / starts;
            wall[p][b] = (now_us() - began) / starts;
        }
    }
    for (int p = 0; p < programs; p++) {
        qsort(cpu[p], blocks, sizeof(double), by_value);
        qsort(wall[p], blocks, sizeof(double), by_value);
        printf("%-50s CPU %6.1f us  wall %6.1f us per start (medians of %d blocks of %d)\n",
               argv[3 + p], cpu[p][blocks / 2], wall[p][blocks / 2], blocks, starts);
    }
    return 0;
}
