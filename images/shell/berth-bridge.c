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
 *     For each line on its stdin (berth's attach: nothing in the container holds that pipe) it
 *     prints a report of what the container holds: where berth cannot read the container's
 *     processes from the host (gVisor: they live in the sentry), this is how it sees them.
 *
 *   berth-bridge seccomp -- COMMAND [ARG ...]
 *     Runs COMMAND under a seccomp filter refusing what Docker's default profile refuses a
 *     process without capabilities (namespaces, mounts, keyrings, modules, BPF, perf, clocks...):
 *     gVisor applies the engine's profile to a container's first process only, not to execs.
 *
 *   berth-bridge prepare ROOT (dir|file):PATH ...
 *     A pod's init container (on Kubernetes, where berth's host cannot reach the tenant's volume):
 *     makes each PATH below ROOT a real directory or regular file, moving aside, without
 *     following links, whatever a tenant left in the way, before anything is mounted over it.
 *
 * On Kubernetes (no Unix socket crosses nodes) the pod's environment names BERTH_RELAY_TCP
 * (an IPv4 address:port, never a name: pods get no DNS) and BERTH_RELAY_TOKEN: each connection to
 * a socket then goes there over TCP, opened with "BERTH1 <token> <socket's file name>\n"
 * (src/launch/kube-relay.ts), and berth splices it to that socket of the run.
 *
 * Static, no dependencies; built by "berth images build".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
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

/* The run's socket through berth's relay listener (Kubernetes): TCP to an IPv4 address, then the opening line. */
static int connect_relay(const char *relay, const char *token, const char *path) {
  char host[64];
  const char *colon = strrchr(relay, ':');
  const char *name = strrchr(path, '/');
  name = name ? name + 1 : path;
  if (!colon || (size_t)(colon - relay) >= sizeof host || strlen(token) > 128 || strlen(name) > 64) {
    errno = EINVAL;
    return -1;
  }
  memcpy(host, relay, (size_t)(colon - relay));
  host[colon - relay] = 0;
  char *end;
  long port = strtol(colon + 1, &end, 10);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (*end || port < 1 || port > 65535 || inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
    errno = EINVAL;
    return -1;
  }
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return -1;
  char line[256];
  int n = snprintf(line, sizeof line, "BERTH1 %s %s\n", token, name);
  if (connect(s, (struct sockaddr *)&addr, sizeof addr) < 0 || write(s, line, (size_t)n) != n) {
    int saved = errno;
    close(s);
    errno = saved;
    return -1;
  }
  return s;
}

static int connect_unix(const char *path) {
  const char *relay = getenv("BERTH_RELAY_TCP");
  const char *token = getenv("BERTH_RELAY_TOKEN");
  if (relay && *relay && token && *token) return connect_relay(relay, token, path);
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
    /* The command's stdin and stdout are its own (idle's: berth's report channel). */
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      if (null > 1) close(null);
    }
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

static int numeric(const char *name) {
  if (!*name || strlen(name) > 10) return 0; /* a pid or tid has at most 10 digits */
  for (const char *c = name; *c; c++)
    if (*c < '0' || *c > '9') return 0;
  return 1;
}

/* One thread: "t TGID TID PPID STATE START THREADS COMM" from its stat (THREADS: its process's
   count). The name is the tenant's to pick (a space, a newline, a ")"), so only [!-~] is printed
   as is. tid NULL: the process's own stat, where its task list cannot be read (gVisor, once the
   leader is a zombie: its other threads may still run, and THREADS says so). */
static int report_thread(FILE *out, const char *tgid, const char *tid) {
  char path[64], stat[1024];
  if (tid) snprintf(path, sizeof path, "/proc/%s/task/%s/stat", tgid, tid);
  else snprintf(path, sizeof path, "/proc/%s/stat", tgid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0; /* exited meanwhile */
  ssize_t n = read(fd, stat, sizeof stat - 1);
  close(fd);
  if (n <= 0) return 0;
  stat[n] = 0;
  char *open_paren = strchr(stat, '('), *close_paren = strrchr(stat, ')');
  if (!open_paren || !close_paren || close_paren < open_paren) return 0;
  char comm[64];
  size_t len = (size_t)(close_paren - open_paren - 1);
  if (len >= sizeof comm) len = sizeof comm - 1;
  for (size_t i = 0; i < len; i++) comm[i] = open_paren[1 + i] > ' ' && open_paren[1 + i] < 127 ? open_paren[1 + i] : '?';
  comm[len] = 0;
  /* After the name: state (3), ppid (4), ... num_threads (20), starttime (22). */
  char state = 0;
  long ppid = 0, threads = 0;
  unsigned long long start = 0;
  char *rest = close_paren + 2;
  if (sscanf(rest, "%c %ld", &state, &ppid) != 2) return 0;
  for (int field = 3; field < 20 && rest; field++) rest = strchr(rest + 1, ' ');
  if (!rest || sscanf(rest, " %ld %*s %llu", &threads, &start) != 2) return 0;
  /* A process that has exited is gone, as one whose entry vanished: the scan reaped its own
     children first, so a zombie now exited during the scan (a process forking a successor and
     exiting leaves one, while the successor was born after the listing). A zombie leader whose
     other threads still run is not gone. */
  if ((state == 'Z' || state == 'X') && threads <= 1 && (!tid || strcmp(tid, tgid) == 0)) return 0;
  fprintf(out, "t %s %s %ld %c %llu %ld %s\n", tgid, tid ? tid : tgid, ppid, state, start, threads, comm[0] ? comm : "?");
  return 1;
}

static long mqueue_count(void) {
  DIR *d = opendir("/dev/mqueue");
  if (!d) return -1;
  long n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

union semun {
  int val;
  struct semid_ds *buf;
  unsigned short *array;
  struct seminfo *__buf;
};

/* Every thread listed in /proc, into `out`; returns how many were listed but gone when read. */
static int scan_threads(FILE *out) {
  int vanished = 0;
  DIR *proc = opendir("/proc");
  for (struct dirent *p; proc && (p = readdir(proc));) {
    if (!numeric(p->d_name)) continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/task", p->d_name);
    DIR *tasks = opendir(path);
    if (!tasks && !report_thread(out, p->d_name, NULL)) vanished++;
    for (struct dirent *t; tasks && (t = readdir(tasks));)
      if (numeric(t->d_name) && !report_thread(out, p->d_name, t->d_name)) vanished++;
    if (tasks) closedir(tasks);
  }
  if (proc) closedir(proc);
  return vanished;
}

/* Scans before one without a thread gone (vanished, or a zombie) while it was read: nothing of
   a tenant's should be exiting once its exec has ended, and a process that forks a successor and
   exits may be missed by a scan it outran. Past them: "churn N", which berth takes as something
   still running. */
#define SCAN_TRIES 20

/* A number from the start of a cgroup file, or of the line "KEY N" in it (KEY NULL: the first
   line's); -1 if it cannot be read. */
static long long cgroup_number(const char *path, const char *key) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[8192];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  const char *at = buf;
  if (key) {
    size_t len = strlen(key);
    for (char *line = buf; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
      if (strncmp(line, key, len) == 0 && line[len] == ' ') {
        at = line + len + 1;
        break;
      }
    if (at == buf) return -1;
  }
  char *end;
  long long v = strtoll(at, &end, 10);
  return end == at || v < 0 ? -1 : v;
}

/* The container's memory as its own cgroup counts it ("mem USAGE CACHE SHMEM", -1 where not
   readable): what berth weighs where it cannot read the cgroup from its host (a cluster's node).
   The cgroup files are the kernel's, mounted read-only: nothing in the container writes them. */
static void report_memory(void) {
  long long usage = cgroup_number("/sys/fs/cgroup/memory.current", NULL), cache = -1, shmem = -1;
  if (usage >= 0) {
    cache = cgroup_number("/sys/fs/cgroup/memory.stat", "file");
    shmem = cgroup_number("/sys/fs/cgroup/memory.stat", "shmem");
  } else if ((usage = cgroup_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", NULL)) >= 0) {
    cache = cgroup_number("/sys/fs/cgroup/memory/memory.stat", "total_cache");
    shmem = cgroup_number("/sys/fs/cgroup/memory/memory.stat", "total_shmem");
  }
  printf("mem %lld %lld %lld\n", usage, cache, shmem);
}

/* The mount points in the workspace ("mnt PATH", escaped as mountinfo writes them), at most
   1,024: berth checks that its mounts are still where it put them (a directory holding one can be
   renamed, and the mount moves with it). */
static void report_mounts(void) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  if (!f) return; /* no lines: berth finds none of its mounts, and keeps nothing */
  char line[8192];
  for (int n = 0; n < 1024 && fgets(line, sizeof line, f);) {
    char *point = line;
    for (int field = 0; field < 4 && point; field++) point = strchr(point, ' ') ? strchr(point, ' ') + 1 : NULL;
    char *end = point ? strchr(point, ' ') : NULL;
    if (!end) continue;
    *end = 0;
    if (strcmp(point, "/workspace") == 0 || strncmp(point, "/workspace/", 11) == 0) {
      printf("mnt %s\n", point);
      n++;
    }
  }
  fclose(f);
}

/* What the container holds now: every thread, then its IPC namespace ("ipc SHM_PAGES
   MSG_QUEUES SEM_SETS MQUEUES", -1 where the kernel did not say), its memory (report_memory),
   its workspace's mount points (report_mounts), then "end". */
static void report(void) {
  char *text = NULL;
  size_t len = 0;
  int vanished = 0;
  for (int try = 0; try < SCAN_TRIES; try++) {
    while (waitpid(-1, NULL, WNOHANG) > 0) continue; /* orphans re-parented to us: not the tenant's */
    free(text);
    text = NULL;
    FILE *out = open_memstream(&text, &len);
    if (!out) break;
    vanished = scan_threads(out);
    fclose(out);
    if (!vanished) break;
  }
  if (text) fwrite(text, 1, len, stdout);
  free(text);
  if (vanished) printf("churn %d\n", vanished);
  struct shm_info shm;
  struct msginfo msg;
  struct seminfo sem;
  union semun arg = {.__buf = &sem};
  long shm_pages = shmctl(0, SHM_INFO, (struct shmid_ds *)&shm) < 0 ? -1 : (long)shm.shm_tot;
  long queues = msgctl(0, MSG_INFO, (struct msqid_ds *)&msg) < 0 ? -1 : (long)msg.msgpool;
  long sets = semctl(0, 0, SEM_INFO, arg) < 0 ? -1 : (long)sem.semusz;
  printf("ipc %ld %ld %ld %ld\n", shm_pages, queues, sets, mqueue_count());
  report_memory();
  report_mounts();
  printf("end\n");
  fflush(stdout);
}

static int idle(void) {
  /* Exec made us dumpable again: what a message runs (same uid) must not ptrace the keep-alive. */
  prctl(PR_SET_DUMPABLE, 0);
  signal(SIGPIPE, SIG_IGN); /* berth closing the attach ends the reports, not the keep-alive */
  /* Pid 1 drops every signal it has no handler for (SIGKILL from outside aside): SIGTERM needs one. */
  struct sigaction sa = {.sa_sigaction = on_idle_signal, .sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP};
  sigset_t wanted, old;
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGCHLD);
  sigaddset(&wanted, SIGTERM);
  sigaddset(&wanted, SIGINT);
  /* Blocked outside ppoll: a signal arriving between the checks and the wait is not lost. */
  sigprocmask(SIG_BLOCK, &wanted, &old);
  sigaction(SIGCHLD, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigdelset(&old, SIGCHLD);
  sigdelset(&old, SIGTERM);
  sigdelset(&old, SIGINT);
  /* A relay's children are ours too (the relay execs us): reap what exited before the handler. */
  got_child = 1;
  /* stdin: berth's report requests, or /dev/null (end of file at once: no reports wanted). */
  struct pollfd in = {.fd = 0, .events = POLLIN};
  for (;;) {
    if (got_term) return 0;
    if (got_child) {
      got_child = 0;
      while (waitpid(-1, NULL, WNOHANG) > 0) continue;
    }
    if (ppoll(&in, 1, NULL, &old) < 0 || in.fd < 0 || !(in.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[256];
    ssize_t n = read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      in.fd = -1; /* ppoll ignores it from now on, and waits for signals only */
      continue;
    }
    for (ssize_t i = 0; i < n; i++)
      if (buf[i] == '\n') report();
  }
}

/* Syscalls Docker's default profile (moby profiles/seccomp/default.json) refuses a process with
   no capabilities; each exists on some architectures only. */
static const long refused[] = {
#define R(name) SYS_##name,
#ifdef SYS_acct
    R(acct)
#endif
#ifdef SYS_add_key
    R(add_key)
#endif
#ifdef SYS_bpf
    R(bpf)
#endif
#ifdef SYS_clock_adjtime
    R(clock_adjtime)
#endif
#ifdef SYS_clock_settime
    R(clock_settime)
#endif
#ifdef SYS_delete_module
    R(delete_module)
#endif
#ifdef SYS_finit_module
    R(finit_module)
#endif
#ifdef SYS_fsconfig
    R(fsconfig)
#endif
#ifdef SYS_fsmount
    R(fsmount)
#endif
#ifdef SYS_fsopen
    R(fsopen)
#endif
#ifdef SYS_fspick
    R(fspick)
#endif
#ifdef SYS_get_mempolicy
    R(get_mempolicy)
#endif
#ifdef SYS_init_module
    R(init_module)
#endif
#ifdef SYS_ioperm
    R(ioperm)
#endif
#ifdef SYS_iopl
    R(iopl)
#endif
#ifdef SYS_kcmp
    R(kcmp)
#endif
#ifdef SYS_kexec_file_load
    R(kexec_file_load)
#endif
#ifdef SYS_kexec_load
    R(kexec_load)
#endif
#ifdef SYS_keyctl
    R(keyctl)
#endif
#ifdef SYS_lookup_dcookie
    R(lookup_dcookie)
#endif
#ifdef SYS_mbind
    R(mbind)
#endif
#ifdef SYS_mount
    R(mount)
#endif
#ifdef SYS_move_mount
    R(move_mount)
#endif
#ifdef SYS_move_pages
    R(move_pages)
#endif
#ifdef SYS_name_to_handle_at
    R(name_to_handle_at)
#endif
#ifdef SYS_open_by_handle_at
    R(open_by_handle_at)
#endif
#ifdef SYS_open_tree
    R(open_tree)
#endif
#ifdef SYS_perf_event_open
    R(perf_event_open)
#endif
#ifdef SYS_pivot_root
    R(pivot_root)
#endif
#ifdef SYS_process_vm_readv
    R(process_vm_readv)
#endif
#ifdef SYS_process_vm_writev
    R(process_vm_writev)
#endif
#ifdef SYS_quotactl
    R(quotactl)
#endif
#ifdef SYS_reboot
    R(reboot)
#endif
#ifdef SYS_request_key
    R(request_key)
#endif
#ifdef SYS_set_mempolicy
    R(set_mempolicy)
#endif
#ifdef SYS_setns
    R(setns)
#endif
#ifdef SYS_settimeofday
    R(settimeofday)
#endif
#ifdef SYS_swapoff
    R(swapoff)
#endif
#ifdef SYS_swapon
    R(swapon)
#endif
#ifdef SYS_sysfs
    R(sysfs)
#endif
#ifdef SYS__sysctl
    R(_sysctl)
#endif
#ifdef SYS_syslog
    R(syslog)
#endif
#ifdef SYS_umount2
    R(umount2)
#endif
#ifdef SYS_unshare
    R(unshare)
#endif
#ifdef SYS_uselib
    R(uselib)
#endif
#ifdef SYS_userfaultfd
    R(userfaultfd)
#endif
#ifdef SYS_ustat
    R(ustat)
#endif
#ifdef SYS_vhangup
    R(vhangup)
#endif
#undef R
};

#if defined(__x86_64__)
#define BERTH_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define BERTH_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "berth-bridge seccomp: no audit arch for this architecture"
#endif

/* clone(2) flags that make namespaces (the profile allows clone without them). */
#define NAMESPACE_FLAGS (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)

static int seccomp_exec(int argc, char **argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "berth-bridge: seccomp wants \"-- COMMAND [ARG ...]\"\n");
    return 2;
  }
  struct sock_filter prog[8 + 2 * sizeof refused / sizeof refused[0] + 8];
  unsigned n = 0;
#define OP(code, k) (prog[n++] = (struct sock_filter)BPF_STMT(code, k))
#define JUMP(code, k, jt, jf) (prog[n++] = (struct sock_filter)BPF_JUMP(code, k, jt, jf))
  OP(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, BERTH_AUDIT_ARCH, 1, 0);
  OP(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  OP(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
  JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1); /* the x32 ABI: not in the profile either */
  OP(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
#endif
  /* clone: refused with namespace flags (x86_64 and arm64 both take the flags first). */
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4);
  OP(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
  JUMP(BPF_JMP | BPF_JSET | BPF_K, NAMESPACE_FLAGS, 0, 1);
  OP(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
  OP(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
#ifdef SYS_clone3
  /* clone3's flags are in memory the filter cannot read: ENOSYS makes libc fall back to clone. */
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1);
  OP(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
#endif
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)refused[i], 0, 1);
    OP(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
  }
  OP(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
#undef OP
#undef JUMP
  struct sock_fprog fprog = {.len = (unsigned short)n, .filter = prog};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) < 0) {
    fprintf(stderr, "berth-bridge: cannot install the seccomp filter: %s\n", strerror(errno));
    return 126;
  }
  execvp(argv[3], argv + 3);
  if (errno == ENOENT) fprintf(stderr, "%s: not found in this image\n", argv[3]);
  else fprintf(stderr, "berth-bridge: cannot run %s: %s\n", argv[3], strerror(errno));
  return errno == ENOENT ? 127 : 126;
}

/* ---- prepare: a pod's init container makes its volume what the plan says ---- */

/* Move what is at NAME out of the way, kept under a telling name (src/fs/tree.ts displace). */
static int aside(int dir, const char *name) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  char to[512];
  snprintf(to, sizeof to, "%s.displaced-by-berth-%lld", name, (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
  if (renameat(dir, name, dir, to) < 0) return -1;
  fprintf(stderr, "berth-bridge prepare: moved %s aside to %s\n", name, to);
  return 0;
}

/* The directory NAME below DIR, made if missing; anything else there (a link, a file, a fifo) is
   moved aside first. Never follows a link. */
static int dir_at(int dir, const char *name) {
  for (int tries = 0; tries < 3; tries++) {
    int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno == ENOENT) {
      if (mkdirat(dir, name, 0755) < 0 && errno != EEXIST) return -1;
    } else if (errno == ENOTDIR || errno == ELOOP) {
      if (aside(dir, name) < 0) return -1;
    } else {
      return -1;
    }
  }
  errno = EAGAIN;
  return -1;
}

/* A regular file NAME below DIR, made empty if missing; anything else there is moved aside. */
static int file_at(int dir, const char *name) {
  for (int tries = 0; tries < 3; tries++) {
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISREG(st.st_mode)) return 0;
      if (aside(dir, name) < 0) return -1;
      continue;
    }
    if (errno != ENOENT) return -1;
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) return close(fd), 0;
    if (errno != EEXIST) return -1;
  }
  errno = EAGAIN;
  return -1;
}

/* Whether PATH is relative, with no empty, "." or ".." part, and short enough to move aside. */
static int plain_relative(const char *path) {
  if (!*path || strlen(path) >= 4096) return 0;
  for (const char *part = path; part;) {
    const char *slash = strchr(part, '/');
    size_t len = slash ? (size_t)(slash - part) : strlen(part);
    if (len == 0 || len > 200 || (len == 1 && part[0] == '.') || (len == 2 && part[0] == '.' && part[1] == '.')) return 0;
    part = slash ? slash + 1 : NULL;
  }
  return 1;
}

/* berth-bridge prepare ROOT KIND:PATH...: each PATH (relative, no "." or ".." or empty part)
   below ROOT becomes a directory (dir) or a regular file (file), its parents directories, each
   step opened without following links: what the container runtime then mounts over is a real
   entry of the volume, not wherever a tenant's link points (Docker's host-side prepare step,
   src/runs/prepare-mounts.ts, for a volume berth's host cannot reach). */
static int prepare(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: berth-bridge prepare ROOT (dir|file):PATH ...\n");
    return 2;
  }
  int root = open(argv[2], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) {
    fprintf(stderr, "berth-bridge prepare: cannot open %s: %s\n", argv[2], strerror(errno));
    return 1;
  }
  /* Every entry is checked before anything is made: a bad one changes nothing. */
  for (int i = 3; i < argc; i++) {
    if (strncmp(argv[i], "dir:", 4) != 0 && strncmp(argv[i], "file:", 5) != 0) {
      fprintf(stderr, "berth-bridge prepare: %s is not dir:PATH or file:PATH\n", argv[i]);
      return 2;
    }
    if (!plain_relative(strchr(argv[i], ':') + 1)) {
      fprintf(stderr, "berth-bridge prepare: %s: not a plain relative path\n", strchr(argv[i], ':') + 1);
      return 2;
    }
  }
  for (int i = 3; i < argc; i++) {
    char *colon = strchr(argv[i], ':');
    int want_file = argv[i][0] == 'f';
    char path[4096];
    snprintf(path, sizeof path, "%s", colon + 1);
    int dir = dup(root);
    char *next = path;
    for (char *part = strsep(&next, "/"); part; part = strsep(&next, "/")) {
      int last = next == NULL;
      if (last && want_file) {
        if (file_at(dir, part) < 0) goto failed;
        break;
      }
      int sub = dir_at(dir, part);
      if (sub < 0) goto failed;
      close(dir);
      dir = sub;
      continue;
    failed:
      fprintf(stderr, "berth-bridge prepare: %s: %s: %s\n", colon + 1, part, strerror(errno));
      return 1;
    }
    close(dir);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "relay") == 0) return relay(argc, argv);
  if (argc == 2 && strcmp(argv[1], "idle") == 0) return idle();
  if (argc > 1 && strcmp(argv[1], "seccomp") == 0) return seccomp_exec(argc, argv);
  if (argc > 1 && strcmp(argv[1], "prepare") == 0) return prepare(argc, argv);
  return stdio_bridge(argc > 1 ? argv[1] : "/run/berth/gateway.sock");
}
