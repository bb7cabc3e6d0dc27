/**
 * A test kubelet (and scheduler) for the real kube-apiserver of test/helpers/kube-cluster.ts: it
 * registers a Node, binds unscheduled pods to it, runs them on the local Docker engine, keeps their
 * status true to the containers, and serves the kubelet API the apiserver proxies `pods/exec`,
 * `pods/attach` and `pods/log` to (HTTPS on 127.0.0.1, the port in the Node's daemonEndpoints).
 *
 * Behaviour follows kubelet 1.20 with dockershim, where it matters to a client: status shapes and
 * reasons, `$(VAR)` expansion, fsGroup ownership, Unconfined seccomp unless asked, sysctl
 * admission (only the safe set unless `allowedUnsafeSysctls`), the exec channel protocol
 * (`v4.channel.k8s.io`, `channel.k8s.io`) and its metav1.Status. What it does not play it refuses
 * with a failed pod (reason UnsupportedByTestKubelet), never ignores: probes, lifecycle hooks,
 * env valueFrom other than secretKeyRef, envFrom, host namespaces, other volume types, subPath
 * outside configMap/secret. As the scheduler it fits pods' requests to the node's allocatable (cpu 2,
 * memory 8Gi, 110 pods), with the scheduler's Unschedulable condition and FailedScheduling event; a
 * RuntimeClass handler the engine lacks is dockershim's FailedCreatePodSandBox.
 * Differences that remain: no pause container (the first app container owns the pod's network;
 * init containers get their own), no restarts, images are never pulled, emptyDir sizeLimit on disk
 * is not enforced, fsGroup ownership is applied to a volume's root only, readiness = running.
 */
import fs from 'node:fs';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Writable, type Duplex } from 'node:stream';
import Docker from 'dockerode';
import { WebSocketServer, WebSocket } from 'ws';
import {
  CoreV1Api,
  NodeV1Api,
  StorageV1Api,
  Watch,
  type KubeConfig,
  type V1Container,
  type V1ContainerStatus,
  type V1Pod,
  type V1PodCondition,
  type V1PodStatus,
} from '@kubernetes/client-node';
import { issueServerCert, makeAuthority, newRsaKey } from '../../src/outbound/certs.js';

export interface TestKubeletOptions {
  kubeConfig: KubeConfig;
  nodeName?: string;
  /** PVC directories (`pvc/<ns>/<claim>`) and pod directories (`pods/<uid>`) live here. */
  dataDir: string;
  /** The Docker network of pods; default 'none'. */
  network?: string;
  docker?: Docker;
  /** The kubelet's --allowed-unsafe-sysctls (patterns may end in `*`); default none. */
  allowedUnsafeSysctls?: string[];
}

export interface TestKubelet {
  nodeName: string;
  port: number;
  stop(): Promise<void>;
  /** The Docker id of a pod's first app container, for tests. */
  containerOf(ns: string, pod: string): string | undefined;
}

/** What the node offers (capacity = allocatable): the scheduler's fit is checked against it. */
const ALLOCATABLE = { cpu: '2', memory: '8Gi', pods: '110' } as const;

/** Every container this kubelet makes carries this label, valued with its node name. */
export const KUBELET_LABEL = 'berth-test-kubelet';
/** kubelet 1.20's safe sysctls: anything else needs --allowed-unsafe-sysctls. */
const SAFE_SYSCTLS = ['kernel.shm_rmid_forced', 'net.ipv4.ip_local_port_range', 'net.ipv4.tcp_syncookies', 'net.ipv4.ping_group_range'];
const EXEC_PROTOCOLS = ['v4.channel.k8s.io', 'channel.k8s.io'];

// ---------------------------------------------------------------------------------------------
// Small helpers, exported for the sandbox controller and unit use.

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/**
 * Watch `path` until stopped. A watch without resourceVersion starts with a synthetic ADDED for
 * each existing object (the list); a reconnect resumes from the last resourceVersion seen. Only a
 * 410 (history compacted, minutes old) starts over, where a deletion in between could be missed.
 */
export function listWatch<T extends { metadata?: { resourceVersion?: string } }>(
  kc: KubeConfig,
  path: string,
  query: Record<string, string>,
  onEvent: (type: WatchEventType, obj: T) => void,
): { stop(): void } {
  const watch = new Watch(kc);
  let rv: string | undefined;
  let stopped = false;
  let abort: AbortController | undefined;
  const once = () =>
    new Promise<void>((resolve) => {
      const params = { ...query, allowWatchBookmarks: 'true', timeoutSeconds: '20', ...(rv ? { resourceVersion: rv } : {}) };
      const onObject = (type: string, obj: T & { code?: number }) => {
        if (type === 'ERROR') {
          if (obj.code === 410) rv = undefined;
          return;
        }
        rv = obj.metadata?.resourceVersion ?? rv;
        if (type !== 'BOOKMARK') onEvent(type as WatchEventType, obj);
      };
      watch
        .watch(path, params, onObject, () => resolve())
        .then(
          (c) => (stopped ? c.abort() : (abort = c)),
          () => resolve(),
        );
    });
  void (async () => {
    while (!stopped) {
      const began = Date.now();
      await once();
      if (Date.now() - began < 200) await sleep(200); // a failing server: no hot loop
    }
  })();
  return {
    stop() {
      stopped = true;
      abort?.abort();
    },
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The HTTP status of a client-node ApiException (undefined for anything else). */
export const statusOf = (e: unknown): number | undefined => (e as { code?: unknown }).code as number | undefined;

/** Resolve to undefined on a 404, rethrow anything else. */
export async function orNotFound<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (e) {
    if (statusOf(e) === 404) return undefined;
    throw e;
  }
}

const SUFFIXES: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity ("500m", "1", "256Mi", "1Gi", "1e3", "1048576") as a number. */
export function parseQuantity(q: string | number): number {
  if (typeof q === 'number') return q;
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+))?([a-zA-Z]*)$/.exec(q.trim());
  const factor = m ? SUFFIXES[m[3] ?? ''] : undefined;
  if (!m || factor === undefined) throw new Error(`not a quantity: ${q}`);
  return Number(m[1]) * 10 ** Number(m[2] ?? 0) * factor;
}

/** Kubernetes' expansion of command, args and env values: `$(VAR)` when defined, `$$` → `$`, anything else kept. */
export function expandVars(s: string, vars: ReadonlyMap<string, string>): string {
  return s.replace(/\$\$|\$\(([^)]*)\)/g, (all, name?: string) => (all === '$$' ? '$' : (vars.get(name ?? '') ?? all)));
}

/** Strip Docker's stream multiplexing headers from a non-TTY log buffer. */
function demuxBuffer(buf: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; i + 8 <= buf.length;) {
    const n = buf.readUInt32BE(i + 4);
    parts.push(buf.subarray(i + 8, i + 8 + n));
    i += 8 + n;
  }
  return Buffer.concat(parts);
}

// ---------------------------------------------------------------------------------------------

/** Not startable yet: the kubelet retries; the container(s) wait with this reason meanwhile. */
class Waiting extends Error {
  constructor(
    readonly reason: string,
    message: string,
    readonly event: string,
    readonly container?: string,
  ) {
    super(message);
  }
}

interface Run {
  spec: V1Container;
  init: boolean;
  id?: string;
  status: V1ContainerStatus;
  exited?: Promise<void>;
}

type Volume = { kind: 'dir'; path: string; readOnly: boolean } | { kind: 'tmpfs'; sizeBytes?: number };

interface Worker {
  uid: string;
  ns: string;
  name: string;
  pod: V1Pod;
  runs: Run[];
  volumes?: Map<string, Volume>;
  failure?: { reason: string; message: string };
  podIP?: string;
  startTime: Date;
  terminating: boolean;
  attempt: number;
  retry?: NodeJS.Timeout;
  push: Promise<void>;
  events: Set<string>;
}

const key = (ns: string, name: string) => `${ns}/${name}`;

export async function startTestKubelet(opts: TestKubeletOptions): Promise<TestKubelet> {
  const nodeName = opts.nodeName ?? `test-kubelet-${randomBytes(3).toString('hex')}`;
  const docker = opts.docker ?? new Docker();
  const network = opts.network ?? 'none';
  const core = opts.kubeConfig.makeApiClient(CoreV1Api);
  const nodeApi = opts.kubeConfig.makeApiClient(NodeV1Api);
  const storage = opts.kubeConfig.makeApiClient(StorageV1Api);
  const workers = new Map<string, Worker>();
  const unscheduled = new Map<string, V1Pod>();
  const binding = new Set<string>();
  const flows = new Set<Promise<void>>();
  let stopped = false;
  const complain = (what: string, e: unknown) => {
    if (!stopped) console.error(`test kubelet ${nodeName}: ${what}: ${(e as Error).message ?? e}`);
  };
  const podDir = (uid: string) => join(opts.dataDir, 'pods', uid);
  const byName = (ns: string, name: string) =>
    [...workers.values()].find((w) => w.ns === ns && w.name === name && !w.terminating) ??
    [...workers.values()].find((w) => w.ns === ns && w.name === name);

  // -------------------------------------------------------------------------------------------
  // Status

  const condition = (
    type: string,
    ok: boolean,
    reason: string | undefined,
    message: string | undefined,
    prev: V1PodCondition[],
  ): V1PodCondition => {
    const status = ok ? 'True' : 'False';
    const before = prev.find((c) => c.type === type);
    return {
      type,
      status,
      lastProbeTime: undefined,
      lastTransitionTime: before?.status === status && before.lastTransitionTime ? before.lastTransitionTime : new Date(),
      ...(ok ? {} : { reason, ...(message ? { message } : {}) }),
    };
  };

  const podStatus = (w: Worker, current: V1PodStatus): V1PodStatus => {
    const prev = current.conditions ?? [];
    const scheduled = prev.filter((c) => c.type === 'PodScheduled');
    const base = { ...current, hostIP: '127.0.0.1', startTime: current.startTime ?? w.startTime };
    if (w.failure) return { ...base, phase: 'Failed', reason: w.failure.reason, message: w.failure.message, conditions: scheduled };
    const init = w.runs.filter((r) => r.init);
    const app = w.runs.filter((r) => !r.init);
    const exit = (r: Run) => r.status.state?.terminated?.exitCode;
    let phase = 'Pending';
    if (init.some((r) => exit(r) !== undefined && exit(r) !== 0)) phase = 'Failed';
    else if (app.some((r) => r.status.state?.running)) phase = 'Running';
    else if (app.every((r) => exit(r) !== undefined)) {
      // No restarts are played: restartPolicy Always reports what it would restart as Failed.
      phase = w.pod.spec?.restartPolicy !== 'Always' && app.every((r) => exit(r) === 0) ? 'Succeeded' : 'Failed';
    }
    const done = phase === 'Succeeded' || phase === 'Failed';
    const incomplete = init.filter((r) => exit(r) !== 0).map((r) => r.spec.name);
    const unready = app.filter((r) => !r.status.ready).map((r) => r.spec.name);
    const readyReason = done ? 'PodCompleted' : 'ContainersNotReady';
    const readyMessage = done ? undefined : `containers with unready status: [${unready.join(' ')}]`;
    return {
      ...base,
      phase,
      reason: undefined,
      message: undefined,
      conditions: [
        condition(
          'Initialized',
          incomplete.length === 0,
          'ContainersNotInitialized',
          `containers with incomplete status: [${incomplete.join(' ')}]`,
          prev,
        ),
        condition('Ready', unready.length === 0 && !done, readyReason, readyMessage, prev),
        condition('ContainersReady', unready.length === 0 && !done, readyReason, readyMessage, prev),
        ...scheduled,
      ],
      ...(w.podIP ? { podIP: w.podIP, podIPs: [{ ip: w.podIP }] } : {}),
      initContainerStatuses: init.map((r) => r.status),
      containerStatuses: app.map((r) => r.status),
    };
  };

  /** Write the worker's status (serialized per pod; a read-modify-write, retried on conflicts). */
  const pushStatus = (w: Worker): Promise<void> =>
    (w.push = w.push
      .then(async () => {
        for (let attempt = 0; attempt < 5 && !stopped; attempt++) {
          const cur = await orNotFound(core.readNamespacedPodStatus({ name: w.name, namespace: w.ns }));
          if (cur?.metadata?.uid !== w.uid) return;
          cur.status = podStatus(w, cur.status ?? {});
          try {
            await core.replaceNamespacedPodStatus({ name: w.name, namespace: w.ns, body: cur });
            return;
          } catch (e) {
            if (statusOf(e) === 404) return;
            if (statusOf(e) !== 409) throw e;
          }
        }
      })
      .catch((e: unknown) => complain(`status of ${key(w.ns, w.name)}`, e)));

  /** A core/v1 Event, as `kubectl describe` shows them; once per reason and message. */
  const event = (w: Worker, type: 'Normal' | 'Warning', reason: string, message: string) => {
    if (w.events.has(`${reason}\0${message}`)) return;
    w.events.add(`${reason}\0${message}`);
    const now = new Date();
    core
      .createNamespacedEvent({
        namespace: w.ns,
        body: {
          metadata: { generateName: `${w.name}.` },
          involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace: w.ns, name: w.name, uid: w.uid },
          reason,
          message,
          type,
          source: { component: 'kubelet', host: nodeName },
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      })
      .catch(() => {});
  };

  // -------------------------------------------------------------------------------------------
  // Admission: what a real kubelet would reject, and what this one does not play.

  const sysctlAllowed = (name: string) =>
    SAFE_SYSCTLS.includes(name) ||
    (opts.allowedUnsafeSysctls ?? []).some((p) => (p.endsWith('*') ? name.startsWith(p.slice(0, -1)) : p === name));

  const refusal = (pod: V1Pod): { reason: string; message: string } | undefined => {
    const spec = pod.spec!;
    const forbidden = (spec.securityContext?.sysctls ?? []).find((s) => !sysctlAllowed(s.name));
    if (forbidden) return { reason: 'SysctlForbidden', message: `Pod forbidden sysctl: "${forbidden.name}" not whitelisted` };
    const refuse = (what: string) => ({ reason: 'UnsupportedByTestKubelet', message: `the test kubelet does not play ${what}` });
    for (const f of ['hostNetwork', 'hostPID', 'hostIPC', 'shareProcessNamespace'] as const) if (spec[f]) return refuse(f);
    const volumes = new Map((spec.volumes ?? []).map((v) => [v.name, v]));
    for (const v of volumes.values()) {
      const kinds = Object.keys(v).filter((k) => k !== 'name' && v[k as keyof typeof v] !== undefined);
      if (kinds.length !== 1 || !['persistentVolumeClaim', 'configMap', 'secret', 'emptyDir'].includes(kinds[0]!))
        return refuse(`volume "${v.name}" (${kinds.join(', ')})`);
    }
    const sc = spec.securityContext?.seccompProfile;
    if (sc?.type === 'Localhost') return refuse('Localhost seccomp profiles');
    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
      const unplayed = (['livenessProbe', 'readinessProbe', 'startupProbe', 'lifecycle', 'envFrom'] as const).find((f) => c[f]);
      if (unplayed) return refuse(`${unplayed} (container "${c.name}")`);
      // secretKeyRef is played (the relay token); other sources are not.
      if (c.env?.some((e) => e.valueFrom && !(e.valueFrom.secretKeyRef && Object.keys(e.valueFrom).length === 1)))
        return refuse(`env valueFrom other than secretKeyRef (container "${c.name}")`);
      if (c.securityContext?.privileged) return refuse('privileged containers');
      if (c.securityContext?.seccompProfile?.type === 'Localhost') return refuse('Localhost seccomp profiles');
      for (const m of c.volumeMounts ?? []) {
        const v = volumes.get(m.name);
        if (m.subPathExpr) return refuse(`subPathExpr (container "${c.name}")`);
        if (m.mountPropagation && m.mountPropagation !== 'None') return refuse(`mountPropagation (container "${c.name}")`);
        // subPath into a volume a tenant writes had host-escape CVEs: berth must never rely on it.
        if (m.subPath && !v?.configMap && !v?.secret) return refuse(`subPath on volume "${m.name}" (only configMap and secret volumes)`);
      }
    }
    return undefined;
  };

  // -------------------------------------------------------------------------------------------
  // Volumes

  /** A directory a volume is (made once): root-owned, group fsGroup with setgid when the pod has one. */
  const ensureDir = (dir: string, mode: number, fsGroup: number | undefined) => {
    if (fs.existsSync(dir)) {
      if (fsGroup !== undefined) {
        // What kubelet's SetVolumeOwnership does on each mount (here for the root only).
        fs.chownSync(dir, 0, fsGroup);
        fs.chmodSync(dir, (fs.statSync(dir).mode & 0o7777) | 0o2070);
      }
      return;
    }
    fs.mkdirSync(dir, { recursive: true });
    if (fsGroup !== undefined) {
      fs.chownSync(dir, 0, fsGroup);
      fs.chmodSync(dir, mode | 0o2070); // 0755 → 2775
    } else fs.chmodSync(dir, mode);
  };

  /** A configMap's or secret's keys as files, like the kubelet's projection (without its ..data symlinks). */
  const project = (
    dir: string,
    entries: Map<string, Buffer>,
    src: { items?: { key: string; path: string; mode?: number }[]; defaultMode?: number },
    fsGroup: number | undefined,
    what: string,
  ) => {
    fs.rmSync(dir, { recursive: true, force: true });
    ensureDir(dir, 0o755, fsGroup);
    const items: { key: string; path: string; mode?: number }[] = src.items ?? [...entries.keys()].map((k) => ({ key: k, path: k }));
    for (const item of items) {
      const data = entries.get(item.key);
      if (!data) throw new Waiting('ContainerCreating', `${what} references non-existent config key: ${item.key}`, 'FailedMount');
      const file = join(dir, item.path);
      if (!file.startsWith(`${dir}/`))
        throw new Waiting('ContainerCreating', `${what}: item path ${item.path} leaves the volume`, 'FailedMount');
      fs.mkdirSync(dirname(file), { recursive: true });
      fs.writeFileSync(file, data);
      let mode = item.mode ?? src.defaultMode ?? 0o644;
      if (fsGroup !== undefined) {
        fs.chownSync(file, 0, fsGroup);
        mode |= 0o440;
      }
      fs.chmodSync(file, mode);
    }
  };

  const prepareVolumes = async (w: Worker): Promise<Map<string, Volume>> => {
    const fsGroup = w.pod.spec?.securityContext?.fsGroup;
    const out = new Map<string, Volume>();
    for (const v of w.pod.spec?.volumes ?? []) {
      const dir = join(podDir(w.uid), 'volumes', v.name);
      if (v.persistentVolumeClaim) {
        const claim = v.persistentVolumeClaim.claimName;
        const pvc = await orNotFound(core.readNamespacedPersistentVolumeClaim({ name: claim, namespace: w.ns }));
        if (!pvc) throw new Waiting('ContainerCreating', `persistentvolumeclaim "${claim}" not found`, 'FailedMount');
        const path = join(opts.dataDir, 'pvc', w.ns, claim);
        // A hostPath volume (the in-tree provisioner's, kubernetes.io/host-path) never takes fsGroup
        // (pkg/volume/hostpath: SetUp applies no ownership): it stays as made, root's 0755.
        const storageClass = pvc.spec?.storageClassName
          ? await orNotFound(storage.readStorageClass({ name: pvc.spec.storageClassName }))
          : undefined;
        ensureDir(path, 0o755, storageClass?.provisioner === 'kubernetes.io/host-path' ? undefined : fsGroup);
        out.set(v.name, { kind: 'dir', path, readOnly: v.persistentVolumeClaim.readOnly === true });
      } else if (v.configMap || v.secret) {
        const entries = new Map<string, Buffer>();
        const src = v.configMap ?? v.secret!;
        const name = v.configMap ? (v.configMap.name ?? '') : (v.secret!.secretName ?? '');
        const what = v.configMap ? `configmap "${name}"` : `secret "${name}"`;
        if (v.configMap) {
          const cm = await orNotFound(core.readNamespacedConfigMap({ name, namespace: w.ns }));
          if (!cm && !v.configMap.optional) throw new Waiting('ContainerCreating', `${what} not found`, 'FailedMount');
          for (const [k, s] of Object.entries(cm?.data ?? {})) entries.set(k, Buffer.from(s, 'utf8'));
          for (const [k, s] of Object.entries(cm?.binaryData ?? {})) entries.set(k, Buffer.from(s, 'base64'));
        } else {
          const secret = await orNotFound(core.readNamespacedSecret({ name, namespace: w.ns }));
          if (!secret && !v.secret!.optional) throw new Waiting('ContainerCreating', `${what} not found`, 'FailedMount');
          for (const [k, s] of Object.entries(secret?.data ?? {})) entries.set(k, Buffer.from(s, 'base64'));
        }
        project(dir, entries, src, fsGroup, what);
        out.set(v.name, { kind: 'dir', path: dir, readOnly: true });
      } else if (v.emptyDir?.medium === 'Memory') {
        const size = v.emptyDir.sizeLimit;
        out.set(v.name, { kind: 'tmpfs', ...(size !== undefined ? { sizeBytes: Math.ceil(parseQuantity(size)) } : {}) });
      } else {
        ensureDir(dir, 0o777, fsGroup);
        out.set(v.name, { kind: 'dir', path: dir, readOnly: false });
      }
    }
    return out;
  };

  // -------------------------------------------------------------------------------------------
  // Containers

  const runtimeOf = async (pod: V1Pod): Promise<string | undefined> => {
    const name = pod.spec?.runtimeClassName;
    if (!name) return undefined;
    const rc = await orNotFound(nodeApi.readRuntimeClass({ name }));
    if (!rc) throw new Waiting('ContainerCreating', `RuntimeClass "${name}" not found`, 'FailedCreatePodSandBox');
    // dockershim's words (docker_sandbox.go) for a handler the engine does not have.
    const runtimes = ((await docker.info()) as { Runtimes?: Record<string, unknown> }).Runtimes ?? {};
    if (!(rc.handler in runtimes))
      throw new Waiting(
        'ContainerCreating',
        `Failed to create pod sandbox: rpc error: code = Unknown desc = RuntimeHandler "${rc.handler}" not supported`,
        'FailedCreatePodSandBox',
      );
    return rc.handler;
  };

  const imageOf = async (run: Run) => {
    const image = run.spec.image ?? '';
    try {
      const info = await docker.getImage(image).inspect();
      run.status.imageID = `docker://${info.Id}`;
      return info;
    } catch {
      if (run.spec.imagePullPolicy === 'Never') {
        throw new Waiting(
          'ErrImageNeverPull',
          `Container image "${image}" is not present with pull policy of Never`,
          'ErrImageNeverPull',
          run.spec.name,
        );
      }
      throw new Waiting('ImagePullBackOff', `Back-off pulling image "${image}"`, 'Failed', run.spec.name);
    }
  };

  const createContainer = async (w: Worker, run: Run, runtime: string | undefined, netOwner: string | undefined): Promise<string> => {
    const pod = w.pod;
    const spec = pod.spec!;
    const c = run.spec;
    const psc = spec.securityContext ?? {};
    const sc = c.securityContext ?? {};
    const image = await imageOf(run);
    const uid = sc.runAsUser ?? psc.runAsUser;
    const gid = sc.runAsGroup ?? psc.runAsGroup;
    const configError = (message: string) => new Waiting('CreateContainerConfigError', message, 'Failed', c.name);
    if (sc.runAsNonRoot ?? psc.runAsNonRoot) {
      const imageUser = (image.Config.User ?? '').split(':')[0] ?? '';
      if (uid === 0)
        throw configError(`container's runAsUser breaks non-root policy (pod: "${w.name}_${w.ns}(${w.uid})", container: ${c.name})`);
      if (uid === undefined && (imageUser === '' || imageUser === 'root' || imageUser === '0')) {
        throw configError(
          `container has runAsNonRoot and image will run as root (pod: "${w.name}_${w.ns}(${w.uid})", container: ${c.name})`,
        );
      }
      if (uid === undefined && !/^\d+$/.test(imageUser))
        throw configError(`container has runAsNonRoot and image has non-numeric user (${imageUser}), cannot verify user is non-root`);
    }
    if (uid === undefined && gid !== undefined) throw configError('runAsGroup is specified without a runAsUser');

    const vars = new Map<string, string>();
    for (const e of c.env ?? []) {
      const ref = e.valueFrom?.secretKeyRef;
      if (!ref) {
        vars.set(e.name, expandVars(e.value ?? '', vars));
        continue;
      }
      // As kubelet_pods.go makeEnvironmentVariables: read when the container is made, its words when it cannot be.
      const secret = await orNotFound(core.readNamespacedSecret({ name: ref.name ?? '', namespace: w.ns }));
      const data = secret?.data?.[ref.key];
      if (data === undefined && ref.optional) continue;
      if (!secret) throw configError(`secret "${ref.name}" not found`);
      if (data === undefined) throw configError(`couldn't find key ${ref.key} in Secret ${w.ns}/${ref.name}`);
      vars.set(e.name, Buffer.from(data, 'base64').toString());
    }
    const mounts: Docker.MountSettings[] = [];
    const tmpfs: Record<string, string> = {};
    for (const m of c.volumeMounts ?? []) {
      const v = w.volumes?.get(m.name);
      if (!v) throw configError(`cannot find volume "${m.name}" to mount into container "${c.name}"`);
      if (v.kind === 'tmpfs') {
        // HostConfig.Tmpfs, not a tmpfs Mount: Docker mounts those noexec, kubelet's tmpfs is not.
        tmpfs[m.mountPath] = [m.readOnly ? 'ro' : 'rw', 'exec', 'mode=777', ...(v.sizeBytes ? [`size=${v.sizeBytes}`] : [])].join(',');
        continue;
      }
      let source = v.path;
      if (m.subPath) {
        source = join(v.path, m.subPath);
        if (!source.startsWith(`${v.path}/`) || !fs.existsSync(source))
          throw configError(`subPath "${m.subPath}" is not in volume "${m.name}"`);
      }
      mounts.push({ Type: 'bind', Source: source, Target: m.mountPath, ReadOnly: v.readOnly || m.readOnly === true });
    }

    const seccomp = sc.seccompProfile ?? psc.seccompProfile;
    const limits = c.resources?.limits ?? {};
    const requests = c.resources?.requests ?? {};
    const memory = limits.memory !== undefined ? Math.ceil(parseQuantity(limits.memory)) : undefined;
    const cpuRequest = requests.cpu ?? limits.cpu;
    const sysctls = Object.fromEntries(
      (psc.sysctls ?? []).filter((s) => !netOwner || !s.name.startsWith('net.')).map((s) => [s.name, s.value]),
    );
    const groups = [...(psc.supplementalGroups ?? []), ...(psc.fsGroup !== undefined ? [psc.fsGroup] : [])];
    const created = await docker.createContainer({
      name: `k8s_${c.name}_${w.name}_${w.ns}_${w.uid}_${w.attempt}`,
      Image: c.image,
      ...(c.command ? { Entrypoint: c.command.map((s) => expandVars(s, vars)) } : {}),
      ...(c.args ? { Cmd: c.args.map((s) => expandVars(s, vars)) } : {}),
      ...(c.workingDir ? { WorkingDir: c.workingDir } : {}),
      Env: [...vars].map(([k, v]) => `${k}=${v}`),
      ...(uid !== undefined ? { User: gid !== undefined ? `${uid}:${gid}` : String(uid) } : {}),
      ...(netOwner ? {} : { Hostname: (spec.hostname ?? w.name).slice(0, 63) }),
      Tty: c.tty === true,
      OpenStdin: c.stdin === true,
      StdinOnce: c.stdinOnce === true,
      Labels: {
        [KUBELET_LABEL]: nodeName,
        'io.kubernetes.pod.namespace': w.ns,
        'io.kubernetes.pod.name': w.name,
        'io.kubernetes.pod.uid': w.uid,
        'io.kubernetes.container.name': c.name,
      },
      HostConfig: {
        NetworkMode: netOwner ? `container:${netOwner}` : network,
        Mounts: mounts,
        Tmpfs: tmpfs,
        ReadonlyRootfs: sc.readOnlyRootFilesystem === true,
        CapDrop: sc.capabilities?.drop ?? [],
        CapAdd: sc.capabilities?.add ?? [],
        // Without a profile, kubelet 1.20 runs containers Unconfined (no SeccompDefault then).
        SecurityOpt: [
          ...(sc.allowPrivilegeEscalation === false ? ['no-new-privileges'] : []),
          ...(seccomp?.type === 'RuntimeDefault' ? [] : ['seccomp=unconfined']),
        ],
        Sysctls: sysctls,
        GroupAdd: groups.map(String),
        ...(memory !== undefined ? { Memory: memory, MemorySwap: memory } : {}),
        ...(limits.cpu !== undefined ? { NanoCpus: Math.round(parseQuantity(limits.cpu) * 1e9) } : {}),
        CpuShares: cpuRequest !== undefined ? Math.max(2, Math.round(parseQuantity(cpuRequest) * 1024)) : 2,
        ...(runtime ? { Runtime: runtime } : {}),
      },
    });
    run.id = created.id;
    run.status.containerID = `docker://${created.id}`;
    if (w.terminating) {
      await created.remove({ force: true }).catch(() => {});
      throw new Error('pod is terminating');
    }
    return created.id;
  };

  const terminatedOf = async (run: Run) => {
    let info = await docker.getContainer(run.id!).inspect();
    // Docker records an OOM kill from the cgroup's event, which can come well after the exit is
    // seen (under a fresh run's load: past 500 ms once, past 3 s once in a full make test): a
    // SIGKILLed exit of a container with a memory limit is looked at again for up to 15 s before
    // it is "Error" (a hang detector, not a time the test asserts).
    for (let i = 0; i < 300 && info.State.ExitCode === 137 && info.HostConfig.Memory && !info.State.OOMKilled; i++) {
      await sleep(50);
      const again = await docker
        .getContainer(run.id!)
        .inspect()
        .catch(() => undefined);
      if (!again) break;
      info = again;
    }
    const code = info.State.ExitCode;
    // FallbackToLogsOnError: a failed container's message is its log's end, 80 lines or 2048 bytes at most (kubelet's kuberuntime).
    let message: string | undefined;
    if (code !== 0 && run.spec.terminationMessagePolicy === 'FallbackToLogsOnError') {
      const logs = await docker.getContainer(run.id!).logs({ stdout: true, stderr: true, follow: false, tail: 80 });
      const text = (info.Config.Tty ? logs : demuxBuffer(logs)).subarray(-2048).toString('utf8');
      if (text) message = text;
    }
    run.status.ready = false;
    run.status.started = false;
    run.status.state = {
      terminated: {
        exitCode: code,
        ...(message ? { message } : {}),
        reason: info.State.OOMKilled ? 'OOMKilled' : code === 0 ? 'Completed' : 'Error',
        startedAt: new Date(info.State.StartedAt),
        finishedAt: new Date(info.State.FinishedAt),
        containerID: `docker://${run.id}`,
      },
    };
  };

  /** Start a created container; false (and a terminated status, as dockershim reports it) when Docker cannot. */
  const startContainer = async (w: Worker, run: Run, ownsNetwork: boolean): Promise<boolean> => {
    const container = docker.getContainer(run.id!);
    try {
      await container.start();
    } catch (e) {
      const now = new Date();
      run.status.state = {
        terminated: {
          exitCode: 128,
          reason: 'ContainerCannotRun',
          message: (e as Error).message,
          startedAt: now,
          finishedAt: now,
          containerID: `docker://${run.id}`,
        },
      };
      event(w, 'Warning', 'Failed', `Error: ${(e as Error).message}`);
      return false;
    }
    const info = await container.inspect();
    // The pod's one network (opts.network may name it or give its id); none: loopback.
    if (ownsNetwork) w.podIP = Object.values(info.NetworkSettings.Networks ?? {})[0]?.IPAddress || '127.0.0.1';
    run.status.state = { running: { startedAt: new Date(info.State.StartedAt) } };
    run.status.ready = true;
    run.status.started = true;
    event(w, 'Normal', 'Started', `Started container ${run.spec.name}`);
    // Exit: report it (an app container) or hand it to the caller (an init container).
    run.exited = container
      .wait()
      .then(() => (stopped ? undefined : terminatedOf(run)))
      .catch(() => {});
    return true;
  };

  const removeContainers = (w: Worker) =>
    Promise.all(
      w.runs
        .filter((r) => r.id)
        .map((r) =>
          docker
            .getContainer(r.id!)
            .remove({ force: true })
            .catch(() => {}),
        ),
    );

  /** Bring a bound pod up; retried (with backoff) while something it needs is missing. */
  const startPod = async (w: Worker): Promise<void> => {
    if (w.terminating || stopped) return;
    const refused = refusal(w.pod);
    if (refused) {
      w.failure = refused;
      event(w, 'Warning', refused.reason, refused.message);
      await pushStatus(w);
      return;
    }
    try {
      const runtime = await runtimeOf(w.pod);
      w.volumes ??= await prepareVolumes(w);
      for (const run of w.runs.filter((r) => r.init)) {
        if (run.status.state?.terminated?.exitCode === 0) continue;
        await createContainer(w, run, runtime, undefined);
        if (!(await startContainer(w, run, false))) return void (await pushStatus(w));
        void pushStatus(w);
        await run.exited;
        if (w.terminating) return;
        if (run.status.state?.terminated?.exitCode !== 0) return void (await pushStatus(w));
      }
      const app = w.runs.filter((r) => !r.init);
      for (const run of app) await createContainer(w, run, runtime, app[0] === run ? undefined : app[0]!.id);
      for (const run of app) {
        if (w.terminating) return;
        await startContainer(w, run, run === app[0]);
        void run.exited?.then(() => pushStatus(w));
      }
      await pushStatus(w);
    } catch (e) {
      if (w.terminating || stopped) return;
      const waiting = e instanceof Waiting ? e : new Waiting('CreateContainerError', (e as Error).message, 'Failed');
      // Start over from what did not finish: a completed init container stays done.
      for (const run of w.runs.filter((r) => !(r.init && r.status.state?.terminated?.exitCode === 0))) {
        if (run.id)
          await docker
            .getContainer(run.id)
            .remove({ force: true })
            .catch(() => {});
        delete run.id;
        delete run.status.containerID;
        if (waiting.container ? waiting.container === run.spec.name : !run.init)
          run.status.state = { waiting: { reason: waiting.reason, message: waiting.message } };
      }
      event(w, 'Warning', waiting.event, waiting.message);
      await pushStatus(w);
      w.attempt++;
      w.retry = setTimeout(() => launch(w), Math.min(250 * 2 ** w.attempt, 5000));
    }
  };

  /** Start (or retry) a pod; stop() waits for the flows under way, so none leaves a container behind. */
  const launch = (w: Worker) => {
    const flow: Promise<void> = startPod(w)
      .catch((e: unknown) => complain(`start ${key(w.ns, w.name)}`, e))
      .finally(() => flows.delete(flow));
    flows.add(flow);
  };

  const newWorker = (pod: V1Pod): Worker => {
    const hasInit = (pod.spec?.initContainers ?? []).length > 0;
    const run = (spec: V1Container, init: boolean): Run => ({
      spec,
      init,
      status: {
        name: spec.name,
        image: spec.image ?? '',
        imageID: '',
        ready: false,
        restartCount: 0,
        started: false,
        state: { waiting: { reason: init || hasInit ? 'PodInitializing' : 'ContainerCreating' } },
      },
    });
    return {
      uid: pod.metadata!.uid!,
      ns: pod.metadata!.namespace!,
      name: pod.metadata!.name!,
      pod,
      runs: [...(pod.spec?.initContainers ?? []).map((c) => run(c, true)), ...pod.spec!.containers.map((c) => run(c, false))],
      startTime: new Date(),
      terminating: false,
      attempt: 0,
      push: Promise.resolve(),
      events: new Set(),
    };
  };

  /** deletionTimestamp set: stop the containers (within the grace period), then finish the deletion as the kubelet does. */
  const terminate = async (w: Worker) => {
    if (w.terminating) return;
    w.terminating = true;
    clearTimeout(w.retry);
    const grace = Math.max(0, Math.min(Number(w.pod.metadata?.deletionGracePeriodSeconds ?? 30), 30));
    await Promise.all(
      w.runs
        .filter((r) => r.id)
        .map((r) =>
          docker
            .getContainer(r.id!)
            .stop({ t: grace })
            .catch(() => {}),
        ),
    );
    await Promise.all(w.runs.map((r) => r.exited));
    await pushStatus(w);
    await core
      .deleteNamespacedPod({
        name: w.name,
        namespace: w.ns,
        gracePeriodSeconds: 0,
        body: { gracePeriodSeconds: 0, preconditions: { uid: w.uid } },
      })
      .catch((e: unknown) => statusOf(e) === 404 || statusOf(e) === 409 || complain(`delete ${key(w.ns, w.name)}`, e));
  };

  /** The pod is gone from the API: nothing of it stays (its PVC directories do). */
  const forget = async (uid: string) => {
    const w = workers.get(uid);
    if (!w) return;
    workers.delete(uid);
    w.terminating = true;
    clearTimeout(w.retry);
    await removeContainers(w);
    fs.rmSync(podDir(uid), { recursive: true, force: true });
  };

  // -------------------------------------------------------------------------------------------
  // Scheduler

  /** What a pod requests (the scheduler's computePodResourceRequest): the larger of its containers' sum and its largest init container. */
  const requestsOf = (pod: V1Pod) => {
    const of = (c: V1Container, r: 'cpu' | 'memory') => parseQuantity(c.resources?.requests?.[r] ?? '0');
    const sum = (r: 'cpu' | 'memory') => (pod.spec?.containers ?? []).reduce((n, c) => n + of(c, r), 0);
    const init = (r: 'cpu' | 'memory') => Math.max(0, ...(pod.spec?.initContainers ?? []).map((c) => of(c, r)));
    return { cpu: Math.max(sum('cpu'), init('cpu')), memory: Math.max(sum('memory'), init('memory')) };
  };
  /** Pods this scheduler bound whose worker has not started yet (the scheduler cache's "assumed" pods). */
  const assumed = new Map<string, V1Pod>();
  /** The noderesources fit plugin against the node's allocatable, counting every pod on it that has not finished (terminating ones too). */
  const noRoom = (pod: V1Pod): string | undefined => {
    const placed = [
      ...[...workers.values()].filter((w) => !w.failure && !['Succeeded', 'Failed'].includes(w.pod.status?.phase ?? '')).map((w) => w.pod),
      ...[...assumed.entries()].filter(([uid]) => !workers.has(uid)).map(([, p]) => p),
    ];
    const want = requestsOf(pod);
    const used = placed.map(requestsOf).reduce((a, b) => ({ cpu: a.cpu + b.cpu, memory: a.memory + b.memory }), { cpu: 0, memory: 0 });
    const short = (['cpu', 'memory'] as const).filter((r) => want[r] > 0 && used[r] + want[r] > parseQuantity(ALLOCATABLE[r]));
    const reasons = [
      ...short.map((r) => `1 Insufficient ${r}`),
      ...(placed.length + 1 > Number(ALLOCATABLE.pods) ? ['1 Too many pods'] : []),
    ];
    return reasons.length ? `0/1 nodes are available: ${reasons.join(', ')}.` : undefined;
  };

  const unschedulableBecause = async (pod: V1Pod): Promise<string | undefined> => {
    const selector = pod.spec?.nodeSelector ?? {};
    if (Object.entries(selector).some(([k, v]) => nodeLabels[k] !== v))
      return "0/1 nodes are available: 1 node(s) didn't match node selector.";
    const full = noRoom(pod);
    if (full) return full;
    for (const v of pod.spec?.volumes ?? []) {
      const claim = v.persistentVolumeClaim?.claimName;
      if (claim && !(await orNotFound(core.readNamespacedPersistentVolumeClaim({ name: claim, namespace: pod.metadata!.namespace! })))) {
        return `persistentvolumeclaim "${claim}" not found`;
      }
    }
    return undefined;
  };

  /** One pod at a time, as the scheduler's loop: two pods never both take the last room. */
  let scheduling = Promise.resolve();
  const schedule = (pod: V1Pod) => (scheduling = scheduling.then(() => scheduleOne(pod)));
  const scheduleOne = async (pod: V1Pod) => {
    const name = pod.metadata!.name!;
    const namespace = pod.metadata!.namespace!;
    const k = key(namespace, name);
    if (binding.has(k) || (pod.spec?.schedulerName ?? 'default-scheduler') !== 'default-scheduler') return;
    binding.add(k);
    try {
      const why = await unschedulableBecause(pod);
      if (why) {
        unscheduled.set(k, pod);
        const cur = await orNotFound(core.readNamespacedPodStatus({ name, namespace }));
        const prev = cur?.status?.conditions?.find((c) => c.type === 'PodScheduled');
        if (!cur?.status || cur.spec?.nodeName || (prev?.status === 'False' && prev.message === why)) return;
        // The scheduler's event for it, as `kubectl describe pod` shows it (scheduler.go recordSchedulingFailure).
        void core
          .createNamespacedEvent({
            namespace,
            body: {
              metadata: { generateName: `${name}.` },
              involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace, name, uid: pod.metadata!.uid! },
              reason: 'FailedScheduling',
              message: why,
              type: 'Warning',
              source: { component: 'default-scheduler' },
              firstTimestamp: new Date(),
              lastTimestamp: new Date(),
              count: 1,
            },
          })
          .catch(() => {});
        cur.status.conditions = [
          ...(cur.status.conditions ?? []).filter((c) => c.type !== 'PodScheduled'),
          { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: why, lastTransitionTime: new Date() },
        ];
        await core.replaceNamespacedPodStatus({ name, namespace, body: cur });
        return;
      }
      unscheduled.delete(k);
      assumed.set(pod.metadata!.uid!, pod);
      await core.createNamespacedPodBinding({
        name,
        namespace,
        body: {
          apiVersion: 'v1',
          kind: 'Binding',
          metadata: { name, namespace, uid: pod.metadata!.uid! },
          target: { apiVersion: 'v1', kind: 'Node', name: nodeName },
        },
      });
    } catch (e) {
      if (statusOf(e) !== 404 && statusOf(e) !== 409) complain(`schedule ${k}`, e);
    } finally {
      binding.delete(k);
    }
  };

  // -------------------------------------------------------------------------------------------
  // Pods

  const onPod = (type: WatchEventType, pod: V1Pod) => {
    if (stopped) return;
    const uid = pod.metadata?.uid ?? '';
    const k = key(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '');
    if (type === 'DELETED') {
      unscheduled.delete(k);
      assumed.delete(uid);
      void forget(uid);
      return;
    }
    if (!pod.spec?.nodeName) {
      if (!pod.metadata?.deletionTimestamp) void schedule(pod);
      return;
    }
    unscheduled.delete(k);
    if (pod.spec.nodeName !== nodeName) return;
    let w = workers.get(uid);
    if (!w) {
      w = newWorker(pod);
      workers.set(uid, w);
      const phase = pod.status?.phase;
      // A pod that finished before this kubelet started stays finished.
      if (phase !== 'Succeeded' && phase !== 'Failed' && !pod.metadata?.deletionTimestamp) launch(w);
    }
    w.pod = pod;
    if (pod.metadata?.deletionTimestamp) void terminate(w).catch((e: unknown) => complain(`terminate ${k}`, e));
  };

  // -------------------------------------------------------------------------------------------
  // The kubelet API: /containerLogs, /exec and /attach

  const containerLogs = async (
    req: IncomingMessage,
    res: ServerResponse,
    ns: string,
    podName: string,
    containerName: string,
    q: URLSearchParams,
  ) => {
    const fail = (code: number, message: string) => res.writeHead(code, { 'content-type': 'text/plain' }).end(`${message}\n`);
    const w = byName(ns, podName);
    if (!w) return fail(404, `pod "${podName}" does not exist`);
    const run = w.runs.find((r) => r.spec.name === containerName);
    if (!run) return fail(404, `container "${containerName}" not found in pod "${podName}"`);
    if (q.get('previous') === 'true') return fail(400, `previous terminated container "${containerName}" in pod "${podName}" not found`);
    if (!run.id || run.status.state?.waiting)
      return fail(
        400,
        `container "${containerName}" in pod "${podName}" is waiting to start: ${run.status.state?.waiting?.reason ?? 'ContainerCreating'}`,
      );
    const container = docker.getContainer(run.id);
    const tty = (await container.inspect()).Config.Tty;
    const sinceTime = q.get('sinceTime');
    const sinceSeconds = q.get('sinceSeconds');
    const since = sinceTime
      ? Math.floor(Date.parse(sinceTime) / 1000)
      : sinceSeconds
        ? Math.floor(Date.now() / 1000) - Number(sinceSeconds)
        : 0;
    const tail = q.get('tailLines');
    const options = {
      stdout: true,
      stderr: true,
      timestamps: q.get('timestamps') === 'true',
      since,
      ...(tail ? { tail: Number(tail) } : {}),
    };
    let left = Number(q.get('limitBytes') ?? Infinity) || Infinity;
    res.writeHead(200, { 'content-type': 'text/plain' });
    const out = new Writable({
      write(chunk: Buffer, _enc, done) {
        if (left > 0) res.write(chunk.subarray(0, left));
        left -= chunk.length;
        if (left <= 0) res.end();
        done();
      },
    });
    if (q.get('follow') !== 'true') {
      const buf = await container.logs({ ...options, follow: false });
      out.write(tty ? buf : demuxBuffer(buf));
      res.end();
      return;
    }
    const stream = (await container.logs({ ...options, follow: true })) as NodeJS.ReadableStream & { destroy(): void };
    req.on('close', () => stream.destroy());
    if (tty) stream.pipe(out);
    else docker.modem.demuxStream(stream, out, out);
    stream.on('end', () => res.end());
  };

  interface Status {
    metadata: Record<string, never>;
    status: 'Success' | 'Failure';
    message?: string;
    reason?: string;
    details?: { causes: { reason?: string; message: string }[] };
    code?: number;
  }
  const internalError = (message: string): Status => ({
    metadata: {},
    status: 'Failure',
    message: `Internal error occurred: ${message}`,
    reason: 'InternalError',
    details: { causes: [{ message }] },
    code: 500,
  });

  /**
   * The channel protocol of exec and attach: a byte of channel, then data (0 stdin, 1 stdout,
   * 2 stderr, 3 status, 4 resize); which streams the request wants; its closing status.
   */
  const channels = (ws: WebSocket, q: URLSearchParams) => {
    const v4 = ws.protocol === 'v4.channel.k8s.io';
    // The apiserver names them input/output/error/tty toward the kubelet (its clients say stdin/stdout/stderr).
    const flag = (...names: string[]) => names.some((k) => q.get(k) === '1' || q.get(k) === 'true');
    const want = { stdin: flag('input', 'stdin'), stdout: flag('output', 'stdout'), stderr: flag('error', 'stderr'), tty: flag('tty') };
    const send = (channel: number, data: Buffer) => ws.readyState === WebSocket.OPEN && ws.send(Buffer.concat([Buffer.of(channel), data]));
    const finish = (status: Status) => {
      // channel.k8s.io (v1) carries only a failure's message; v4 a metav1.Status.
      if (v4) send(3, Buffer.from(JSON.stringify(status)));
      else if (status.status === 'Failure') send(3, Buffer.from(status.message ?? ''));
      ws.close(1000);
    };
    return { want, send, finish };
  };

  /** One exec, on the channel protocol. */
  const execIn = async (ws: WebSocket, w: Worker | undefined, containerName: string, q: URLSearchParams) => {
    const { want, send, finish } = channels(ws, q);
    let stdin: Duplex | undefined;
    let resize: ((size: { Width: number; Height: number }) => void) | undefined;
    const early: Buffer[] = [];
    let clientClosed = false;
    ws.on('message', (data: Buffer) => {
      const payload = data.subarray(1);
      if (data[0] === 0 && want.stdin) {
        if (stdin) stdin.write(payload);
        else early.push(payload);
      } else if (data[0] === 4 && want.tty) {
        try {
          resize?.(JSON.parse(payload.toString('utf8')) as { Width: number; Height: number });
        } catch {
          // a malformed resize is dropped, as the kubelet does
        }
      }
    });
    // Before v5, a client ends stdin by closing the connection: the command's stdin sees EOF.
    ws.on('close', () => {
      clientClosed = true;
      stdin?.end();
    });
    // The kubelet greets on the lowest writable channel so the client knows the stream is up.
    send(want.stdout ? 1 : want.stderr ? 2 : 3, Buffer.alloc(0));
    const run = w?.runs.find((r) => r.spec.name === containerName);
    if (!run?.id || !run.status.state?.running)
      return finish(internalError(`error executing command in container: container not found ("${containerName}")`));
    try {
      const container = docker.getContainer(run.id);
      const info = await container.inspect();
      if (!info.State.Running) return finish(internalError(`error executing command in container: container not running (${run.id})`));
      const exec = await container.exec({
        Cmd: q.getAll('command'),
        AttachStdin: want.stdin,
        AttachStdout: want.stdout,
        AttachStderr: want.stderr,
        Tty: want.tty,
        User: info.Config.User,
        WorkingDir: info.Config.WorkingDir,
        Env: info.Config.Env,
      });
      const stream = (await exec.start({ hijack: true, stdin: want.stdin, Tty: want.tty })) as Duplex;
      resize = ({ Width, Height }) => void exec.resize({ w: Width, h: Height }).catch(() => {});
      if (want.stdin) {
        for (const b of early) stream.write(b);
        stdin = stream;
        if (clientClosed) stream.end();
      }
      const channel = (n: number) => new Writable({ write: (chunk: Buffer, _e, done) => (send(n, chunk), done()) });
      if (want.tty) stream.on('data', (d: Buffer) => send(1, d));
      else docker.modem.demuxStream(stream, channel(1), channel(2));
      await new Promise<void>((resolve) => {
        stream.once('end', resolve);
        stream.once('close', resolve);
        stream.once('error', () => resolve());
      });
      let result = await exec.inspect();
      for (let i = 0; result.Running && i < 100; i++) {
        await sleep(20);
        result = await exec.inspect();
      }
      const code = result.ExitCode ?? -1;
      finish(
        code === 0
          ? { metadata: {}, status: 'Success' }
          : {
              metadata: {},
              status: 'Failure',
              // dockershim's words: "command terminated with non-zero exit code: " + its dockerExitError
              message: `command terminated with non-zero exit code: Error executing in Docker Container: ${code}`,
              reason: 'NonZeroExitCode',
              details: { causes: [{ reason: 'ExitCode', message: String(code) }] },
            },
      );
    } catch (e) {
      finish(internalError(`error executing command in container: ${(e as Error).message}`));
    }
  };

  /**
   * One attach to a container's first process, on the same channel protocol: its stdin (the
   * container's, open when the pod's container says `stdin: true`), its stdout and stderr as it
   * prints them from now on. Leaving detaches; it never closes the container's stdin (no
   * `stdinOnce`). Ends with a status, as the kubelet's ServeAttach does, when the container ends.
   */
  const attachTo = async (ws: WebSocket, w: Worker | undefined, containerName: string, q: URLSearchParams) => {
    const { want, send, finish } = channels(ws, q);
    const run = w?.runs.find((r) => r.spec.name === containerName);
    send(want.stdout ? 1 : want.stderr ? 2 : 3, Buffer.alloc(0));
    if (!run?.id || !run.status.state?.running)
      return finish(internalError(`error attaching to container: container not found ("${containerName}")`));
    const early: Buffer[] = [];
    let stream: Duplex | undefined;
    ws.on('message', (data: Buffer) => {
      if (data[0] !== 0 || !want.stdin) return;
      if (stream) stream.write(data.subarray(1));
      else early.push(data.subarray(1));
    });
    ws.on('close', () => stream?.destroy());
    try {
      const container = docker.getContainer(run.id);
      const info = await container.inspect();
      if (!info.State.Running) return finish(internalError(`error attaching to container: container not running (${run.id})`));
      if (want.stdin && !info.Config.OpenStdin)
        return finish(internalError('error attaching to container: stdin is not enabled for this container'));
      stream = (await container.attach({
        stream: true,
        stdin: want.stdin,
        stdout: want.stdout,
        stderr: want.stderr,
        hijack: true,
      })) as Duplex;
      if (ws.readyState !== WebSocket.OPEN) return void stream.destroy();
      for (const b of early) stream.write(b);
      const channel = (n: number) => new Writable({ write: (chunk: Buffer, _e, done) => (send(n, chunk), done()) });
      if (info.Config.Tty) stream.on('data', (d: Buffer) => send(1, d));
      else docker.modem.demuxStream(stream, channel(1), channel(2));
      await new Promise<void>((resolve) => {
        stream!.once('end', resolve);
        stream!.once('close', resolve);
        stream!.once('error', () => resolve());
      });
      finish({ metadata: {}, status: 'Success' });
    } catch (e) {
      finish(internalError(`error attaching to container: ${(e as Error).message}`));
    }
  };

  const wss = new WebSocketServer({
    noServer: true,
    // The first protocol the client offers that kubelet 1.20 speaks (client-node offers v5 first).
    handleProtocols: (offered) => [...offered].find((p) => EXEC_PROTOCOLS.includes(p)) ?? false,
  });

  const parse = (req: IncomingMessage) => {
    const url = new URL(req.url ?? '/', 'https://kubelet');
    return { parts: url.pathname.split('/').slice(1).map(decodeURIComponent), q: url.searchParams };
  };

  const onUpgrade = (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const { parts, q } = parse(req);
    const reject = (code: number, text: string, message: string) => {
      socket.end(
        `HTTP/1.1 ${code} ${text}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(message)}\r\nconnection: close\r\n\r\n${message}`,
      );
    };
    if ((parts[0] !== 'exec' && parts[0] !== 'attach') || (parts.length !== 4 && parts.length !== 5))
      return reject(404, 'Not Found', 'not found');
    if (req.headers.upgrade?.toLowerCase() !== 'websocket')
      return reject(400, 'Bad Request', 'the test kubelet speaks WebSocket only (no SPDY)');
    const [, ns = '', podName = ''] = parts;
    const containerName = parts[parts.length - 1] ?? '';
    const w = byName(ns, podName);
    if (!w) return reject(404, 'Not Found', `pod does not exist\n`);
    wss.handleUpgrade(req, socket, head, (ws) => void (parts[0] === 'exec' ? execIn : attachTo)(ws, w, containerName, q));
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const { parts, q } = parse(req);
    if (parts[0] === 'healthz') return void res.end('ok');
    if (parts[0] === 'containerLogs' && parts.length === 4 && req.method === 'GET') {
      const [, ns = '', pod = '', container = ''] = parts;
      return void containerLogs(req, res, ns, pod, container, q).catch((e: unknown) => {
        if (!res.headersSent) res.writeHead(500).end(String((e as Error).message));
        else res.end();
      });
    }
    if (parts[0] === 'exec' || parts[0] === 'attach')
      return void res.writeHead(400, { 'content-type': 'text/plain' }).end('Upgrade request required\n');
    res.writeHead(404).end();
  };

  // -------------------------------------------------------------------------------------------
  // Start: serve, register the Node, watch pods.

  const key0 = newRsaKey();
  const server = https.createServer(
    {
      key: key0.export({ type: 'pkcs8', format: 'pem' }),
      cert: issueServerCert(makeAuthority('berth test kubelet', key0), '127.0.0.1', key0),
    },
    onRequest,
  );
  server.on('upgrade', onUpgrade);
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;

  const nodeLabels: Record<string, string> = {
    'kubernetes.io/hostname': nodeName,
    'kubernetes.io/os': 'linux',
    'kubernetes.io/arch': process.arch === 'x64' ? 'amd64' : process.arch,
  };
  const engine = await docker.version();
  await core.createNode({ body: { apiVersion: 'v1', kind: 'Node', metadata: { name: nodeName, labels: nodeLabels } } });
  const node = await core.readNode({ name: nodeName });
  const now = new Date();
  const resources = { ...ALLOCATABLE };
  const ok = (type: string, reason: string, message: string) => ({
    type,
    status: 'False',
    reason,
    message,
    lastHeartbeatTime: now,
    lastTransitionTime: now,
  });
  node.status = {
    addresses: [
      { type: 'InternalIP', address: '127.0.0.1' },
      { type: 'Hostname', address: nodeName },
    ],
    daemonEndpoints: { kubeletEndpoint: { Port: port } },
    capacity: resources,
    allocatable: resources,
    conditions: [
      ok('MemoryPressure', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
      ok('DiskPressure', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
      ok('PIDPressure', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
      {
        type: 'Ready',
        status: 'True',
        reason: 'KubeletReady',
        message: 'kubelet is posting ready status',
        lastHeartbeatTime: now,
        lastTransitionTime: now,
      },
    ],
    nodeInfo: {
      machineID: nodeName,
      systemUUID: nodeName,
      bootID: nodeName,
      kernelVersion: engine.KernelVersion ?? '',
      osImage: 'berth test kubelet',
      containerRuntimeVersion: `docker://${engine.Version}`,
      kubeletVersion: 'v1.20.2',
      kubeProxyVersion: 'v1.20.2',
      operatingSystem: 'linux',
      architecture: nodeLabels['kubernetes.io/arch']!,
    },
  };
  await core.replaceNodeStatus({ name: nodeName, body: node });

  const pods = listWatch<V1Pod>(opts.kubeConfig, '/api/v1/pods', {}, onPod);
  // The scheduler's retry of pods it could not place (a PVC made later, say).
  const rescheduler = setInterval(() => {
    for (const [k, pod] of unscheduled) {
      void orNotFound(core.readNamespacedPod({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace! })).then(
        (fresh) => {
          if (!fresh || fresh.spec?.nodeName || fresh.metadata?.uid !== pod.metadata?.uid) unscheduled.delete(k);
          else void schedule(fresh);
        },
        () => {},
      );
    }
  }, 1000);

  return {
    nodeName,
    port,
    containerOf(ns, podName) {
      return byName(ns, podName)?.runs.find((r) => !r.init)?.id;
    },
    async stop() {
      stopped = true;
      pods.stop();
      clearInterval(rescheduler);
      for (const w of workers.values()) {
        w.terminating = true;
        clearTimeout(w.retry);
      }
      await Promise.all([...workers.values()].map(removeContainers));
      await Promise.all(flows);
      const left = await docker.listContainers({ all: true, filters: { label: [`${KUBELET_LABEL}=${nodeName}`] } });
      await Promise.all(
        left.map((c) =>
          docker
            .getContainer(c.Id)
            .remove({ force: true })
            .catch(() => {}),
        ),
      );
      fs.rmSync(join(opts.dataDir, 'pods'), { recursive: true, force: true });
      await core.deleteNode({ name: nodeName }).catch(() => {});
      for (const ws of wss.clients) ws.terminate();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
