/*
 * berth-bridge: an MCP stdio server for agents, made of a Unix socket. It copies stdin to the
 * berth gateway socket (default /run/berth/gateway.sock) and the socket to stdout, so any
 * MCP-speaking agent CLI configured with {"command": "berth-bridge"} reaches berth's tools with
 * no network. Static, no dependencies; built by "berth images build".
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "/run/berth/gateway.sock";
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof addr.sun_path) {
    fprintf(stderr, "berth-bridge: socket path too long\n");
    return 2;
  }
  strcpy(addr.sun_path, path);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr) < 0) {
    fprintf(stderr, "berth-bridge: cannot connect to %s: %s\n", path, strerror(errno));
    return 1;
  }
  struct pollfd fds[2] = {{.fd = 0, .events = POLLIN}, {.fd = s, .events = POLLIN}};
  int stdin_open = 1;
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (stdin_open && (fds[0].revents & (POLLIN | POLLHUP))) {
      if (pump(0, s) <= 0) {
        stdin_open = 0;
        fds[0].fd = -1;
        shutdown(s, SHUT_WR); /* the gateway answers what was asked, then closes */
      }
    }
    if (fds[1].revents & (POLLIN | POLLHUP)) {
      if (pump(s, 1) <= 0) return 0;
    }
  }
}
