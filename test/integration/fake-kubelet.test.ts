import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Attach, CoreV1Api, CustomObjectsApi, Exec, type V1Pod, type V1Status } from '@kubernetes/client-node';
import { installAgentSandbox, startKubeCluster, type KubeCluster } from '../helpers/kube-cluster.js';
import { KUBELET_LABEL, startTestKubelet, type TestKubelet } from '../fakes/kubelet.js';
import { SANDBOX_HASH_LABEL, sandboxNameHash, startSandboxController, type Sandbox } from '../fakes/agent-sandbox-controller.js';

/**
 * The test kubelet and sandbox controller against the real API server: what berth's Kubernetes
 * launcher will meet. Pods run on the local engine; exec and logs go through the API server.
 *
 * Why the fakes stay beside the real tier (make test's kube-real pass runs the Kubernetes suites
 * on a real kubelet, scheduler and controller-manager): the real node takes 30-50 minutes to build
 * once, so these keep a fast tier that runs everywhere; a dockershim kubelet has no runtime
 * handlers, so gVisor through a RuntimeClass runs on the test kubelet only; and the cases below
 * stage failures (a missing image with pull policy Never, an init container that fails, a refused
 * subPath, a missing claim, an unsafe sysctl) in seconds, where a real kubelet shows them through
 * back-off loops that only end with the start timeout. The real counterparts of what the fakes do
 * not model (CPU admission, storage fsGroup, deletion timing) are in kubernetes-reality-4.md.
 */

const IMAGE = 'berth/shell:latest';
const docker = new Docker();
let cluster: KubeCluster;
let kubelet: TestKubelet;
let controller: { stop(): Promise<void> };
let core: CoreV1Api;
let dataDir: string;
const ns = `fk-${randomBytes(4).toString('hex')}`;

async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const readPod = (name: string) => core.readNamespacedPod({ name, namespace: ns }).catch(() => undefined);
const phaseIs = (name: string, phase: string) =>
  waitFor(`pod ${name} ${phase}`, async () => ((await readPod(name))?.status?.phase === phase ? (await readPod(name))! : undefined));
const gone = (name: string) => waitFor(`pod ${name} gone`, async () => (await readPod(name)) === undefined);

/** Exec through the API server as berth will: client-node's Exec, exit code from the v4 status. */
async function run(
  pod: string,
  argv: string[],
  container = 'main',
  stdin: PassThrough | null = null,
): Promise<{ stdout: string; stderr: string; code: number | undefined; message?: string }> {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.on('data', (d: Buffer) => (stdout += d.toString().slice(0, 64 * 1024)));
  err.on('data', (d: Buffer) => (stderr += d.toString().slice(0, 64 * 1024)));
  // Exec ends both streams when the status arrives: listen before, or the ends are missed.
  const ended = Promise.all([once(out, 'end'), once(err, 'end')]);
  const status = await new Promise<V1Status | undefined>((resolve, reject) => {
    new Exec(cluster.kubeConfig)
      .exec(ns, pod, container, argv, out, err, stdin, false, resolve)
      .then((ws) => ws.on('close', () => resolve(undefined)), reject);
  });
  if (status) await ended;
  const code = status?.status === 'Success' ? 0 : Number(status?.details?.causes?.find((c) => c.reason === 'ExitCode')?.message ?? NaN);
  return { stdout, stderr, code: Number.isNaN(code) ? undefined : code, ...(status?.message ? { message: status.message } : {}) };
}

const leftovers = async () => docker.listContainers({ all: true, filters: { label: [`${KUBELET_LABEL}=${kubelet.nodeName}`] } });

beforeAll(async () => {
  cluster = await startKubeCluster();
  await installAgentSandbox(cluster.kubeConfig);
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: ns } } });
  dataDir = fs.mkdtempSync(join(os.tmpdir(), 'berth-kubelet-'));
  kubelet = await startTestKubelet({ kubeConfig: cluster.kubeConfig, dataDir });
  controller = await startSandboxController({ kubeConfig: cluster.kubeConfig, namespace: ns });
}, 120_000);

afterAll(async () => {
  await controller?.stop();
  const node = kubelet?.nodeName;
  await kubelet?.stop();
  await cluster?.stop();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  if (node) expect(await docker.listContainers({ all: true, filters: { label: [`${KUBELET_LABEL}=${node}`] } })).toEqual([]);
});

describe('test kubelet', () => {
  it('registers a ready node the API server proxies to', async () => {
    const node = await core.readNode({ name: kubelet.nodeName });
    expect(node.status?.addresses).toContainEqual({ type: 'InternalIP', address: '127.0.0.1' });
    expect(node.status?.daemonEndpoints?.kubeletEndpoint?.Port).toBe(kubelet.port);
    expect(node.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(node.status?.allocatable).toEqual({ cpu: '2', memory: '8Gi', pods: '110' });
  });

  it('runs a confined pod with a PVC, a configMap file and a memory emptyDir; exec and logs go through the API server', async () => {
    await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: { metadata: { name: 'work' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } },
    });
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: { name: 'files' },
        data: { greeting: 'hello from a configmap\n' },
        binaryData: { blob: Buffer.from([0, 1, 2]).toString('base64') },
      },
    });
    const pod = (name: string, command: string, restartPolicy: 'Never' | 'Always' = 'Always'): V1Pod => ({
      metadata: { name },
      spec: {
        restartPolicy,
        terminationGracePeriodSeconds: 1,
        securityContext: {
          runAsUser: 10001,
          runAsGroup: 10001,
          fsGroup: 10001,
          runAsNonRoot: true,
          seccompProfile: { type: 'RuntimeDefault' },
        },
        containers: [
          {
            name: 'main',
            image: IMAGE,
            imagePullPolicy: 'Never',
            command: ['sh', '-c', command],
            env: [
              { name: 'WHO', value: 'tenant' },
              { name: 'GREETING', value: 'hi $(WHO)' },
            ],
            resources: { limits: { cpu: '500m', memory: '64Mi' } },
            securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            volumeMounts: [
              { name: 'work', mountPath: '/work' },
              { name: 'files', mountPath: '/etc/greeting', subPath: 'greeting', readOnly: true },
              { name: 'tmp', mountPath: '/tmp' },
            ],
          },
        ],
        volumes: [
          { name: 'work', persistentVolumeClaim: { claimName: 'work' } },
          { name: 'files', configMap: { name: 'files', items: [{ key: 'greeting', path: 'greeting', mode: 0o444 }] } },
          { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } },
        ],
      },
    });

    const t0 = Date.now();
    await core.createNamespacedPod({ namespace: ns, body: pod('p1', 'echo started; exec sleep 3600') });
    const running = await phaseIs('p1', 'Running');
    const toRunning = Date.now() - t0;
    const status = running.status!.containerStatuses![0]!;
    expect(status.state?.running).toBeDefined();
    expect(status.ready).toBe(true);
    expect(status.containerID).toBe(`docker://${kubelet.containerOf(ns, 'p1')}`);
    expect(
      running.status?.conditions
        ?.filter((c) => c.status === 'True')
        .map((c) => c.type)
        .sort(),
    ).toEqual(['ContainersReady', 'Initialized', 'PodScheduled', 'Ready']);
    expect(running.status?.podIP).toBe('127.0.0.1');

    expect(await run('p1', ['sh', '-c', 'echo out; echo err >&2; exit 3'])).toMatchObject({ stdout: 'out\n', stderr: 'err\n', code: 3 });
    // stdin reaches the command (its end cannot: before v5 a client ends stdin by closing the socket).
    const input = new PassThrough();
    input.write('hello');
    expect(await run('p1', ['sh', '-c', 'head -c 5 | tr a-z A-Z'], 'main', input)).toEqual({ stdout: 'HELLO', stderr: '', code: 0 });
    const rounds: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = Date.now();
      expect((await run('p1', ['true'])).code).toBe(0);
      rounds.push(Date.now() - t);
    }
    expect((await run('p1', ['id', '-u'])).stdout).toBe('10001\n');
    expect((await run('p1', ['sh', '-c', 'echo "$GREETING"'])).stdout).toBe('hi tenant\n');
    const rootWrite = await run('p1', ['touch', '/x']);
    expect(rootWrite.code).not.toBe(0);
    expect(rootWrite.stderr).toMatch(/Read-only file system/);
    expect(await run('p1', ['sh', '-c', 'echo kept > /work/f && cat /work/f && stat -c %a:%g /work'])).toEqual({
      stdout: 'kept\n2775:10001\n',
      stderr: '',
      code: 0,
    });
    expect((await run('p1', ['cat', '/etc/greeting'])).stdout).toBe('hello from a configmap\n');
    expect((await run('p1', ['sh', '-c', 'echo x > /etc/greeting'])).code).not.toBe(0);
    expect((await run('p1', ['sh', '-c', 'grep " /tmp " /proc/mounts'])).stdout).toMatch(/^tmpfs \/tmp tmpfs rw,.*size=16384k/);
    expect(await core.readNamespacedPodLog({ name: 'p1', namespace: ns, container: 'main' })).toBe('started\n');

    const id = kubelet.containerOf(ns, 'p1')!;
    const info = await docker.getContainer(id).inspect();
    expect(info.Config.User).toBe('10001:10001');
    expect(info.Config.Labels[KUBELET_LABEL]).toBe(kubelet.nodeName);
    expect(info.HostConfig).toMatchObject({
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      NetworkMode: 'none',
      Memory: 64 * 1024 ** 2,
      NanoCpus: 5e8,
      Binds: null,
    });
    expect(info.HostConfig.SecurityOpt).toEqual(['no-new-privileges']);
    expect(info.HostConfig.GroupAdd).toEqual(['10001']);

    await core.deleteNamespacedPod({ name: 'p1', namespace: ns });
    await gone('p1');
    await waitFor('p1 container removed', async () => !(await docker.listContainers({ all: true, filters: { id: [id] } })).length);

    // The claim's directory outlives the pod: a second pod finds the file.
    await core.createNamespacedPod({ namespace: ns, body: pod('p2', 'cat /work/f', 'Never') });
    const done = await phaseIs('p2', 'Succeeded');
    expect(done.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 0, reason: 'Completed' });
    expect(await core.readNamespacedPodLog({ name: 'p2', namespace: ns })).toBe('kept\n');
    await core.deleteNamespacedPod({ name: 'p2', namespace: ns });
    await gone('p2');

    console.info(
      `test kubelet: pod to Running ${toRunning} ms; exec round trip through the API server ${[...rounds].sort((a, b) => a - b)[2]} ms (median of 5)`,
    );
  });

  it("attaches through the API server to a container's first process: its stdin, its output from then on; leaving detaches and leaves its stdin open", async () => {
    const body = (name: string, stdin: boolean): V1Pod => ({
      metadata: { name },
      spec: {
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 1,
        securityContext: { runAsUser: 10001, runAsGroup: 10001, runAsNonRoot: true },
        containers: [
          {
            name: 'main',
            image: IMAGE,
            imagePullPolicy: 'Never',
            stdin,
            command: ['sh', '-c', 'echo before; while read l; do echo "got $l"; done; echo eof'],
          },
        ],
      },
    });
    await core.createNamespacedPod({ namespace: ns, body: body('att', true) });
    await core.createNamespacedPod({ namespace: ns, body: body('att-closed', false) });
    await phaseIs('att', 'Running');
    /** One attach: write a line, read until its answer, leave. */
    const ask = async (pod: string, line: string) => {
      const out = new PassThrough();
      const input = new PassThrough();
      let printed = '';
      out.on('data', (d: Buffer) => (printed += d.toString()));
      const ws = await new Attach(cluster.kubeConfig).attach(ns, pod, 'main', out, null, input, false);
      input.write(`${line}\n`);
      await waitFor(`an answer to ${line}`, async () => printed.includes(`got ${line}\n`) || ws.readyState === ws.CLOSED, 10_000);
      ws.close();
      return printed;
    };
    // What it printed before the attach is not replayed; each attach sees its own answer.
    expect(await ask('att', 'one')).toBe('got one\n');
    expect(await ask('att', 'two')).toBe('got two\n');
    expect((await readPod('att'))?.status?.phase).toBe('Running'); // detaching sent no end of file
    await phaseIs('att-closed', 'Succeeded'); // no stdin: end of file at once
    expect(await core.readNamespacedPodLog({ name: 'att', namespace: ns })).toBe('before\ngot one\ngot two\n');
    await core.deleteNamespacedPod({ name: 'att', namespace: ns });
    await core.deleteNamespacedPod({ name: 'att-closed', namespace: ns });
    await Promise.all([gone('att'), gone('att-closed')]);
  });

  it('reports what a kubelet and scheduler would: missing image, failed init container, refused subPath, missing claim, unsafe sysctl, exits', async () => {
    const simple = (name: string, extra: Partial<V1Pod['spec']> = {}): V1Pod => ({
      metadata: { name },
      spec: {
        restartPolicy: 'Never',
        containers: [{ name: 'main', image: IMAGE, imagePullPolicy: 'Never', command: ['sleep', '3600'] }],
        ...extra,
      },
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        ...simple('noimage'),
        spec: { ...simple('noimage').spec!, containers: [{ name: 'main', image: 'berth/absent:never', imagePullPolicy: 'Never' }] },
      },
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: simple('badinit', {
        initContainers: [{ name: 'init', image: IMAGE, imagePullPolicy: 'Never', command: ['sh', '-c', 'exit 7'] }],
      }),
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: simple('subpath', {
        volumes: [{ name: 'v', emptyDir: {} }],
        containers: [
          { name: 'main', image: IMAGE, imagePullPolicy: 'Never', volumeMounts: [{ name: 'v', mountPath: '/v', subPath: 'x' }] },
        ],
      }),
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: simple('noclaim', { volumes: [{ name: 'v', persistentVolumeClaim: { claimName: 'absent' } }] }),
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: simple('sysctl', { securityContext: { sysctls: [{ name: 'kernel.msgmni', value: '16' }] } }),
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: simple('exits', {
        restartPolicy: 'Always',
        containers: [{ name: 'main', image: IMAGE, imagePullPolicy: 'Never', command: ['sh', '-c', 'exit 2'] }],
      }),
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: simple('oom', {
        containers: [
          {
            name: 'main',
            image: IMAGE,
            imagePullPolicy: 'Never',
            command: ['tail', '/dev/zero'],
            resources: { limits: { memory: '16Mi' } },
          },
        ],
      }),
    });

    const waiting = await waitFor(
      'ErrImageNeverPull',
      async () => (await readPod('noimage'))?.status?.containerStatuses?.[0]?.state?.waiting,
    );
    expect(waiting.reason).toBe('ErrImageNeverPull');
    expect((await readPod('noimage'))?.status?.phase).toBe('Pending');
    const failed = await phaseIs('badinit', 'Failed');
    expect(failed.status?.initContainerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 7, reason: 'Error' });
    expect(failed.status?.conditions?.find((c) => c.type === 'Initialized')).toMatchObject({
      status: 'False',
      reason: 'ContainersNotInitialized',
    });
    expect((await phaseIs('subpath', 'Failed')).status).toMatchObject({
      reason: 'UnsupportedByTestKubelet',
      message: expect.stringMatching(/subPath/),
    });
    const unschedulable = await waitFor('Unschedulable', async () =>
      (await readPod('noclaim'))?.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False'),
    );
    expect(unschedulable).toMatchObject({ reason: 'Unschedulable', message: 'persistentvolumeclaim "absent" not found' });

    expect((await phaseIs('sysctl', 'Failed')).status).toMatchObject({
      reason: 'SysctlForbidden',
      message: 'Pod forbidden sysctl: "kernel.msgmni" not whitelisted',
    });
    expect((await phaseIs('exits', 'Failed')).status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
      exitCode: 2,
      reason: 'Error',
    });
    expect((await phaseIs('oom', 'Failed')).status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
      exitCode: 137,
      reason: 'OOMKilled',
    });
    // An exec into a container that is not running: upgraded, then a Failure status.
    expect(await run('badinit', ['true'])).toMatchObject({
      code: undefined,
      message: expect.stringMatching(/container not found \("main"\)/),
    });

    const names = ['noimage', 'badinit', 'subpath', 'noclaim', 'sysctl', 'exits', 'oom'];
    for (const name of names) await core.deleteNamespacedPod({ name, namespace: ns });
    for (const name of names) await gone(name);
  });
});

describe('test agent-sandbox controller', () => {
  it('gives a Sandbox its pod and claim, reports Ready, suspends, and takes them with it when deleted', async () => {
    const custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    const crd = { group: 'agents.x-k8s.io', version: 'v1beta1', namespace: ns, plural: 'sandboxes' };
    const name = 'tenant-a';
    const spec: Sandbox['spec'] = {
      podTemplate: {
        metadata: { labels: { app: 'berth', 'agents.x-k8s.io/sandbox-name-hash': 'forged' } },
        spec: {
          restartPolicy: 'Never',
          terminationGracePeriodSeconds: 1,
          securityContext: { runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001 },
          containers: [
            {
              name: 'agent',
              image: IMAGE,
              imagePullPolicy: 'Never',
              command: ['sleep', '3600'],
              volumeMounts: [{ name: 'home', mountPath: '/home/agent' }],
            },
          ],
        },
      },
      volumeClaimTemplates: [
        { metadata: { name: 'home' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } },
      ],
    };
    await custom.createNamespacedCustomObject({
      ...crd,
      body: { apiVersion: 'agents.x-k8s.io/v1beta1', kind: 'Sandbox', metadata: { name }, spec },
    });
    const getSandbox = async () => (await custom.getNamespacedCustomObject({ ...crd, name })) as Sandbox;
    const ready = await waitFor('Sandbox Ready', async () => {
      const sb = await getSandbox();
      return sb.status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'True') ? sb : undefined;
    });
    const hash = sandboxNameHash(name);
    expect(ready.status).toMatchObject({ nodeName: kubelet.nodeName, podIPs: ['127.0.0.1'], selector: `${SANDBOX_HASH_LABEL}=${hash}` });
    expect(ready.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      reason: 'DependenciesReady',
      message: 'Pod is Ready',
    });
    expect(ready.metadata.annotations?.['agents.x-k8s.io/pod-name']).toBe(name);

    const pod = (await readPod(name))!;
    expect(pod.metadata?.labels).toEqual({ app: 'berth', [SANDBOX_HASH_LABEL]: hash });
    expect(pod.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Sandbox', name, uid: ready.metadata.uid, controller: true }),
    ]);
    const claim = await core.readNamespacedPersistentVolumeClaim({ name: `home-${name}`, namespace: ns });
    expect(claim.metadata?.ownerReferences?.[0]?.uid).toBe(ready.metadata.uid);
    expect(await run(name, ['sh', '-c', 'echo mine > /home/agent/note && id -u'], 'agent')).toEqual({
      stdout: '10001\n',
      stderr: '',
      code: 0,
    });

    // Suspended: the pod goes, the claim stays; Running again: a new pod, the same claim.
    await custom.patchNamespacedCustomObject({ ...crd, name, body: [{ op: 'add', path: '/spec/operatingMode', value: 'Suspended' }] });
    await gone(name);
    const suspended = await waitFor('Suspended', async () =>
      (await getSandbox()).status?.conditions?.find((c) => c.type === 'Suspended' && c.status === 'True'),
    );
    expect(suspended.reason).toBe('PodTerminated');
    await core.readNamespacedPersistentVolumeClaim({ name: `home-${name}`, namespace: ns });
    await custom.patchNamespacedCustomObject({ ...crd, name, body: [{ op: 'replace', path: '/spec/operatingMode', value: 'Running' }] });
    await phaseIs(name, 'Running');
    expect((await run(name, ['cat', '/home/agent/note'], 'agent')).stdout).toBe('mine\n');
    const id = kubelet.containerOf(ns, name)!;

    await custom.deleteNamespacedCustomObject({ ...crd, name });
    await gone(name);
    await waitFor(
      'claim collected',
      async () =>
        (await core.readNamespacedPersistentVolumeClaim({ name: `home-${name}`, namespace: ns }).catch(() => undefined)) === undefined,
    );
    await waitFor('container removed', async () => !(await docker.listContainers({ all: true, filters: { id: [id] } })).length);
    expect(await leftovers()).toEqual([]);
  });
});
