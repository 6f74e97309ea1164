/* The floor of the benchmarks: a CGI program that does nothing but write a fixed 429, what any
 * process-per-request program pays for the web server, fork and exec. Built static with
 * musl-gcc by bench/run.sh and bench/starts.sh. */
#include <unistd.h>
static const char answer[] =
    "Status: 429 Too Many Requests\nContent-Type: text/plain; charset=utf-8\n"
    "Retry-After: 60\nCache-Control: no-store\n\nToo many requests: try again in 60 seconds.\n";
int main(void) { return write(1, answer, sizeof answer - 1) < 0; }
