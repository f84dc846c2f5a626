/*
 * ring_courier.c — a stand-in traced process for the consumer's tests: it hands over a ring that
 * the test wrote, from a process of its own, exactly as the injected library would.
 *
 * What it is for: the agent knows a traced process by its connection (the peer's pid from the
 * kernel, and the connection's end when the process ends), so a test that wants a traced process
 * with a pid of its own, that exits with a status or is killed, needs a real process holding the
 * connection. The test creates the ring (tests/support/test_producer.c), starts this program with
 * the ring's descriptor inherited, and goes on writing records into the ring from the test.
 *
 *     ring_courier SOCKET_PATH RING_FD
 *
 * Hands RING_FD over to SOCKET_PATH (ring_handover.c), closes its own copy of it, prints
 * "handed <pid>" (or "refused <errno>" and exits 2), then reads one line from stdin: an exit
 * status to exit with (end of input: 0).
 *
 * Constraints: plain C and POSIX; built by tests/support/ringproducer.py's build_producer.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ring_handover.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: ring_courier SOCKET_PATH RING_FD\n");
        return 2;
    }
    int ring_fd = atoi(argv[2]);
    int conn = rh_hand_over(ring_fd, argv[1], 2000);
    close(ring_fd);
    if (conn < 0) {
        printf("refused %d\n", -conn);
        return 2;
    }
    printf("handed %d\n", (int)getpid());
    fflush(stdout);
    char line[32];
    if (!fgets(line, sizeof line, stdin))
        return 0;
    return atoi(line);
}
