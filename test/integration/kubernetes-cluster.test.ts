import { CoreV1Api, CustomObjectsApi, NodeV1Api, StorageV1Api, Watch, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_API } from '../../src/launch/kubernetes/objects.js';
import { RUN_DIR_MOUNT, TMP_BYTES, type RunPlan } from '../../src/plan/run-plan.js';
import type { IdleContainer } from '../../src/launch/launcher.js';
import { contractHome } from '../contract/contract-plan.js';
import { startKubeRig, type KubeRig } from '../helpers/kube-rig.js';
import { eventually, until } from '../helpers/until.js';

/**
 * What a real cluster showed that the first fakes did not (shared/kubernetes-reality-4.md, issue
 * 44 item 3), held as behaviour a launcher must have on any node: pods request an idle agent's
 * share, a pod the cluster refuses fails in seconds with the cluster's words, removal leaves the
 * pod to the garbage collector, the relay token is in no pod spec, storage that ignores fsGroup is
 * named, and /tmp's bound holds. On the test rig the scheduler's fit, FailedScheduling,
 * dockershim's FailedCreatePodSandBox and a hostPath volume's ownership are the test kubelet's, as
 * the real components do them.
 */

let rig: KubeRig;
const contract = contractHome({ image: 'berth/shell:latest', runtime: 'runc' });
const core = () => rig.cluster.kubeConfig.makeApiClient(CoreV1Api);
const HEX_TOKEN = /[0-9a-f]{64}/;

beforeAll(async () => {
  rig = await startKubeRig();
}, 600_000);

afterAll(async () => {
  await rig?.stop();
  await contract.cleanup();
});

const readPod = (name: string) => core().readNamespacedPod({ name, namespace: rig.namespace });
const readSandbox = (name: string) =>
  rig.cluster.kubeConfig
    .makeApiClient(CustomObjectsApi)
    .getNamespacedCustomObject({ ...SANDBOX_API, namespace: rig.namespace, name })
    .then(
      (s) => s as object,
      (err: { code?: number }) => (err.code === 404 ? undefined : Promise.reject(err)),
    );

describe('a pod as a real cluster schedules it', () => {
  it("requests an idle agent's share, the limits the plan's: three 1-CPU sessions stay up together on a 2-CPU node", async () => {
    const started: IdleContainer[] = [];
    try {
      for (const tenant of ['a', 'b', 'a'] as const) {
        const plan = contract.plan({ argv: ['true'], tenant, project: `idle-${started.length}` });
        started.push(await rig.launcher.startIdle(plan, plan.keepAlive));
      }
      for (const s of started) {
        const agent = (await readPod(s.containerId)).spec?.containers[0];
        expect(agent?.resources).toEqual({
          limits: { cpu: '1', memory: String(512 * 1024 ** 2) },
          requests: { cpu: '50m', memory: String(64 * 1024 ** 2) },
        });
        expect((await readPod(s.containerId)).status?.phase).toBe('Running');
      }
    } finally {
      await rig.launcher.removeContainers(started.map((s) => s.containerId));
    }
  });

  it("fails a pod no node has room for at once, in the scheduler's words (POD_REFUSED), not after the start timeout", async () => {
    const greedy = rig.launcherWith({ cpu_request: 64, start_timeout_seconds: 3600 });
    const plan = contract.plan({ argv: ['true'], project: 'greedy', limits: { cpus: 64 } });
    await expect(greedy.run(plan)).rejects.toMatchObject({ code: 'POD_REFUSED', message: expect.stringMatching(/Insufficient cpu/) });
    // Nothing of it stays.
    await eventually(async () => expect(await greedy.listManaged({ installation: contract.installation, project: 'greedy' })).toEqual([]));
  });

  it("fails a pod whose RuntimeClass handler no node has, with the kubelet's FailedCreatePodSandBox (POD_REFUSED)", async () => {
    await rig.cluster.kubeConfig
      .makeApiClient(NodeV1Api)
      .createRuntimeClass({ body: { metadata: { name: 'berth-no-handler' }, handler: 'berth-no-handler' } });
    const home = contractHome({ image: 'berth/shell:latest', runtime: 'berth-no-handler' });
    try {
      await expect(rig.launcher.run(home.plan({ argv: ['true'] }))).rejects.toMatchObject({
        code: 'POD_REFUSED',
        message: expect.stringMatching(/FailedCreatePodSandBox[\s\S]*berth-no-handler/),
      });
    } finally {
      await home.cleanup();
      await rig.cluster.kubeConfig.makeApiClient(NodeV1Api).deleteRuntimeClass({ name: 'berth-no-handler' });
    }
  });
});

describe('what a run leaves on the cluster', () => {
  it('removes a run by its Sandbox alone: the pod goes after it, through the garbage collector, and only once its kubelet stopped it', async () => {
    const plan = contract.plan({ argv: ['true'], project: 'removal' });
    const { containerId: name } = await rig.launcher.startIdle(plan, plan.keepAlive);
    const seen: Array<{ type: string; pod: V1Pod; sandboxGone: boolean }> = [];
    const watch = await new Watch(rig.cluster.kubeConfig).watch(
      `/api/v1/namespaces/${rig.namespace}/pods`,
      { fieldSelector: `metadata.name=${name}` },
      (type: string, pod: V1Pod) => void readSandbox(name).then((s) => seen.push({ type, pod, sandboxGone: s === undefined })),
      () => {},
    );
    try {
      await rig.launcher.removeContainers([name]);
      expect(await readSandbox(name)).toBeUndefined();
      await until(() => seen.some((e) => e.type === 'DELETED'), 'the pod deleted');
      const terminating = seen.find((e) => e.pod.metadata?.deletionTimestamp);
      // A graceful deletion (never grace 0: the pod stays in the API until its kubelet stopped it), begun after the Sandbox went.
      expect(terminating?.pod.metadata?.deletionGracePeriodSeconds).toBeGreaterThan(0);
      expect(terminating?.sandboxGone).toBe(true);
    } finally {
      watch.abort();
    }
  });

  it("keeps the relay token out of the pod spec and the Sandbox: a Secret of the run's, which the agent reads as before and which goes with the run", async () => {
    const base = contract.plan({ argv: ['true'], project: 'token' });
    // A run with berth's sockets (the gateway, the egress proxy): its pod reaches them through the relay.
    const plan: RunPlan = {
      ...base,
      mounts: [...base.mounts, { type: 'bind', source: contract.home, target: RUN_DIR_MOUNT, readOnly: true }],
    };
    const { containerId: name } = await rig.launcher.startIdle(plan, plan.keepAlive);
    try {
      expect(JSON.stringify((await readPod(name)).spec)).not.toMatch(HEX_TOKEN);
      expect(JSON.stringify(await readSandbox(name))).not.toMatch(HEX_TOKEN);
      const secret = await core().readNamespacedSecret({ name: `${name}-relay`, namespace: rig.namespace });
      expect(Buffer.from(secret.data?.token ?? '', 'base64').toString()).toMatch(/^[0-9a-f]{64}$/);
      const r = await rig.launcher.execIn(name, plan, ['sh', '-c', 'echo "${#BERTH_RELAY_TOKEN} $BERTH_RELAY_TCP"']);
      expect('gone' in r ? r : r.stdout).toMatch(/^64 \d+\.\d+\.\d+\.\d+:\d+\n$/);
    } finally {
      await rig.launcher.removeContainers([name]);
    }
    await expect(core().readNamespacedSecret({ name: `${name}-relay`, namespace: rig.namespace })).rejects.toMatchObject({ code: 404 });
  });
});

describe('storage and /tmp as a real node has them', () => {
  it('names the StorageClass when the agent cannot write its volume (storage that ignores fsGroup, as hostPath does): VOLUME_UNWRITABLE', async () => {
    await rig.cluster.kubeConfig.makeApiClient(StorageV1Api).createStorageClass({
      body: { metadata: { name: 'berth-test-hostpath' }, provisioner: 'kubernetes.io/host-path', volumeBindingMode: 'Immediate' },
    });
    const onHostPath = rig.launcherWith({ storage_class: 'berth-test-hostpath' });
    await expect(onHostPath.run(contract.plan({ argv: ['true'], project: 'hostpath' }))).rejects.toMatchObject({
      code: 'VOLUME_UNWRITABLE',
      message: expect.stringMatching(/\/workspace: claim berth-ws-[0-9a-f]+, StorageClass "berth-test-hostpath"/),
    });
  });

  it('bounds /tmp: writing past its size is ENOSPC in the run (kubelet ≥ 1.22), or the pod evicted and the session told why (older kubelets)', async () => {
    const plan = contract.plan({ argv: ['true'], project: 'tmp' });
    const { containerId: name } = await rig.launcher.startIdle(plan, plan.keepAlive);
    try {
      const mib = TMP_BYTES / 1024 ** 2 + 8;
      const r = await rig.launcher.execIn(name, plan, [
        'sh',
        '-c',
        `dd if=/dev/zero of=/tmp/fill bs=1048576 count=${mib} 2>&1; echo rc=$?`,
      ]);
      if ('gone' in r || !/No space left on device/.test(r.stdout)) {
        await eventually(async () => {
          const next = await rig.launcher.execIn(name, plan, ['true']);
          expect('gone' in next ? next.reason : next).toMatch(/Evicted/);
        }, 120_000);
      } else {
        expect(r.stdout).toMatch(/rc=[1-9]/);
        // The pod stays: the session's next message runs in it.
        expect(await rig.launcher.execIn(name, plan, ['sh', '-c', 'rm /tmp/fill && echo ok'])).toMatchObject({ stdout: 'ok\n' });
      }
    } finally {
      await rig.launcher.removeContainers([name]);
    }
  });
});
