/* greet: the one program of the test images that have no shell (a
 * distroless-like "static" image) or no glibc (the "musl" image). It reads
 * $INPUTS/name (as a script step's contract gives it), leaves
 * $OUTPUTS/note.txt, says one line on stderr and prints one JSON object on
 * stdout: {"got": <the input file>, "uid": <its user id>, "libc": "..."},
 * so a test sees that the input arrived, which user ran it and which libc
 * it was linked with. Built with musl-gcc by e2e/image/test-images. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    const char *inputs = getenv("INPUTS");
    const char *outputs = getenv("OUTPUTS");
    char path[4096];
    char got[4096];
    if (!inputs || !outputs) {
        fprintf(stderr, "greet: $INPUTS or $OUTPUTS is not set\n");
        return 3;
    }
    snprintf(path, sizeof path, "%s/name", inputs);
    FILE *in = fopen(path, "r");
    if (!in) {
        perror(path);
        return 4;
    }
    size_t n = fread(got, 1, sizeof got - 1, in);
    fclose(in);
    got[n] = 0;
    while (n > 0 && (got[n - 1] == '\n' || got[n - 1] == ' ')) got[--n] = 0;
    snprintf(path, sizeof path, "%s/note.txt", outputs);
    FILE *note = fopen(path, "w");
    if (!note) {
        perror(path);
        return 5;
    }
    fprintf(note, "written by uid %d\n", (int)getuid());
    fclose(note);
    fprintf(stderr, "greet: read %zu bytes of input as uid %d\n", n, (int)getuid());
    printf("{\"got\": %s, \"uid\": %d, \"libc\": \"%s\"}\n", n ? got : "null", (int)getuid(), GREET_LIBC);
    return 0;
}
