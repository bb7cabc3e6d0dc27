import { posix } from 'node:path';
import type {
  V1ConfigMap,
  V1EnvVar,
  V1PersistentVolumeClaim,
  V1PodSecurityContext,
  V1PodSpec,
  V1Secret,
  V1SecurityContext,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import { BerthError } from '../../base/errors.js';
import { LABELS } from '../../plan/labels.js';
import { AGENT_HOME, RUN_DIR_MOUNT, SHARED_MOUNT, WORKSPACE_MOUNT, type RunPlan } from '../../plan/run-plan.js';
import { ANNOTATION_PREFIX, homeClaim, kubeLabelValue, metaOf, projectClaim, workspaceClaim } from './claims.js';
import { initContainersOf, kubeLiteral, prepareEntries } from './init-containers.js';

/**
 * RunPlan → Kubernetes objects, pure (docs/kubernetes.md, "The mapping"). One agent-sandbox
 * Sandbox per container berth would start on Docker, its pod running the plan's keep-alive; every
 * command is an exec into it. The plan decides; this only translates, and refuses (never drops)
 * what a cluster cannot carry.
 */

export { ANNOTATION_PREFIX, kubeLabelValue } from './claims.js';

export const SANDBOX_API = { group: 'agents.x-k8s.io', version: 'v1beta1', plural: 'sandboxes', kind: 'Sandbox' } as const;
/** The one container of a tenant pod. */
export const AGENT_CONTAINER = 'agent';
/** A ConfigMap holds at most 1 MiB; berth keeps room for the object's own fields. */
export const CONFIGMAP_BYTES = 900 * 1024;
/** berth-bridge in a pod: where its relays reach berth (tcp host:port) and the run's token. */
export const RELAY_ENV = { address: 'BERTH_RELAY_TCP', token: 'BERTH_RELAY_TOKEN' } as const;
/** The key of the run's relay token in its Secret (`<name>-relay`): the pod spec holds only a reference to it. */
export const RELAY_SECRET_KEY = 'token';
/** What a pod requests when the launcher is given nothing (config/kubernetes.ts's defaults: an idle agent's). */
export const IDLE_REQUESTS = { cpuMillis: 50, memoryBytes: 64 * 1024 ** 2 } as const;

/** The selector of a label query (plan/labels.ts ContainerQuery), in kube label values. */
export function kubeSelector(pairs: Record<string, string | undefined>): string {
  return Object.entries(pairs)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => `${k}=${kubeLabelValue(v)}`)
    .join(',');
}

/** The exact labels of an object berth made (its annotations), as plan/labels.ts names them. */
export function berthLabelsOf(annotations: Readonly<Record<string, string>> | undefined): Record<string, string> {
  // The cluster's keys: a table with no prototype, so no key names anything but itself.
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [k, v] of Object.entries(annotations ?? {})) if (k.startsWith(ANNOTATION_PREFIX)) out[k.slice(ANNOTATION_PREFIX.length)] = v;
  return out;
}

/** A file of a read-only mount's content (berth's own snapshot: seeds, protected paths, memory, CA). */
export interface SnapshotFile {
  /** Relative to the mount; '' when the mount is the file itself. */
  path: string;
  data: Buffer;
  mode: number;
}

export interface KubeRunInput {
  plan: RunPlan;
  /** The Sandbox's name, which is its pod's. */
  name: string;
  namespace: string;
  /** Contents of the plan's read-only bind mounts, by target: read by the launcher from berth's own copies, never a tenant's. */
  files: ReadonlyMap<string, SnapshotFile[]>;
  storageClass?: string;
  pullPolicy: string;
  /** How the pod's berth-bridge reaches berth (an IP:port the NetworkPolicy lets through) and with what token. */
  relay?: { address: string; token: string };
  /**
   * The volume id of each persistent mount's host directory, by target (kubernetes/volumes.ts): what
   * binds its claim to that directory. Required for every read-write /workspace and home mount.
   */
  volumes: ReadonlyMap<string, string>;
  /** What the pod requests (kubernetes.cpu_request, memory_request), each capped at the plan's limit; default IDLE_REQUESTS. */
  requests?: { cpuMillis: number; memoryBytes: number };
}

export interface Sandbox {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; labels: Record<string, string>; annotations: Record<string, string> };
  spec: { podTemplate: { metadata: { labels: Record<string, string>; annotations: Record<string, string> }; spec: V1PodSpec } };
}

export interface KubeRunObjects {
  sandbox: Sandbox;
  /** The read-only files, when the plan has any (deleted with the run, by its labels). */
  configMap?: V1ConfigMap;
  /** Volumes that outlive the run (a tenant's workspace, a session's home): created if absent, never by a run deleted (by session and project delete). */
  claims: V1PersistentVolumeClaim[];
  /** The run's relay token (`<name>-relay`), when the pod reaches berth: made before the Sandbox, deleted with the run. */
  secret?: V1Secret;
}

/** The names of a run's own objects besides its Sandbox (and pod): what its removal deletes. */
export const runObjectNames = (name: string) => ({ configMap: `${name}-files`, secret: `${name}-relay` });

export function uidGid(user: string): { uid: number; gid: number } {
  const m = /^(\d{1,10}):(\d{1,10})$/.exec(user);
  if (!m) throw new BerthError('CONFIG_INVALID', `the plan's user "${user}" is not uid:gid`);
  return { uid: Number(m[1]), gid: Number(m[2]) };
}

const unsupported = (what: string) =>
  new BerthError('LAUNCHER_UNSUPPORTED', `the Kubernetes launcher cannot ${what}`, {
    hint: 'docs/kubernetes.md says what differs from Docker',
  });

/** The claim a persistent mount lives on (kubernetes/claims.ts): what it belongs to, and its host directory's volume id. */
function claimFor(
  plan: RunPlan,
  target: string,
  volumeId: string,
  namespace: string,
  storageClass: string | undefined,
): V1PersistentVolumeClaim {
  const l = plan.labels;
  const owner = {
    installation: l[LABELS.installation] ?? '',
    project: l[LABELS.project] ?? '',
    volumeId,
    namespace,
    storageClass,
    sizeBytes: plan.limits.diskBytes ?? 1024 ** 3,
  };
  if (target === AGENT_HOME) return homeClaim({ ...owner, session: l[LABELS.session] ?? l[LABELS.run] ?? '' });
  if (l[LABELS.reach] === 'workspace') return workspaceClaim({ ...owner, workspace: l[LABELS.workspace] ?? '' });
  return projectClaim(owner);
}

/** Quantities as the server writes them back ("1", "250m"; bytes as a number), so what is stored is what was sent. */
const cpuQuantity = (millis: number) => (millis % 1000 === 0 ? String(millis / 1000) : `${millis}m`);

/**
 * The plan's limits, and requests of an idle agent's share (each capped at its limit): a node
 * holds as many sessions as its memory allows, idle warm pods included (a Burstable pod).
 */
function resourcesOf(plan: RunPlan, want: { cpuMillis: number; memoryBytes: number }) {
  const cpuMillis = Math.max(1, Math.round(plan.limits.nanoCpus / 1e6));
  return {
    limits: { cpu: cpuQuantity(cpuMillis), memory: String(plan.limits.memoryBytes) },
    requests: {
      cpu: cpuQuantity(Math.max(1, Math.min(want.cpuMillis, cpuMillis))),
      memory: String(Math.min(want.memoryBytes, plan.limits.memoryBytes)),
    },
  };
}

/**
 * How the pod reaches berth's relay: the address in its env, the token by reference to the run's
 * Secret, so the pod spec and the Sandbox (readable with `get pods`, kept in etcd and audit logs) never hold it.
 */
function relayParts(
  name: string,
  namespace: string,
  meta: ReturnType<typeof metaOf>,
  relay: { address: string; token: string },
): { env: V1EnvVar[]; secret: V1Secret } {
  const secretName = runObjectNames(name).secret;
  return {
    env: [
      { name: RELAY_ENV.address, value: relay.address },
      { name: RELAY_ENV.token, valueFrom: { secretKeyRef: { name: secretName, key: RELAY_SECRET_KEY } } },
    ],
    secret: {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: secretName, namespace, ...meta },
      type: 'Opaque',
      data: { [RELAY_SECRET_KEY]: Buffer.from(relay.token).toString('base64') },
    },
  };
}

/** Every container of berth's pods: no privilege, no capability, its root read-only as the plan says. */
export const containerSecurityOf = (uid: number, readOnlyRootfs: boolean): V1SecurityContext => ({
  allowPrivilegeEscalation: false,
  privileged: false,
  capabilities: { drop: ['ALL'] },
  readOnlyRootFilesystem: readOnlyRootfs,
  runAsNonRoot: uid !== 0,
});

/** Every pod of berth's: as the agent user, its volumes the agent's group, the runtime's default seccomp profile. */
export const podSecurityOf = (uid: number, gid: number, sysctls: Readonly<Record<string, string>> = {}): V1PodSecurityContext => ({
  runAsUser: uid,
  runAsGroup: gid,
  // berth's agent user is never root (agent_user); a plan that says root is translated as it is.
  runAsNonRoot: uid !== 0,
  fsGroup: gid,
  // The volume's root decides: a workspace already the agent's group is not walked again on
  // each start, and a tenant's chmod 600 files stay as they are (the default relabels all).
  fsGroupChangePolicy: 'OnRootMismatch',
  seccompProfile: { type: 'RuntimeDefault' },
  ...(Object.keys(sysctls).length ? { sysctls: Object.entries(sysctls).map(([k, v]) => ({ name: k, value: v })) } : {}),
});

export function renderKubeRun(input: KubeRunInput): KubeRunObjects {
  const { plan, name, namespace } = input;
  const { uid, gid } = uidGid(plan.user);
  const volumes: V1Volume[] = [];
  const mounts: V1VolumeMount[] = [];
  const claims: V1PersistentVolumeClaim[] = [];
  /** The mounts of the run's own claims (a workspace, a home): what the agent must be able to write. */
  const claimMounts: V1VolumeMount[] = [];
  const binaryData: Record<string, string> = {};
  let configBytes = 0;
  let relayed = false;
  /** The volume /workspace is (the plan's rw root): what the prepare init container works on. */
  let workspaceVolume: string | undefined;

  plan.mounts.forEach((m, i) => {
    const volume = `m${i}`;
    if (m.type === 'tmpfs') {
      volumes.push({ name: volume, emptyDir: { medium: 'Memory', sizeLimit: String(m.sizeBytes) } });
      mounts.push({ name: volume, mountPath: m.target, ...(m.readOnly ? { readOnly: true } : {}) });
      return;
    }
    if (m.target === RUN_DIR_MOUNT) {
      // Unix sockets do not cross nodes: berth-bridge relays to berth over TCP with the run's token.
      if (!input.relay) throw unsupported("reach berth's sockets without a gateway address (kubernetes.gateway)");
      relayed = true;
      return;
    }
    if (!m.readOnly && (m.target === WORKSPACE_MOUNT || m.target === AGENT_HOME)) {
      const volumeId = input.volumes.get(m.target);
      // Never a claim named by its owner alone: a later owner of that name would find it.
      if (volumeId === undefined) throw new BerthError('INTERNAL', `the Kubernetes launcher has no volume id for ${m.target}`);
      const claim = claimFor(plan, m.target, volumeId, namespace, input.storageClass);
      claims.push(claim);
      // The whole volume, never a subPath into it: subPath into what a tenant writes had host-escape CVEs.
      volumes.push({ name: volume, persistentVolumeClaim: { claimName: claim.metadata!.name! } });
      mounts.push({ name: volume, mountPath: m.target });
      claimMounts.push({ name: volume, mountPath: m.target });
      if (m.target === WORKSPACE_MOUNT) workspaceVolume = volume;
      return;
    }
    if (m.target === SHARED_MOUNT || m.target.startsWith(`${SHARED_MOUNT}/`)) {
      // A shared area is the operator's PVC (kubernetes.shared_claims), mounted whole, read-only unless granted rw.
      if (!m.claim)
        throw unsupported(
          `mount the shared area at ${m.target}: it has no volume on the cluster (kubernetes.shared_claims.${posix.basename(m.target)})`,
        );
      volumes.push({ name: volume, persistentVolumeClaim: { claimName: m.claim, ...(m.readOnly ? { readOnly: true } : {}) } });
      mounts.push({ name: volume, mountPath: m.target, ...(m.readOnly ? { readOnly: true } : {}) });
      return;
    }
    if (!m.readOnly) throw unsupported(`mount ${m.target} read-write from berth's host`);
    const files = input.files.get(m.target);
    if (!files) throw unsupported(`mount ${m.target}: berth did not read its content`);
    if (!files.length) {
      // Nothing to show (an empty memory directory): an empty read-only directory, as the bind would be.
      volumes.push({ name: volume, emptyDir: { sizeLimit: '4Ki' } });
      mounts.push({ name: volume, mountPath: m.target, readOnly: true });
      return;
    }
    const items = files.map((f, j) => {
      const key = `${volume}.${j}`;
      binaryData[key] = f.data.toString('base64');
      configBytes += f.data.length;
      return { key, path: f.path === '' ? posix.basename(m.target) : f.path, mode: f.mode & 0o555 };
    });
    volumes.push({ name: volume, configMap: { name: runObjectNames(name).configMap, items, defaultMode: 0o444 } });
    const single = files.length === 1 && files[0]!.path === '';
    // A file mount takes its one item by subPath: a path inside berth's own ConfigMap, never a tenant's volume.
    mounts.push({ name: volume, mountPath: m.target, readOnly: true, ...(single ? { subPath: items[0]!.path } : {}) });
  });
  if (configBytes > CONFIGMAP_BYTES) {
    throw unsupported(`carry ${configBytes} bytes of seeds, protected paths and memory in one ConfigMap (at most ${CONFIGMAP_BYTES})`);
  }

  // An empty value is no value to the API (omitempty), which is an empty variable in the container.
  const env: V1EnvVar[] = Object.entries(plan.env).map(([k, v]) => (v === '' ? { name: k } : { name: k, value: kubeLiteral(v) }));
  const meta = metaOf(plan.labels);
  const relay = relayed && input.relay ? relayParts(name, namespace, meta, input.relay) : undefined;
  if (relay) env.push(...relay.env);
  const resources = resourcesOf(plan, input.requests ?? IDLE_REQUESTS);
  const containerSecurity = containerSecurityOf(uid, plan.readOnlyRootfs);
  const entries = prepareEntries(plan);
  if (entries.length && !workspaceVolume) throw unsupported('prepare a workspace that is not a volume of its own');
  const initContainers = initContainersOf({
    image: plan.image,
    imagePullPolicy: input.pullPolicy,
    resources,
    securityContext: containerSecurity,
    // Root writes anything: only the agent's claims are checked.
    writable: uid === 0 ? [] : claimMounts,
    prepare: entries.length && workspaceVolume ? { volume: workspaceVolume, entries } : undefined,
  });
  const spec: V1PodSpec = {
    restartPolicy: 'Never',
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    terminationGracePeriodSeconds: 1,
    ...(plan.runtime === 'runc' ? {} : { runtimeClassName: plan.runtime }),
    securityContext: podSecurityOf(uid, gid, plan.sysctls),
    ...(initContainers.length ? { initContainers } : {}),
    containers: [
      {
        name: AGENT_CONTAINER,
        image: plan.image,
        imagePullPolicy: input.pullPolicy,
        command: plan.keepAlive.map(kubeLiteral),
        // The keep-alive's stdin is berth's report channel (kubernetes/reports.ts, through pods/attach);
        // execs never get it, so nothing of a tenant's holds that pipe.
        stdin: true,
        workingDir: plan.cwd,
        env,
        resources,
        securityContext: containerSecurity,
        volumeMounts: mounts,
      },
    ],
    volumes,
  };
  const sandbox: Sandbox = {
    apiVersion: `${SANDBOX_API.group}/${SANDBOX_API.version}`,
    kind: SANDBOX_API.kind,
    metadata: { name, namespace, ...meta },
    spec: { podTemplate: { metadata: meta, spec } },
  };
  const configMap: V1ConfigMap | undefined = Object.keys(binaryData).length
    ? { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: runObjectNames(name).configMap, namespace, ...meta }, binaryData }
    : undefined;
  return { sandbox, ...(configMap ? { configMap } : {}), ...(relay ? { secret: relay.secret } : {}), claims };
}
