import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { testHome, type TestHome } from '../helpers.js';
import { freePort } from '../helpers/chaos-rigs.js';
import { startKubeRig, type KubeRig } from '../helpers/kube-rig.js';
import { forgetNode, makeLocalVolumes, NODE_NAMES, waitNodeReady, type RealKubeInfo } from '../helpers/real-kube-cluster.js';
import { startRealNode, type RealNode } from '../helpers/real-kube-node.js';
import { kubePkiAt } from '../helpers/real-kube-pki.js';

/**
 * Two real kubelets on this machine (issue 44 item 4), only on the real tier (project kube-real):
 * the cluster's node and a second one this file starts, with its own name, root, cgroup root and
 * Docker engine (a kubelet removes every dockershim pod on its engine that is not its own). People's
 * sessions spread over both. Then the second node stops in the middle of a conversation.
 *
 * What berth can do then is bound by the volume: a session's workspace and home are
 * ReadWriteOnce claims on `local` PVs, which live on one node's disk (nodeAffinity), as local
 * disks, hostPath and most zonal cloud disks do. The session's next message cannot run elsewhere
 * with its workspace, and starting it empty elsewhere would lose the person's files. So the
 * person is told, within the start timeout, that the pod cannot be placed and why (the
 * scheduler's words), the other sessions go on, nothing is lost from the journal, and once the
 * node is back the session goes on with its workspace as it was.
 */

let info: RealKubeInfo;
let rig: KubeRig;
let h: TestHome;
let nodeB: RealNode | undefined;
const B = NODE_NAMES[1];

const startB = async (ports: { kubelet: number; healthz: number }) =>
  startRealNode({
    name: B,
    dir: info.runDir,
    bin: info.nodeBin,
    pki: kubePkiAt(info.pkiDir),
    server: info.server,
    token: info.nodeTokens[B]!,
    ports,
    ownEngine: true,
    bridge: info.bridge,
    subnet: info.subnet,
    range: { start: '10.244.250.128', end: '10.244.250.250' },
    pauseImage: info.pauseImage,
    images: ['berth/shell:latest'],
  });

beforeAll(async () => {
  const provided = inject('realKube');
  if (!provided) throw new Error('kubernetes-two-nodes runs on the real tier only (BERTH_TEST_KUBE=real, project kube-real)');
  info = provided;
  rig = await startKubeRig();
  const ports = { kubelet: await freePort(), healthz: await freePort() };
  nodeB = await startB(ports);
  info = { ...info, nodes: [...info.nodes, { name: B, dockerSocket: nodeB.dockerSocket }] };
  await waitNodeReady(rig.cluster.kubeConfig, B);
  await makeLocalVolumes(rig.cluster.kubeConfig, B, join(info.runDir, 'pv', B), 40);
  // No checkpoints: this file is about a node that goes away (kube-real-chat keeps one on the real node).
  h = testHome({ launcher: rig.launcher, warm: true, pool: 'off', config: 'launcher: kubernetes\ncheckpoints: { keep: 0 }\n' });
  h.create({ name: 'two', workspace_isolation: true, agent: 'shell' });
}, 300_000);

afterAll(async () => {
  await h?.berth.runner.releaseWarm().catch(() => undefined);
  await h?.[Symbol.asyncDispose]();
  await rig?.stop();
  await nodeB?.stop((ns) => ns.startsWith(info.nsPrefix));
  if (rig) await forgetNode(rig.cluster.kubeConfig, B);
});

const nodeOf = async (pod: string) =>
  (await rig.cluster.kubeConfig.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: rig.namespace, name: pod })).spec?.nodeName;

describe('berth on two real nodes', () => {
  it("spreads people's sessions over both; a node stopped mid-conversation: its session is told why it cannot go on elsewhere, the others go on, the journal keeps every run, and the session resumes with its workspace when the node is back", async () => {
    const people = ['alice', 'bob', 'carol', 'dave'];
    const where = new Map<string, string>();
    for (const p of people) {
      const r = await h.run('two', `web:${p}`, `echo ${p}-notes > /workspace/notes.txt; echo ok`);
      expect(r.exitCode, r.stderr).toBe(0);
      where.set(p, (await nodeOf(r.containerId!)) ?? '');
    }
    expect(new Set(where.values())).toEqual(new Set([NODE_NAMES[0], B]));
    const onB = people.find((p) => where.get(p) === B)!;
    const onA = people.find((p) => where.get(p) === NODE_NAMES[0])!;
    const warm = await h.run('two', `web:${onB}`, 'cat /workspace/notes.txt');
    expect(warm).toMatchObject({ exitCode: 0, warm: true, stdout: `${onB}-notes\n` });

    // The node goes away: its kubelet killed, its engine (and the pods on it) stopped.
    await nodeB!.stop(() => false);
    nodeB = undefined;
    const t0 = Date.now();
    const told = await h.run('two', `web:${onB}`, 'cat /workspace/notes.txt').catch((err: unknown) => err);
    const waited = Date.now() - t0;
    // The scheduler's reason, read from its event as soon as it gives one (POD_REFUSED).
    expect(told).toMatchObject({
      code: 'POD_REFUSED',
      // Or, placed on the stopped node before the scheduler took it for down (its grace period), that.
      message: expect.stringMatching(
        /volume node affinity conflict|node\(s\) had (taint|volume)|placed on node .*, whose kubelet has not (started|taken) it/,
      ),
    });
    console.info(`two nodes: the stopped node's session was told in ${(waited / 1000).toFixed(1)} s: ${(told as Error).message}`);

    // The other node's sessions go on.
    const other = await h.run('two', `web:${onA}`, 'cat /workspace/notes.txt');
    expect(other).toMatchObject({ exitCode: 0, stdout: `${onA}-notes\n` });

    // Nothing lost from the journal: every run of the session is there, none left open.
    expect(h.berth.admin.openRuns('two')).toEqual([]);
    const runs = h.berth.admin.listRuns('two', { user: `web:${onB}` }).runs;
    expect(runs.filter((r) => r.exit_code === 0)).toHaveLength(2);

    // The node is back (same root, same disk): the session goes on with its workspace.
    nodeB = await startB({ kubelet: await freePort(), healthz: await freePort() });
    await waitNodeReady(rig.cluster.kubeConfig, B);
    const back = await h.run('two', `web:${onB}`, 'cat /workspace/notes.txt');
    expect(back).toMatchObject({ exitCode: 0, stdout: `${onB}-notes\n` });
    expect(await nodeOf(back.containerId!)).toBe(B);
  });
});
