import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABELS } from '../../src/plan/labels.js';
import { testHome } from '../helpers.js';
import { startKubeRig, type KubeRig } from '../helpers/kube-rig.js';

/**
 * outside-attack-4 M4 on the cluster rig (real kube-apiserver, fake agent-sandbox controller, test
 * kubelet): a session's home and a project's workspaces are PVCs, and nothing deleted them, so a
 * deleted session's home came back for the next holder of its id (whoever that is: a chat's
 * session id stays when a Matrix DM becomes a group), and a deleted project's workspaces came back
 * with its name. Now a claim is bound to the host directory berth made for it (the one Docker
 * would mount), which berth removes with the session and the project; a claim whose directory is
 * gone is never mounted again, and `session delete` / `project delete` delete it on the cluster,
 * or keep it listed to delete when the cluster answers again.
 */

let rig: KubeRig;
let core: CoreV1Api;

beforeAll(async () => {
  rig = await startKubeRig();
  core = rig.cluster.kubeConfig.makeApiClient(CoreV1Api);
}, 600_000);

afterAll(async () => {
  await rig?.stop();
});

const kubeConfigText = (kubeconfig: string) =>
  `launcher: kubernetes\nkubernetes:\n  kubeconfig: ${kubeconfig}\n  namespace: ${rig.namespace}\n`;
const kubeHome = (kubeconfig = rig.berthKubeConfigFile, warm = false) =>
  testHome({ launcher: rig.launcher, warm, pool: 'off', config: kubeConfigText(kubeconfig) });

/** The project's claims on the cluster (any installation's), by name. */
async function claims(project: string): Promise<string[]> {
  const list = await core.listNamespacedPersistentVolumeClaim({ namespace: rig.namespace, labelSelector: `${LABELS.project}=${project}` });
  return list.items
    .filter((c) => !c.metadata?.deletionTimestamp)
    .map((c) => c.metadata!.name!)
    .sort();
}

describe('cluster volumes go with their session and project (outside-attack-4 M4)', () => {
  it("a deleted session's home never comes back under its id, whoever takes the id next; its claim is deleted", async () => {
    await using h = kubeHome();
    h.create({ name: 'kv-s', workspace_isolation: true, agent: 'shell' });
    const alice = await h.berth.runner.run({
      project: 'kv-s',
      tenantKey: 'web:alice',
      sessionId: 'support',
      message: 'echo alice-private-notes > $HOME/notes.txt; echo written',
    });
    expect(alice.exitCode, alice.stderr).toBe(0);
    const aliceHome = (await claims('kv-s')).filter((n) => n.startsWith('berth-home-'));
    expect(aliceHome).toHaveLength(1);

    expect(h.berth.admin.deleteSession('kv-s', 'support')).toMatchObject({ deleted: true });
    // The id's next holder (a DM that became a group, a caller choosing ids): a home of its own.
    const bob = await h.berth.runner.run({
      project: 'kv-s',
      tenantKey: 'web:bob',
      sessionId: 'support',
      message: 'ls -A $HOME; cat $HOME/notes.txt 2>&1; echo rc=$?',
    });
    expect(bob.stdout).not.toContain('alice-private-notes');
    expect(bob.stdout).toMatch(/No such file[\s\S]*rc=1/);

    await h.berth.admin.retireVolumes();
    const after = await claims('kv-s');
    expect(after).not.toContain(aliceHome[0]);
    expect(after.filter((n) => n.startsWith('berth-home-'))).toHaveLength(1); // bob's
  });

  it("the same with the session's pod kept warm: its pod goes with it, and the id's next holder mounts a home of its own", async () => {
    await using h = kubeHome(rig.berthKubeConfigFile, true);
    h.create({ name: 'kv-w', workspace_isolation: true, agent: 'shell' });
    const alice = await h.berth.runner.run({
      project: 'kv-w',
      tenantKey: 'matrix:@alice:example.org',
      sessionId: 'room-1',
      message: 'echo alice-private-notes > $HOME/notes.txt; echo written',
    });
    expect(alice.exitCode, alice.stderr).toBe(0);
    const aliceHome = (await claims('kv-w')).filter((n) => n.startsWith('berth-home-'));
    h.berth.admin.deleteSession('kv-w', 'room-1');
    const group = await h.berth.runner.run({
      project: 'kv-w',
      tenantKey: 'matrix-room:!room-1:example.org',
      sessionId: 'room-1',
      message: 'cat $HOME/notes.txt 2>&1; echo rc=$?',
    });
    expect(group.stdout).not.toContain('alice-private-notes');
    expect(group.stdout).toMatch(/rc=1/);
    await h.berth.admin.retireVolumes();
    expect(await claims('kv-w')).not.toContain(aliceHome[0]);
    await h.berth.runner.releaseWarm();
  });

  it("a deleted project's workspaces and homes never come back with its name; its claims are deleted", async () => {
    await using h = kubeHome();
    h.create({ name: 'kv-p', workspace_isolation: true, agent: 'shell' });
    const alice = await h.berth.runner.run({
      project: 'kv-p',
      tenantKey: 'web:alice',
      message: 'echo alice-ws > /workspace/alice.txt; echo alice-home > $HOME/h.txt; echo written',
    });
    expect(alice.exitCode, alice.stderr).toBe(0);
    const before = await claims('kv-p');
    expect(before.length).toBe(2);

    await h.berth.admin.deleteProject('kv-p', 'kv-p');
    h.create({ name: 'kv-p', workspace_isolation: true, agent: 'shell' });
    const again = await h.berth.runner.run({
      project: 'kv-p',
      tenantKey: 'web:alice',
      message: 'ls -A /workspace; cat /workspace/alice.txt $HOME/h.txt 2>&1; echo rc=$?',
    });
    expect(again.stdout).not.toContain('alice-ws');
    expect(again.stdout).not.toContain('alice-home');
    expect(again.stdout).toMatch(/rc=1/);

    await h.berth.admin.retireVolumes();
    const after = await claims('kv-p');
    for (const old of before) expect(after).not.toContain(old);
    expect(after).toHaveLength(2); // the new project's own
  });

  it("a shared-mode project's volume (every tenant's tree) does not come back with its name", async () => {
    await using h = kubeHome();
    h.create({ name: 'kv-sh', workspace_isolation: false, agent: 'shell' });
    const alice = await h.berth.runner.run({
      project: 'kv-sh',
      tenantKey: 'web:alice',
      message: 'echo team-notes > /workspace/team.txt; echo written',
    });
    expect(alice.exitCode, alice.stderr).toBe(0);
    const before = (await claims('kv-sh')).filter((n) => n.startsWith('berth-project-'));
    expect(before).toHaveLength(1);
    await h.berth.admin.deleteProject('kv-sh', 'kv-sh');
    h.create({ name: 'kv-sh', workspace_isolation: false, agent: 'shell' });
    const bob = await h.berth.runner.run({ project: 'kv-sh', tenantKey: 'web:bob', message: 'cat /workspace/team.txt 2>&1; echo rc=$?' });
    expect(bob.stdout).not.toContain('team-notes');
    await h.berth.admin.retireVolumes();
    expect(await claims('kv-sh')).not.toContain(before[0]);
  });

  it('a cluster that does not answer the deletion: the session is deleted all the same, its home is never mounted again, and the claim is deleted once the cluster answers', async () => {
    // berth's own calls go to a server that is not there (the runs still go to the rig's launcher).
    const deadDir = fs.mkdtempSync(join(os.tmpdir(), 'berth-dead-kube-'));
    const dead = join(deadDir, 'kubeconfig');
    fs.writeFileSync(dead, fs.readFileSync(rig.berthKubeConfigFile, 'utf8').replace(/server: \S+/, 'server: https://127.0.0.1:1'), {
      mode: 0o600,
    });
    await using h = kubeHome(dead);
    h.create({ name: 'kv-f', workspace_isolation: true, agent: 'shell' });
    const alice = await h.berth.runner.run({
      project: 'kv-f',
      tenantKey: 'web:alice',
      sessionId: 'chat-1',
      message: 'echo alice-private-notes > $HOME/notes.txt; echo written',
    });
    expect(alice.exitCode, alice.stderr).toBe(0);
    const aliceHome = (await claims('kv-f')).filter((n) => n.startsWith('berth-home-'));

    expect(h.berth.admin.deleteSession('kv-f', 'chat-1')).toMatchObject({ deleted: true });
    expect(() => h.berth.admin.getSession('kv-f', 'chat-1')).toThrow(expect.objectContaining({ code: 'SESSION_NOT_FOUND' }));
    expect(await h.berth.admin.retireVolumes()).toMatchObject({ deleted: 0, waiting: 1 });
    expect(await claims('kv-f')).toContain(aliceHome[0]);
    const bob = await h.berth.runner.run({
      project: 'kv-f',
      tenantKey: 'web:bob',
      sessionId: 'chat-1',
      message: 'cat $HOME/notes.txt 2>&1; echo rc=$?',
    });
    expect(bob.stdout).not.toContain('alice-private-notes');

    // The cluster answers again (here: berth.yaml names the right one): the claim goes.
    await h.berth.operator.setConfig(['kubernetes', 'kubeconfig'], rig.berthKubeConfigFile);
    expect(await h.berth.admin.retireVolumes()).toMatchObject({ deleted: 1, waiting: 0 });
    expect(await claims('kv-f')).not.toContain(aliceHome[0]);
    fs.rmSync(deadDir, { recursive: true, force: true });
  });
});
