import fs from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_API } from '../../src/launch/kubernetes/objects.js';
import { listCheckpoints } from '../../src/store/checkpoints.js';
import { testHome } from '../helpers.js';
import { startKubeRig, type KubeRig } from '../helpers/kube-rig.js';

/**
 * Checkpoints, undo and fork under `launcher: kubernetes` (docs/checkpoints.md, "Kubernetes"), on
 * the cluster rig (real kube-apiserver, fake agent-sandbox controller, test kubelet; the real node
 * in kube-real) with deploy/rbac.yaml's grants: no CSI snapshotter runs here, so the copy pod does
 * it, mounting the session's claims and the tenant's checkpoint claim. A session's pod is kept warm
 * between messages, as in `berth serve`.
 */

let rig: KubeRig;

beforeAll(async () => {
  rig = await startKubeRig();
}, 600_000);

afterAll(async () => {
  await rig?.stop();
});

const sandboxes = async () =>
  (
    (await rig.cluster.kubeConfig
      .makeApiClient(CustomObjectsApi)
      .listNamespacedCustomObject({ ...SANDBOX_API, namespace: rig.namespace })) as { items: Array<{ metadata: { name: string } }> }
  ).items.map((s) => s.metadata.name);

const kubeYaml = () => `launcher: kubernetes\nkubernetes:\n  kubeconfig: ${rig.berthKubeConfigFile}\n  namespace: ${rig.namespace}\n`;

describe('checkpoints on a cluster: a copy pod per checkpoint, restore and fork', () => {
  it('a message changes a file, the restore brings it back (the warm pod replaced), a fork has the files, the list shows them', async () => {
    await using h = testHome({
      launcher: rig.launcher,
      warm: true,
      pool: 'off',
      config: kubeYaml(),
    });
    h.create({ name: 'kc', workspace_isolation: true, agent: 'shell' });
    const run = (session: string, message: string) =>
      h.berth.runner.run({ project: 'kc', tenantKey: 'web:alice', sessionId: session, message });

    const first = await run('s1', 'echo one > /workspace/notes.txt; ln -s /etc/passwd /workspace/link; echo said-one > $HOME/talk.txt');
    expect(first.exitCode, first.stderr).toBe(0);
    const second = await run('s1', 'echo two > /workspace/notes.txt; echo extra > /workspace/extra.txt; echo said-two >> $HOME/talk.txt');
    expect(second.exitCode, second.stderr).toBe(0);
    expect(second.warm).toBe(true);

    const list = h.berth.admin.sessionCheckpoints('kc', 's1');
    // Before the first message the session had no volumes (nothing copied); before the second, a copy.
    expect(list.map((c) => c.message?.slice(0, 13))).toEqual(['echo one > /w', 'echo two > /w']);
    expect(list[0]).toMatchObject({ bytes: 0, files: 0 });
    expect(list[1]?.files).toBeGreaterThanOrEqual(3);
    expect(list[1]?.bytes).toBeGreaterThan(0);
    const claims = await rig.cluster.kubeConfig
      .makeApiClient(CoreV1Api)
      .listNamespacedPersistentVolumeClaim({ namespace: rig.namespace, labelSelector: 'berth.project=kc' });
    expect(claims.items.filter((c) => c.metadata?.name?.startsWith('berth-ckpt-'))).toHaveLength(1);

    const copyMs = listCheckpoints(h.berth.store.get('kc'), 'web:alice', 's1')[1]?.ms ?? 0;
    const t0 = performance.now();
    const back = await h.berth.admin.restoreSession('kc', 's1');
    const restoreMs = performance.now() - t0;
    expect(back.id).toBe(list[1]?.id);
    const after = await run('s1', 'cat /workspace/notes.txt $HOME/talk.txt; ls -A /workspace; readlink /workspace/link');
    expect(after.exitCode, after.stderr).toBe(0);
    // The restore replaced the warm pod: this message started a new one on the volumes put back.
    expect(after.warm).toBe(false);
    const [notes, talk, ...rest] = after.stdout.trim().split('\n');
    expect([notes, talk]).toEqual(['one', 'said-one']);
    expect(rest).toContain('notes.txt');
    expect(rest).not.toContain('extra.txt');
    expect(rest.at(-1)).toBe('/etc/passwd'); // the link came back as a link, never followed
    // Used up: /undo again goes one message further back.
    expect(h.berth.admin.sessionCheckpoints('kc', 's1').map((c) => c.id)).toEqual([list[0]?.id, expect.any(String)]);

    await h.berth.admin.forkSession('kc', 's1', 's1-fork');
    const fork = await run('s1-fork', 'cat /workspace/notes.txt $HOME/talk.txt; echo forked > /workspace/notes.txt');
    expect(fork.exitCode, fork.stderr).toBe(0);
    expect(fork.stdout).toBe('one\nsaid-one\n');
    const left = await run('s1', 'cat /workspace/notes.txt');
    expect(left.stdout).toBe('one\n'); // the fork's workspace is its own

    // No copy pod is left; the tenant's checkpoint claim stays for the next checkpoint.
    expect((await sandboxes()).filter((n) => n.startsWith('berth-ckpt-'))).toEqual([]);
    console.log(
      `kube checkpoints: copy before a message ${Math.round(copyMs)} ms (${list[1]?.files} files), restore ${Math.round(restoreMs)} ms`,
    );
    await h.berth.runner.releaseWarm();
  });

  it("a copy pod the cluster does not run fails the snapshot with the kubelet's reason, leaving nothing behind", async () => {
    await using h = testHome({ launcher: rig.launcher, warm: false, pool: 'off', config: kubeYaml() });
    h.create({ name: 'kc-bad', workspace_isolation: true, agent: 'shell' });
    const first = await h.berth.runner.run({ project: 'kc-bad', tenantKey: 'web:bob', sessionId: 's', message: 'echo x > /workspace/x' });
    expect(first.exitCode, first.stderr).toBe(0);
    const kept = h.berth.admin.sessionCheckpoints('kc-bad', 's');
    // The copy pod's image is berth's shell image: one no node has.
    fs.appendFileSync(join(h.home, 'berth.yaml'), 'images:\n  shell: berth/no-such-image:0\n');
    await expect(h.berth.admin.snapshotSession('kc-bad', 's')).rejects.toMatchObject({
      code: 'RUN_FAILED',
      message: expect.stringMatching(/the checkpoint's copy pod did not start: (ErrImage|ImagePull)/),
    });
    expect(h.berth.admin.sessionCheckpoints('kc-bad', 's')).toEqual(kept);
    expect((await sandboxes()).filter((n) => n.startsWith('berth-ckpt-'))).toEqual([]);
  });
});
