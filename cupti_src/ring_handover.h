/*
 * ring_handover.h — the producer's side of the handover (gpuflow_ring.h): give the ring's memory
 * file to the agent over its Unix socket.
 *
 * Shared by the injected library and the test producer (tests/support/test_producer.c), so the
 * tests hand rings over exactly as traced programs do. Constraints: never blocks the program
 * longer than the caller's bound (non-blocking socket, bounded retries); never raises SIGPIPE;
 * no allocation; the connection is close-on-exec, so a program the traced process execs never
 * holds it.
 */
#ifndef GPUFLOW_RING_HANDOVER_H
#define GPUFLOW_RING_HANDOVER_H

/*
 * Connect to the agent listening at `socket_path` (absolute, shorter than sun_path), check that
 * it runs as this process's effective uid or as root (SO_PEERCRED: a socket some other user put
 * at a stale path gets nothing), and send the hello with `ring_fd` attached, in one message.
 * Waits at most `wait_ms` in all, in short sleeps, while the agent's backlog is full.
 *
 * Returns the connected socket (>= 0), which the caller keeps open for as long as the process
 * lives: its end is how the agent learns that the producer is gone. Or -errno: -EINVAL (a path
 * that is not absolute or too long), -ENOENT / -ECONNREFUSED (no agent there: it has stopped),
 * -EACCES (not this user's), -EPERM (a listener of another user), -ETIMEDOUT, ...
 */
int rh_hand_over(int ring_fd, const char *socket_path, unsigned wait_ms);

#endif /* GPUFLOW_RING_HANDOVER_H */
