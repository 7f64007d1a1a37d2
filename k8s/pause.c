/* The pod sandbox process for the local cluster (scripts/k8s-up): it holds the pod's
 * namespaces, reaps orphans (it is PID 1 of the pod when the pod shares its PID
 * namespace) and exits on SIGINT or SIGTERM. Built with `gcc -static`, so the image is this
 * one file. */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {0}, child = {0};
  stop.sa_handler = on_stop;
  child.sa_handler = on_child;
  child.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction(SIGINT, &stop, NULL) || sigaction(SIGTERM, &stop, NULL) ||
      sigaction(SIGCHLD, &child, NULL)) {
    return 1;
  }
  for (;;) {
    pause();
  }
}
