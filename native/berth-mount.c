/*
 * berth-mount: attach host directories and files to a running container's mount namespace (the
 * pre-started pool: a container started before its tenant is known gets the tenant's workspace
 * when it is claimed). berth runs it as root on its own host, for runc/crun containers.
 *
 *   berth-mount PROCFD CONTAINER STARTTIME SPEC...      SPEC = FD:MODE:TARGET
 *
 * PROCFD is a descriptor on /proc/PID of the container's first process, which berth opened when it
 * started the container and kept: it names that process, not a number, so once the process is
 * gone every open through it fails, even when another process holds the same PID by now. Through
 * it the helper opens the process's root and mount namespace, then checks the process still is the
 * container's (its cgroup names CONTAINER, the 64-hex engine id; its start time, field 22 of stat,
 * is STARTTIME) and that its mount namespace is not the helper's own.
 * FD is a descriptor berth opened (without following links) and passed down; MODE is r (read-only)
 * or w; TARGET is an absolute path inside the container where a blank stand-in is mounted (the
 * pool container was made with one at each); the stand-ins are unmounted first, deepest first, so
 * the container's mount table is then what a container started with these mounts would have.
 * Nothing here resolves a host path: each
 * source is cloned from its descriptor (open_tree), made read-only on the clone itself when asked
 * (mount_setattr, so no remount can race it), and every clone is made before entering the
 * container. Each target is resolved inside the container's root with no symlink and no magic
 * link followed (openat2 RESOLVE_IN_ROOT), in the order given, so a file mounted over a file of a
 * directory mounted just before lands on that directory's file. Exit 0: all attached; 1: what
 * failed is on stderr (a partial attach is the caller's to throw away with the container).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_SPECS 64

static int fail(const char *what, const char *target) {
  fprintf(stderr, "berth-mount: %s%s%s: %s\n", what, target ? " " : "", target ? target : "", strerror(errno));
  return 1;
}

static int parse_int(const char *s, int max) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end != '\0' || v < 0 || v > max) return -1;
  return (int)v;
}

/* The whole of a small /proc file opened at `dirfd`, NUL-terminated; -1 if it cannot be read. */
static ssize_t read_at(int dirfd, const char *name, char *buf, size_t size) {
  int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  size_t got = 0;
  for (ssize_t r; got < size - 1 && (r = read(fd, buf + got, size - 1 - got)) != 0; got += (size_t)r) {
    if (r < 0) {
      close(fd);
      return -1;
    }
  }
  close(fd);
  buf[got] = '\0';
  return (ssize_t)got;
}

/* Field 22 of /proc/PID/stat (after the command's closing parenthesis, which may itself hold any byte). */
static int start_time_of(int procfd, char *out, size_t size) {
  char stat[4096];
  if (read_at(procfd, "stat", stat, sizeof stat) < 0) return -1;
  char *p = strrchr(stat, ')');
  if (!p) return -1;
  for (int field = 2; field < 22; field++) {
    p = strchr(p + 1, ' ');
    if (!p) return -1;
  }
  size_t len = strcspn(p + 1, " ");
  if (len == 0 || len >= size) return -1;
  memcpy(out, p + 1, len);
  out[len] = '\0';
  return 0;
}

/* The container's process is gone, or is not the container's: exit 3, nothing touched. */
static int gone(const char *why) {
  fprintf(stderr, "berth-mount: %s\n", why);
  return 3;
}

static int is_digits(const char *s) {
  if (!*s || strlen(s) > 20) return 0;
  for (const char *c = s; *c; c++) {
    if (*c < '0' || *c > '9') return 0;
  }
  return 1;
}

static int is_engine_id(const char *s) {
  if (strlen(s) != 64) return 0;
  for (const char *c = s; *c; c++) {
    if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 5 || argc - 4 > MAX_SPECS) {
    fprintf(stderr, "usage: berth-mount PROCFD CONTAINER STARTTIME FD:r|w:TARGET... (at most %d)\n", MAX_SPECS);
    return 2;
  }
  int procfd = parse_int(argv[1], 1 << 20);
  if (procfd < 3) {
    fprintf(stderr, "berth-mount: bad process descriptor \"%s\"\n", argv[1]);
    return 2;
  }
  const char *container = argv[2];
  const char *started = argv[3];
  if (!is_engine_id(container) || !is_digits(started)) {
    fprintf(stderr, "berth-mount: bad container id or start time\n");
    return 2;
  }
  argc -= 2;
  argv += 2;
  int n = argc - 2;
  int trees[MAX_SPECS];
  const char *targets[MAX_SPECS];
  for (int i = 0; i < n; i++) {
    char *spec = argv[i + 2];
    char *mode = strchr(spec, ':');
    char *target = mode ? strchr(mode + 1, ':') : NULL;
    if (!mode || !target || target != mode + 2 || (mode[1] != 'r' && mode[1] != 'w') || target[1] != '/') {
      fprintf(stderr, "berth-mount: bad spec \"%s\" (FD:r|w:/TARGET)\n", spec);
      return 2;
    }
    *mode = '\0';
    int fd = parse_int(spec, 1 << 20);
    if (fd < 3) {
      fprintf(stderr, "berth-mount: bad descriptor \"%s\"\n", spec);
      return 2;
    }
    targets[i] = target + 1;
    trees[i] = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (trees[i] < 0) return fail("clone of the source for", targets[i]);
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (mode[1] == 'r' ? MOUNT_ATTR_RDONLY : 0)};
    if (mount_setattr(trees[i], "", AT_EMPTY_PATH, &attr, sizeof attr) < 0) return fail("mount options of", targets[i]);
    close(fd);
  }

  int root = openat(procfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return gone("the container's process is gone (its root cannot be opened)");
  int ns = openat(procfd, "ns/mnt", O_RDONLY | O_CLOEXEC);
  if (ns < 0) return gone("the container's process is gone (its mount namespace cannot be opened)");
  /* Checked after both are open: what they came from is the process checked here. */
  char cgroup[8192], start[32];
  if (read_at(procfd, "cgroup", cgroup, sizeof cgroup) < 0 || start_time_of(procfd, start, sizeof start) < 0) {
    return gone("the container's process is gone (its cgroup and start time cannot be read)");
  }
  if (!strstr(cgroup, container) || strcmp(start, started) != 0) return gone("the process is not the container's first process any more");
  struct stat theirs, ours;
  if (fstat(ns, &theirs) < 0 || stat("/proc/self/ns/mnt", &ours) < 0) return fail("the mount namespaces", NULL);
  if (theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev) return gone("the process is in the host's mount namespace, not a container's");
  close(procfd);
  if (setns(ns, CLONE_NEWNS) < 0) return fail("entering the container's mount namespace", NULL);
  /* Paths below resolve as they do in the container. */
  if (fchdir(root) < 0 || chroot(".") < 0) return fail("entering the container's root", NULL);

  for (int i = n - 1; i >= 0; i--) {
    if (umount2(targets[i], MNT_DETACH | UMOUNT_NOFOLLOW) < 0) return fail("unmounting the stand-in at", targets[i]);
  }

  for (int i = 0; i < n; i++) {
    struct open_how how = {
        .flags = O_PATH | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    const char *relative = targets[i] + 1; /* below the container's root */
    int at = (int)syscall(SYS_openat2, root, *relative ? relative : ".", &how, sizeof how);
    if (at < 0) return fail("the mount point", targets[i]);
    if (move_mount(trees[i], "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) return fail("attaching", targets[i]);
    close(at);
  }
  return 0;
}
