import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import {
  berthLabelsOf,
  kubeLabelValue,
  kubeSelector,
  renderKubeRun,
  type KubeRunInput,
  type SnapshotFile,
} from '../../src/launch/kubernetes/objects.js';
import { kubeLiteral, prepareEntries, PREPARE_CONTAINER, WRITABLE_CONTAINER } from '../../src/launch/kubernetes/init-containers.js';
import { renderNetworkPolicy } from '../../src/launch/kubernetes/network-policy.js';
import { LABELS } from '../../src/plan/labels.js';
import { RUN_DIR_MOUNT, type RunPlan } from '../../src/plan/run-plan.js';
import { contractHome, PROTECTED_TEXT } from '../contract/contract-plan.js';

/** The pure translation of a RunPlan to cluster objects (docs/kubernetes.md, "The mapping"). */

const home = contractHome({ image: 'berth/shell:latest', runtime: 'runc' });
afterAll(() => home.cleanup());

const filesOf = (plan: RunPlan): Map<string, SnapshotFile[]> =>
  new Map(
    plan.mounts.flatMap((m) =>
      m.type === 'bind' && m.readOnly && fs.existsSync(m.source)
        ? [[m.target, [{ path: '', data: fs.readFileSync(m.source), mode: 0o644 }]]]
        : [],
    ),
  );

/** Each persistent mount's volume id (what the launcher reads from its host directory, kubernetes/volumes.ts): here one per source. */
const volumesOf = (plan: RunPlan): Map<string, string> =>
  new Map(
    plan.mounts.flatMap((m) =>
      m.type === 'bind' && !m.readOnly ? [[m.target, createHash('sha256').update(m.source).digest('hex').slice(0, 32)]] : [],
    ),
  );

const render = (plan: RunPlan, extra: Partial<KubeRunInput> = {}) =>
  renderKubeRun({
    plan,
    name: 'berth-r1',
    namespace: 'berth',
    files: filesOf(plan),
    pullPolicy: 'IfNotPresent',
    volumes: volumesOf(plan),
    ...extra,
  });

describe('renderKubeRun', () => {
  it('hardens the pod as the Docker launcher does its container', () => {
    const plan = home.plan({ argv: ['true'] });
    const { sandbox } = render(plan);
    const pod = sandbox.spec.podTemplate.spec;
    expect(sandbox.apiVersion).toBe('agents.x-k8s.io/v1beta1');
    expect(pod).toMatchObject({ restartPolicy: 'Never', automountServiceAccountToken: false, enableServiceLinks: false });
    expect(pod.runtimeClassName).toBeUndefined(); // runc: the cluster's default
    expect(pod.securityContext).toMatchObject({
      runAsUser: 10001,
      runAsGroup: 10001,
      runAsNonRoot: true,
      fsGroup: 10001,
      fsGroupChangePolicy: 'OnRootMismatch',
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(pod.securityContext?.sysctls?.map((s) => s.name)).toContain('kernel.msgmni');
    const [c] = pod.containers;
    expect(c?.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ['ALL'] },
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
    });
    expect(c?.command).toEqual(plan.keepAlive);
    expect(c?.workingDir).toBe(plan.cwd);
    // The limits are the plan's; the requests an idle agent's (IDLE_REQUESTS when the launcher gives none).
    expect(c?.resources?.limits).toEqual({ cpu: '1', memory: String(plan.limits.memoryBytes) });
    expect(c?.resources?.requests).toEqual({ cpu: '50m', memory: String(64 * 1024 ** 2) });
    expect(Object.fromEntries((c?.env ?? []).map((e) => [e.name, e.value ?? '']))).toEqual(
      Object.fromEntries(Object.entries(plan.env).map(([k, v]) => [k, kubeLiteral(v)])),
    );
    expect(kubeLiteral('a$(HOME)b$$c')).toBe('a$$(HOME)b$$$$c'); // the kubelet reads $$ as $
    expect(pod.hostNetwork ?? false).toBe(false);
    expect(pod.hostPID ?? false).toBe(false);
  });

  it("puts the workspace on its tenant's own PVC, whole: never a subPath into a volume a tenant writes", () => {
    const a1 = render(home.plan({ argv: ['true'], tenant: 'a' }));
    const a2 = render(home.plan({ argv: ['true'], tenant: 'a' }));
    const b = render(home.plan({ argv: ['true'], tenant: 'b' }));
    const claimOf = (o: typeof a1) => o.claims.map((c) => c.metadata?.name);
    expect(claimOf(a1)).toEqual(claimOf(a2));
    expect(claimOf(a1)).not.toEqual(claimOf(b));
    expect(a1.claims[0]?.metadata?.name).toMatch(/^berth-ws-[0-9a-f]{20}$/);
    expect(a1.claims[0]?.spec?.resources?.requests?.storage).toBe(String(home.plan({ argv: ['true'] }).limits.diskBytes));
    const pod = a1.sandbox.spec.podTemplate.spec;
    const claimVolumes = new Set(pod.volumes?.filter((v) => v.persistentVolumeClaim).map((v) => v.name));
    const ws = pod.containers[0]?.volumeMounts?.find((m) => m.mountPath === '/workspace');
    expect(claimVolumes.has(ws?.name ?? '')).toBe(true);
    for (const m of pod.containers[0]?.volumeMounts ?? []) if (claimVolumes.has(m.name)) expect(m.subPath).toBeUndefined();
  });

  it("serves a protected path from berth's snapshot in a ConfigMap, read-only, over the workspace", () => {
    const { sandbox, configMap } = render(home.plan({ argv: ['true'] }));
    const pod = sandbox.spec.podTemplate.spec;
    const mount = pod.containers[0]?.volumeMounts?.find((m) => m.mountPath === '/workspace/AGENTS.md');
    expect(mount).toMatchObject({ readOnly: true, subPath: 'AGENTS.md' });
    const volume = pod.volumes?.find((v) => v.name === mount?.name);
    expect(volume?.configMap?.name).toBe(configMap?.metadata?.name);
    const key = volume?.configMap?.items?.[0]?.key ?? '';
    expect(Buffer.from(configMap?.binaryData?.[key] ?? '', 'base64').toString()).toBe(PROTECTED_TEXT);
    expect(volume?.configMap?.items?.[0]?.mode).toBe(0o444);
  });

  it("prepares the workspace volume first, as the agent, on that volume alone: the protected path's mountpoint made a real file", () => {
    const plan = home.plan({ argv: ['true'] });
    const pod = render(plan).sandbox.spec.podTemplate.spec;
    expect(prepareEntries(plan)).toEqual(['file:AGENTS.md']);
    const [check, init, ...others] = pod.initContainers ?? [];
    expect(others).toEqual([]);
    const workspace = pod.containers[0]?.volumeMounts?.find((m) => m.mountPath === '/workspace');
    // First the check that the agent can write its volume (fsGroup applied by the storage).
    expect(check).toMatchObject({
      name: WRITABLE_CONTAINER,
      command: ['test', '-w', '/workspace'],
      volumeMounts: [{ name: workspace?.name, mountPath: '/workspace' }],
      securityContext: pod.containers[0]?.securityContext,
    });
    expect(init).toMatchObject({
      name: PREPARE_CONTAINER,
      image: plan.image,
      command: ['berth-bridge', 'prepare', '/workspace', 'file:AGENTS.md'],
      volumeMounts: [{ name: workspace?.name, mountPath: '/workspace' }],
      securityContext: pod.containers[0]?.securityContext,
      resources: pod.containers[0]?.resources,
      terminationMessagePolicy: 'FallbackToLogsOnError',
    });
    // A path is data: a `$` in it reaches berth-bridge as it is.
    const dollar = { ...plan, prepare: { ...plan.prepare, mountpoints: [{ path: '$(HOME)', kind: 'dir' as const }] } };
    expect(render(dollar).sandbox.spec.podTemplate.spec.initContainers?.[1]?.command?.at(-1)).toBe('dir:$$(HOME)');
    // Nothing to prepare: the check alone; a root plan writes anything: no check.
    const bare = { ...plan, prepare: { ...plan.prepare, mountpoints: [] } };
    expect(render(bare).sandbox.spec.podTemplate.spec.initContainers?.map((c) => c.name)).toEqual([WRITABLE_CONTAINER]);
    expect(render({ ...bare, user: '0:0' }).sandbox.spec.podTemplate.spec.initContainers).toBeUndefined();
  });

  it("makes /tmp a memory emptyDir of the plan's size", () => {
    const plan = home.plan({ argv: ['true'] });
    const tmp = plan.mounts.find((m) => m.target === '/tmp');
    const pod = render(plan).sandbox.spec.podTemplate.spec;
    const mount = pod.containers[0]?.volumeMounts?.find((m) => m.mountPath === '/tmp');
    expect(pod.volumes?.find((v) => v.name === mount?.name)?.emptyDir).toEqual({
      medium: 'Memory',
      sizeLimit: String(tmp?.type === 'tmpfs' ? tmp.sizeBytes : 0),
    });
  });

  it("relays the run's sockets over TCP with its token, or refuses the plan without a gateway", () => {
    const base = home.plan({ argv: ['true'] });
    const plan: RunPlan = {
      ...base,
      mounts: [...base.mounts, { type: 'bind', source: '/nonexistent/run', target: RUN_DIR_MOUNT, readOnly: true }],
    };
    expect(() => render(plan)).toThrow(expect.objectContaining({ code: 'LAUNCHER_UNSUPPORTED' }));
    const objects = render(plan, { relay: { address: '10.0.0.5:41500', token: 'f'.repeat(64) } });
    const pod = objects.sandbox.spec.podTemplate.spec;
    const env = Object.fromEntries((pod.containers[0]?.env ?? []).map((e) => [e.name, e]));
    expect(env.BERTH_RELAY_TCP).toEqual({ name: 'BERTH_RELAY_TCP', value: '10.0.0.5:41500' });
    // The token by reference to the run's Secret: no pod spec or Sandbox holds it.
    expect(env.BERTH_RELAY_TOKEN).toEqual({
      name: 'BERTH_RELAY_TOKEN',
      valueFrom: { secretKeyRef: { name: 'berth-r1-relay', key: 'token' } },
    });
    expect(JSON.stringify(objects.sandbox)).not.toContain('f'.repeat(64));
    expect(objects.secret?.metadata?.name).toBe('berth-r1-relay');
    expect(Buffer.from(objects.secret?.data?.token ?? '', 'base64').toString()).toBe('f'.repeat(64));
    expect(render(base).secret).toBeUndefined();
    expect(pod.containers[0]?.volumeMounts?.some((m) => m.mountPath === RUN_DIR_MOUNT)).toBe(false);
  });

  it("mounts a granted shared area as the operator's PVC, whole, read-only unless the grant is rw", () => {
    const base = home.plan({ argv: ['true'] });
    const withArea = (readOnly: boolean): RunPlan => ({
      ...base,
      mounts: [...base.mounts, { type: 'bind', source: '/srv/data', target: '/shared/data', readOnly, claim: 'team-data' }],
    });
    for (const readOnly of [true, false]) {
      const pod = render(withArea(readOnly)).sandbox.spec.podTemplate.spec;
      const mount = pod.containers[0]?.volumeMounts?.find((m) => m.mountPath === '/shared/data');
      expect(mount).toEqual({ name: mount?.name, mountPath: '/shared/data', ...(readOnly ? { readOnly: true } : {}) });
      expect(pod.volumes?.find((v) => v.name === mount?.name)).toEqual({
        name: mount?.name,
        persistentVolumeClaim: { claimName: 'team-data', ...(readOnly ? { readOnly: true } : {}) },
      });
    }
  });

  it('refuses what a cluster cannot carry: a shared area with no volume there, too much for a ConfigMap', () => {
    const base = home.plan({ argv: ['true'] });
    const shared: RunPlan = {
      ...base,
      mounts: [...base.mounts, { type: 'bind', source: '/srv/data', target: '/shared/data', readOnly: true }],
    };
    expect(() => render(shared)).toThrow(
      expect.objectContaining({ code: 'LAUNCHER_UNSUPPORTED', message: expect.stringContaining('kubernetes.shared_claims.data') }),
    );
    const big = new Map(filesOf(base));
    big.set('/workspace/AGENTS.md', [{ path: '', data: Buffer.alloc(1024 * 1024), mode: 0o644 }]);
    expect(() => render(base, { files: big })).toThrow(/ConfigMap/);
  });

  it("names the runtime's RuntimeClass for any runtime but runc", () => {
    const plan = { ...home.plan({ argv: ['true'] }), runtime: 'runsc' };
    expect(render(plan).sandbox.spec.podTemplate.spec.runtimeClassName).toBe('runsc');
  });

  it('labels with values Kubernetes takes, and keeps the exact ones as annotations', () => {
    const plan = home.plan({ argv: ['true'] });
    const odd = { ...plan, labels: { ...plan.labels, [LABELS.workspace]: 'signal:+4915112345678/ünïcode' } };
    const { sandbox } = render(odd);
    const value = sandbox.metadata.labels[LABELS.workspace];
    expect(value).toMatch(/^h-[0-9a-f]{40}$/);
    expect(berthLabelsOf(sandbox.metadata.annotations)[LABELS.workspace]).toBe('signal:+4915112345678/ünïcode');
    expect(kubeSelector({ [LABELS.workspace]: 'signal:+4915112345678/ünïcode', [LABELS.run]: undefined })).toBe(
      `${LABELS.workspace}=${value}`,
    );
    expect(kubeLabelValue('r1abc')).toBe('r1abc');
    expect(kubeLabelValue('x'.repeat(64))).toMatch(/^h-/);
    expect(kubeLabelValue('-lead')).toMatch(/^h-/);
  });

  it("writes one NetworkPolicy: no way in, out only to berth's gateway port", () => {
    const np = renderNetworkPolicy({
      namespace: 'berth',
      installation: 'abc123',
      gatewayPort: 41500,
      berthPodLabels: { 'app.kubernetes.io/name': 'berth' },
    });
    expect(np.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(np.spec?.ingress).toBeUndefined();
    expect(np.spec?.egress).toEqual([
      { to: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'berth' } } }], ports: [{ protocol: 'TCP', port: 41500 }] },
    ]);
    expect(np.spec?.podSelector?.matchLabels).toEqual({ [LABELS.managed]: 'true', [LABELS.installation]: 'abc123' });
    // berth outside the cluster: its address itself, on the gateway port alone.
    const outside = renderNetworkPolicy({
      namespace: 'berth',
      installation: 'abc123',
      gatewayPort: 41600,
      gatewayIp: '192.168.5.7',
      berthPodLabels: { 'app.kubernetes.io/name': 'berth' },
    });
    expect(outside.spec?.egress?.[1]).toEqual({ to: [{ ipBlock: { cidr: '192.168.5.7/32' } }], ports: [{ protocol: 'TCP', port: 41600 }] });
    expect(outside.spec?.egress).toHaveLength(2);
  });

  it("requests an idle agent's share, each capped at the plan's limit; the limits stay the plan's", () => {
    const plan = home.plan({ argv: ['true'] });
    const c = (p: RunPlan, requests: KubeRunInput['requests']) => render(p, { requests }).sandbox.spec.podTemplate.spec.containers[0];
    expect(c(plan, { cpuMillis: 250, memoryBytes: 128 * 1024 ** 2 })?.resources).toEqual({
      limits: { cpu: '1', memory: String(plan.limits.memoryBytes) },
      requests: { cpu: '250m', memory: String(128 * 1024 ** 2) },
    });
    const small = { ...plan, limits: { ...plan.limits, nanoCpus: 0.1e9, memoryBytes: 32 * 1024 ** 2 } };
    expect(c(small, { cpuMillis: 250, memoryBytes: 128 * 1024 ** 2 })?.resources?.requests).toEqual({
      cpu: '100m',
      memory: String(32 * 1024 ** 2),
    });
  });
});
