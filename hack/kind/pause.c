/* The pod sandbox process for kind's node image: sleep until told to stop, reaping orphans (PID 1 duty).
 * Built static (`gcc -Os -static`) into a FROM-scratch image tagged as registry.k8s.io/pause. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("pause (rlop)");
    return 0;
  }
  if (getpid() != 1) fprintf(stderr, "pause: warning: not PID 1\n");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = stop;
  if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) return 1;
  sa.sa_handler = reap;
  sa.sa_flags = SA_NOCLDSTOP;
  if (sigaction(SIGCHLD, &sa, NULL) < 0) return 2;
  for (;;) pause();
}
