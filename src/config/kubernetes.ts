import { z } from 'zod';

/**
 * Where berth runs agents: Docker beside it (the default), or a Kubernetes cluster through
 * agent-sandbox (docs/kubernetes.md). The launcher is berth's, not a project's: one berth process
 * talks to one engine, so every project of a home runs where berth.yaml says.
 */
export const LAUNCHERS = ['docker', 'kubernetes'] as const;
export const LauncherNameSchema = z
  .enum(LAUNCHERS)
  .default('docker')
  .describe('Where agents run: "docker" (an engine beside berth) or "kubernetes" (a cluster with agent-sandbox; docs/kubernetes.md).');

const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const HOST_PORT = /^[A-Za-z0-9.-]{1,253}:[0-9]{1,5}$/;

/** What a pod's agent is told in place of berth's file tools (they serve berth's host copies of workspaces, which a pod never sees). */
export const KUBE_NO_FILE_TOOLS =
  "berth's file tools are not offered here: this agent runs on Kubernetes, where its workspace is the volume at /workspace in its own pod. Use your own tools to read and write files there.";

/** The gateway port berth listens on for its pods' relays (berth-bridge, per-run tokens). */
export const KUBE_GATEWAY_PORT = 41500;

const CPU_QUANTITY = /^(\d{1,6}(\.\d{1,3})?|\d{1,9}m)$/;
const MEMORY_QUANTITY = /^\d{1,15}(k|M|G|T|Ki|Mi|Gi|Ti)?$/;
const MEMORY_UNITS: Record<string, number> = {
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
};

/** A CPU quantity ("250m", "0.5", 2) in millicores. */
export function cpuMillis(q: string | number): number {
  const s = String(q);
  return s.endsWith('m') ? Number(s.slice(0, -1)) : Math.round(Number(s) * 1000);
}

/** A memory quantity ("64Mi", "1G", 1048576) in bytes. */
export function memoryBytes(q: string | number): number {
  const m = /^(\d+)([a-zA-Z]*)$/.exec(String(q))!;
  return Number(m[1]) * MEMORY_UNITS[m[2]!]!;
}

const quantity = (pattern: RegExp, what: string) =>
  z.union([z.number().positive(), z.string()]).refine((q) => pattern.test(String(q)), `must be a Kubernetes ${what} quantity`);

export const KubernetesSchema = z
  .object({
    kubeconfig: z
      .string()
      .min(1)
      .optional()
      .describe("A kubeconfig file to reach the cluster; absent: the pod's own service account (berth running in the cluster)."),
    namespace: z
      .string()
      .regex(DNS_LABEL, 'must be a DNS label: a-z, 0-9 and "-", at most 63')
      .default('berth')
      .describe("The namespace of tenant pods, their volumes and the NetworkPolicy (berth's own, with RBAC limited to it)."),
    storage_class: z
      .string()
      .regex(/^[a-z0-9.-]{1,253}$/)
      .optional()
      .describe(
        "StorageClass of the workspace and home volumes (its CSI driver must enforce the size: it is the disk quota); absent: the cluster's default.",
      ),
    gateway: z
      .object({
        listen: z
          .string()
          .regex(HOST_PORT, 'must be host:port')
          .default(`0.0.0.0:${KUBE_GATEWAY_PORT}`)
          .describe(
            "Where berth listens for its pods' relays (model gateway, egress proxy, file tools), each connection with a per-run token.",
          ),
        address: z
          .string()
          .regex(HOST_PORT, 'must be host:port')
          .default(`berth-gateway:${KUBE_GATEWAY_PORT}`)
          .describe('How tenant pods reach that listener: the gateway Service of deploy/.'),
      })
      .strict()
      .prefault({}),
    shared_claims: z
      .record(z.string().max(63), z.string().regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'must be a PersistentVolumeClaim name'))
      .default({})
      .describe(
        "A shared area (shared_workspaces) → the PersistentVolumeClaim in berth's namespace that holds it on the cluster; mounted at /shared/<area> for granted projects, read-only unless the grant says rw. A granted area without one is refused.",
      ),
    cpu_request: quantity(CPU_QUANTITY, 'CPU ("100m", "0.5")')
      .refine((q) => cpuMillis(q) >= 1, 'must be at least 1m')
      .default('50m')
      .describe(
        "CPU a tenant pod requests (what the scheduler reserves): an idle agent's, so idle warm pods hold little; capped at the project's limits.cpus, which stays the pod's limit.",
      ),
    memory_request: quantity(MEMORY_QUANTITY, 'memory ("64Mi", "1Gi")')
      .refine((q) => memoryBytes(q) >= 4 * 1024 ** 2, 'must be at least 4Mi')
      .default('64Mi')
      .describe(
        "Memory a tenant pod requests (what the scheduler reserves): an idle agent's, so a node holds as many sessions as its memory allows; capped at the project's limits.memory_mb, which stays the pod's limit.",
      ),
    ipc_sysctls: z
      .boolean()
      .default(false)
      .describe(
        "Give tenant pods berth's IPC sysctls (kernel.msg*, kernel.shm*, kernel.sem: 16 SysV objects of each kind, as on Docker). Kubernetes calls them unsafe: nodes must allow them (--allowed-unsafe-sysctls) and the namespace's Pod Security level must be privileged. Off: the kernel's defaults in each pod's own IPC namespace, charged to its memory limit; a warm pod left holding any IPC object is removed either way.",
      ),
    pull_policy: z.enum(['IfNotPresent', 'Always', 'Never']).default('IfNotPresent').describe('imagePullPolicy of tenant pods.'),
    start_timeout_seconds: z
      .number()
      .int()
      .min(5)
      .max(3600)
      .default(300)
      .describe('How long a pod may take to run (scheduling, image pull, volumes) before the run fails.'),
    checkpoints: z
      .object({
        way: z
          .enum(['auto', 'copy', 'snapshot'])
          .default('auto')
          .describe(
            'How checkpoints (/undo, /fork) are kept on the cluster: "auto" takes VolumeSnapshots where the cluster serves snapshot.storage.k8s.io/v1 with a VolumeSnapshotClass for the volumes\' CSI driver, else copies them with a copy pod onto a checkpoint volume per tenant; "copy" and "snapshot" choose (snapshot fails where it cannot be had).',
          ),
        snapshot_class: z
          .string()
          .regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/)
          .optional()
          .describe("The VolumeSnapshotClass to use; absent: the driver's default class (annotated is-default-class), or its only one."),
        timeout_seconds: z
          .number()
          .int()
          .min(10)
          .max(3600)
          .default(300)
          .describe(
            "How long one copy (or one snapshot becoming ready) may take before it fails; the copy pod's own life ends soon after.",
          ),
      })
      .strict()
      .prefault({})
      .describe('Checkpoints of workspaces and homes on the cluster: docs/checkpoints.md.'),
  })
  .strict()
  .describe('The Kubernetes launcher (launcher: kubernetes): docs/kubernetes.md.');

export type KubernetesSettings = z.output<typeof KubernetesSchema>;
