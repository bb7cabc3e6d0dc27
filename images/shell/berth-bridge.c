/*
 * berth-bridge: an agent's only ways out of its container, made of Unix sockets in /run/berth.
 *
 *   berth-bridge [SOCKET]
 *     An MCP stdio server: copies stdin to the berth gateway socket (default
 *     /run/berth/gateway.sock) and the socket to stdout, so an agent CLI configured with
 *     {"command": "berth-bridge"} reaches berth's tools with no network.
 *
 *   berth-bridge relay PORT=SOCKET [PORT=SOCKET ...] -- COMMAND [ARG ...]
 *     Listens on 127.0.0.1:PORT (the container's own loopback, which exists even with network
 *     none), then runs COMMAND. Each connection is copied to and from SOCKET: berth's model
 *     gateway and egress proxy, which hold the real keys and the allowlist outside.
 *     The listeners are open before COMMAND starts, so its first request never races them.
 *
 *   berth-bridge idle
 *     A warm container's keep-alive: blocks doing nothing but reaping children (as pid 1 it
 *     inherits every orphan of the commands berth execs into the container); exits 0 on
 *     SIGTERM. As pid 1 it takes SIGTERM only from outside the container (the engine's stop),
 *     so what runs inside cannot end it. It may also be the COMMAND of a relay.
 *
 * Static, no dependencies; built by "berth images build".
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RELAYS 8
/* Connections relayed at once; berth bounds its side too, this only keeps forks in check. */
#define MAX_CONNECTIONS 64

static int pump(int from, int to) {
  char buf[65536];
  ssize_t n = read(from, buf, sizeof buf);
  if (n <= 0) return (int)n;
  for (ssize_t off = 0; off < n;) {
    ssize_t w = write(to, buf + off, (size_t)(n - off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    off += w;
  }
  return 1;
}

static int connect_unix(const char *path) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof addr.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy(addr.sun_path, path);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  if (s < 0) return -1;
  if (connect(s, (struct sockaddr *)&addr, sizeof addr) < 0) {
    close(s);
    return -1;
  }
  return s;
}

/* Copy both ways until both sides are done; a half-close is passed on, not treated as the end. */
static int splice_both(int a_in, int a_out, int b) {
  struct pollfd fds[2] = {{.fd = a_in, .events = POLLIN}, {.fd = b, .events = POLLIN}};
  int open_dirs = 2;
  while (open_dirs > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (fds[0].fd >= 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      if (pump(a_in, b) <= 0) {
        fds[0].fd = -1;
        open_dirs--;
        shutdown(b, SHUT_WR); /* the far side answers what was asked, then closes */
      }
    }
    if (fds[1].fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      if (pump(b, a_out) <= 0) {
        fds[1].fd = -1;
        open_dirs--;
        if (a_in == a_out) shutdown(a_out, SHUT_WR);
        else return 0; /* stdio mode: the gateway closed, we are done */
      }
    }
  }
  return 0;
}

static int stdio_bridge(const char *path) {
  int s = connect_unix(path);
  if (s < 0) {
    fprintf(stderr, "berth-bridge: cannot connect to %s: %s\n", path, strerror(errno));
    return 1;
  }
  return splice_both(0, 1, s);
}

static volatile sig_atomic_t live_connections = 0;

static void on_child(int sig) {
  (void)sig;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) live_connections--;
  errno = saved;
}

static void serve(int n, int listeners[], const char *sockets[]) {
  signal(SIGPIPE, SIG_IGN); /* a side that went away ends its connection, not the relay */
  struct sigaction sa = {.sa_handler = on_child, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
  sigaction(SIGCHLD, &sa, NULL);
  struct pollfd fds[MAX_RELAYS];
  for (int i = 0; i < n; i++) fds[i] = (struct pollfd){.fd = listeners[i], .events = POLLIN};
  for (;;) {
    if (poll(fds, (nfds_t)n, -1) < 0) {
      if (errno == EINTR) continue;
      _exit(1);
    }
    for (int i = 0; i < n; i++) {
      if (!(fds[i].revents & POLLIN)) continue;
      int c = accept(listeners[i], NULL, NULL);
      if (c < 0) continue;
      if (live_connections >= MAX_CONNECTIONS) {
        close(c); /* the client sees a reset and may retry */
        continue;
      }
      /* SIGCHLD waits until the count is right: ++ here and -- in the handler never interleave. */
      sigset_t chld, old;
      sigemptyset(&chld);
      sigaddset(&chld, SIGCHLD);
      sigprocmask(SIG_BLOCK, &chld, &old);
      pid_t pid = fork();
      if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        for (int j = 0; j < n; j++) close(listeners[j]);
        int one = 1; /* each streamed event goes out as it comes, not batched by Nagle */
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int s = connect_unix(sockets[i]);
        if (s < 0) _exit(1);
        _exit(splice_both(c, c, s));
      }
      if (pid > 0) live_connections++;
      sigprocmask(SIG_SETMASK, &old, NULL);
      close(c);
    }
  }
}

static int relay(int argc, char **argv) {
  int listeners[MAX_RELAYS];
  const char *sockets[MAX_RELAYS];
  int n = 0, i = 2;
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    char *eq = strchr(argv[i], '=');
    char *end = NULL;
    long port = eq ? strtol(argv[i], &end, 10) : 0;
    if (!eq || end != eq || port < 1 || port > 65535 || n == MAX_RELAYS) {
      fprintf(stderr, "berth-bridge: relay wants PORT=SOCKET (at most %d), got \"%s\"\n", MAX_RELAYS, argv[i]);
      return 2;
    }
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (l < 0 || bind(l, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(l, 64) < 0) {
      fprintf(stderr, "berth-bridge: cannot listen on 127.0.0.1:%ld: %s\n", port, strerror(errno));
      return 1;
    }
    listeners[n] = l;
    sockets[n++] = eq + 1;
  }
  if (i + 1 >= argc) {
    fprintf(stderr, "berth-bridge: relay wants \"-- COMMAND\" after its PORT=SOCKET pairs\n");
    return 2;
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("berth-bridge: fork");
    return 1;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the relay lives as long as the command */
    /* Not dumpable: the agent runs as the same uid, and must not ptrace its way into the relay
       (in a warm container the relay outlives each message). */
    prctl(PR_SET_DUMPABLE, 0);
    serve(n, listeners, sockets);
  }
  for (int j = 0; j < n; j++) close(listeners[j]);
  execvp(argv[i + 1], argv + i + 1);
  if (errno == ENOENT) fprintf(stderr, "%s: not found in this image\n", argv[i + 1]);
  else fprintf(stderr, "berth-bridge: cannot run %s: %s\n", argv[i + 1], strerror(errno));
  return errno == ENOENT ? 127 : 126;
}

static volatile sig_atomic_t got_child = 0, got_term = 0;

static void on_idle_signal(int sig, siginfo_t *info, void *context) {
  (void)context;
  if (sig == SIGCHLD) got_child = 1;
  /* A sender outside our pid namespace shows as pid 0. */
  else if (getpid() != 1 || info->si_pid == 0) got_term = 1;
}

static int idle(void) {
  /* Exec made us dumpable again: what a message runs (same uid) must not ptrace the keep-alive. */
  prctl(PR_SET_DUMPABLE, 0);
  /* Pid 1 drops every signal it has no handler for (SIGKILL from outside aside): SIGTERM needs one. */
  struct sigaction sa = {.sa_sigaction = on_idle_signal, .sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP};
  sigset_t wanted, old;
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGCHLD);
  sigaddset(&wanted, SIGTERM);
  sigaddset(&wanted, SIGINT);
  /* Blocked outside sigsuspend: a signal arriving between the checks and the wait is not lost. */
  sigprocmask(SIG_BLOCK, &wanted, &old);
  sigaction(SIGCHLD, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigdelset(&old, SIGCHLD);
  sigdelset(&old, SIGTERM);
  sigdelset(&old, SIGINT);
  /* A relay's children are ours too (the relay execs us): reap what exited before the handler. */
  got_child = 1;
  for (;;) {
    if (got_term) return 0;
    if (got_child) {
      got_child = 0;
      while (waitpid(-1, NULL, WNOHANG) > 0) continue;
    }
    sigsuspend(&old);
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "relay") == 0) return relay(argc, argv);
  if (argc == 2 && strcmp(argv[1], "idle") == 0) return idle();
  return stdio_bridge(argc > 1 ? argv[1] : "/run/berth/gateway.sock");
}
