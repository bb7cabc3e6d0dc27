/*
 * berth-mount: attach host directories and files to a running container's mount namespace (the
 * pre-started pool: a container started before its tenant is known gets the tenant's workspace
 * when it is claimed). berth runs it as root on its own host, for runc/crun containers.
 *
 *   berth-mount PID SPEC...      SPEC = FD:MODE:TARGET
 *
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

int main(int argc, char **argv) {
  if (argc < 3 || argc - 2 > MAX_SPECS) {
    fprintf(stderr, "usage: berth-mount PID FD:r|w:TARGET... (at most %d)\n", MAX_SPECS);
    return 2;
  }
  int pid = parse_int(argv[1], INT_MAX);
  if (pid <= 0) {
    fprintf(stderr, "berth-mount: bad pid \"%s\"\n", argv[1]);
    return 2;
  }
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

  char path[64];
  snprintf(path, sizeof path, "/proc/%d/root", pid);
  int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return fail("the container's root", path);
  snprintf(path, sizeof path, "/proc/%d/ns/mnt", pid);
  int ns = open(path, O_RDONLY | O_CLOEXEC);
  if (ns < 0) return fail("the container's mount namespace", path);
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
