import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABELS } from '../../src/plan/labels.js';
import { testHome, type TestHome } from '../helpers.js';
import { startKubeRig, type KubeRig } from '../helpers/kube-rig.js';
import { startLoopbackSite } from '../helpers/loopback-site.js';

/**
 * outside-attack-4 M5 on the cluster rig: one tenant's pod opens more connections to berth's
 * relay listener than it holds for everyone (its address is in every pod's environment, and its
 * NetworkPolicy lets every pod reach it), says nothing on them and opens again each one the
 * relay closes, while another tenant's pod reaches berth's egress proxy through the relay with
 * its own token. Each pod connects from its own address: the relay holds one address's silent
 * connections to a few, and a pod with a token still gets through.
 */

/** mallory's program (what a tenant can upload): N connections to $BERTH_RELAY_TCP, silent, each reopened when closed, until the file STOP appears. */
const HOLD_C = String.raw`
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
static struct sockaddr_in relay;
static int open_one(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s >= 0 && connect(s, (struct sockaddr *)&relay, sizeof relay) < 0) { close(s); return -1; }
  return s;
}
int main(int argc, char **argv) {
  char host[64];
  const char *addr = getenv("BERTH_RELAY_TCP");
  if (argc != 3) return 2;
  int n = atoi(argv[1]);
  if (!addr || n < 1 || n > 1000) return 2;
  const char *colon = strrchr(addr, ':');
  memcpy(host, addr, colon - addr);
  host[colon - addr] = 0;
  relay.sin_family = AF_INET;
  relay.sin_port = htons(atoi(colon + 1));
  inet_pton(AF_INET, host, &relay.sin_addr);
  struct pollfd fds[1000];
  long opened = 0;
  for (int i = 0; i < n; i++) { fds[i].fd = open_one(); fds[i].events = POLLIN; opened++; }
  printf("holding %d\n", n);
  fflush(stdout);
  while (access(argv[2], F_OK) != 0) {
    if (poll(fds, n, 100) < 0) continue;
    for (int i = 0; i < n; i++) {
      if (fds[i].fd < 0 || fds[i].revents) {
        if (fds[i].fd >= 0) close(fds[i].fd);
        fds[i].fd = open_one();
        fds[i].revents = 0;
        opened++;
      }
    }
  }
  printf("held %d (%ld opened)\n", n, opened);
  return 0;
}
`;

let rig: KubeRig;
let h: TestHome;
let site: Awaited<ReturnType<typeof startLoopbackSite>>;
const scratch = fs.mkdtempSync(join(os.tmpdir(), 'berth-relay-hold-'));

beforeAll(async () => {
  rig = await startKubeRig();
  site = await startLoopbackSite();
  h = testHome({ launcher: rig.launcher, warm: false, pool: 'off', config: 'launcher: kubernetes\n' });
  await h.berth.operator.setConfig(['egress', 'private_hosts'], [`localhost:${site.port}`]);
  h.create({ name: 'kr', workspace_isolation: true, agent: 'shell', egress: { allow: [`localhost:${site.port}`] } });
}, 600_000);

afterAll(async () => {
  site?.close();
  await h?.[Symbol.asyncDispose]();
  await rig?.stop();
  fs.rmSync(scratch, { recursive: true, force: true });
});

describe("the relay under one pod's silent connections (outside-attack-4 M5)", () => {
  it("another tenant's pod reaches the egress proxy through the relay while mallory's pod holds 300 silent connections", async () => {
    const fetch = `wget -qO- http://localhost:${site.port}/bob 2>&1; echo rc=$?`;
    const before = await h.run('kr', 'web:bob', fetch, 'medium');
    expect(before.stdout).toContain('fetched /bob');

    // mallory's program, uploaded into her workspace volume (here from the node's side).
    const first = await h.run('kr', 'web:mallory', 'true');
    expect(first.exitCode, first.stderr).toBe(0);
    const core = rig.cluster.kubeConfig.makeApiClient(CoreV1Api);
    const claims = await core.listNamespacedPersistentVolumeClaim({ namespace: rig.namespace, labelSelector: `${LABELS.project}=kr` });
    const bobWorkspace = before.workspaceId;
    const mallorys = claims.items.find(
      (c) => c.metadata?.annotations?.[`berth.dev/${LABELS.workspace}`] !== bobWorkspace && c.metadata?.name?.startsWith('berth-ws-'),
    );
    const malloryDir = await rig.claimDir(mallorys!.metadata!.name!);
    const hold = join(malloryDir, 'hold');
    fs.writeFileSync(join(scratch, 'hold.c'), HOLD_C);
    execFileSync('gcc', ['-static', '-O2', '-o', hold, join(scratch, 'hold.c')]);
    fs.chmodSync(hold, 0o755);

    let holding!: () => void;
    const held = new Promise<void>((r) => (holding = r));
    const mallory = h.berth.runner.run({
      project: 'kr',
      tenantKey: 'web:mallory',
      level: 'medium',
      message: '/workspace/hold 300 /workspace/stop',
      onOutput: (_stream, chunk) => void (chunk.toString().includes('holding') && holding()),
    });
    await Promise.race([held, mallory]);
    const during = [];
    for (let i = 0; i < 3; i++) during.push((await h.run('kr', 'web:bob', fetch, 'medium')).stdout);
    fs.writeFileSync(join(malloryDir, 'stop'), '');
    const m = await mallory;
    expect(m.stdout, m.stderr).toMatch(/^holding 300\nheld 300 \(\d+ opened\)/);
    expect(during).toEqual(Array.from({ length: 3 }, () => expect.stringContaining('fetched /bob')));
  });
});
