import type { V1Affinity, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { BerthError } from '../../base/errors.js';
import { metaOf } from './claims.js';
import { containerSecurityOf, podSecurityOf, SANDBOX_API, type Sandbox } from './objects.js';

/**
 * A checkpoint's copy pod, pure (docs/checkpoints.md, "Kubernetes"): a short-lived agent-sandbox
 * Sandbox in berth's namespace, made like a tenant pod (the agent user, no capability, read-only
 * root, no service account token, bounded CPU, memory and life), that mounts a session's workspace
 * and home claims and the tenant's checkpoint claim, and copies between them with busybox `cp -a`
 * (links copied as links, never followed; hard links kept; modes and times kept). Each step is an
 * exec of a fixed script whose arguments are checkpoint ids (checked by their schema), never a
 * tenant's words. kubernetes/checkpoint-pod.ts makes it and runs the steps.
 */

/** Where a copy pod sees each volume. */
export const COPY_MOUNTS = {
  srcWorkspace: '/src/ws',
  srcHome: '/src/home',
  dstWorkspace: '/dst/ws',
  dstHome: '/dst/home',
  store: '/ckpt',
} as const;

export const COPY_CONTAINER = 'copy';
/** What a copy pod may use: busybox's cp holds a table of hard links, little else. */
export const COPY_LIMITS = { cpuMillis: 1000, memoryBytes: 256 * 1024 ** 2 } as const;
/** A checkpoint id as its schema has it (plan/checkpoints.ts): the only argument a step takes. */
const ID = /^\d{8}T\d{9}Z-[0-9a-f]{6}$/;

/** A volume of a copy pod: a claim, or (a session's volume not made yet) an empty directory standing in for it. */
export interface CopyVolume {
  mountPath: string;
  claim?: string;
  readOnly: boolean;
}

export interface CopyPodInput {
  name: string;
  namespace: string;
  image: string;
  pullPolicy: string;
  user: { uid: number; gid: number };
  labels: Record<string, string>;
  volumes: CopyVolume[];
  /** The node a pod of the session's already runs on: its volumes (ReadWriteOnce) are attached there. */
  node?: string;
  requests: { cpuMillis: number; memoryBytes: number };
  /** The pod's command sleeps this long: a copy pod berth lost sight of ends by itself. */
  lifetimeSeconds: number;
}

/** On that node only (by its name, as a DaemonSet's pods are placed: a hostname label need not be the node's name). */
export const onNode = (node: string): V1Affinity => ({
  nodeAffinity: {
    requiredDuringSchedulingIgnoredDuringExecution: {
      nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [node] }] }],
    },
  },
});

const cpuQuantity = (millis: number) => (millis % 1000 === 0 ? String(millis / 1000) : `${millis}m`);

export function renderCopyPod(input: CopyPodInput): Sandbox {
  const { uid, gid } = input.user;
  const volumes: V1Volume[] = [];
  const mounts: V1VolumeMount[] = [];
  input.volumes.forEach((v, i) => {
    const name = `c${i}`;
    volumes.push(
      v.claim
        ? { name, persistentVolumeClaim: { claimName: v.claim, ...(v.readOnly ? { readOnly: true } : {}) } }
        : { name, emptyDir: { sizeLimit: '4Ki' } },
    );
    mounts.push({ name, mountPath: v.mountPath, ...(v.readOnly ? { readOnly: true } : {}) });
  });
  const resources = {
    limits: { cpu: cpuQuantity(COPY_LIMITS.cpuMillis), memory: String(COPY_LIMITS.memoryBytes) },
    requests: {
      cpu: cpuQuantity(Math.max(1, Math.min(input.requests.cpuMillis, COPY_LIMITS.cpuMillis))),
      memory: String(Math.min(input.requests.memoryBytes, COPY_LIMITS.memoryBytes)),
    },
  };
  const securityContext = containerSecurityOf(uid, true);
  const meta = metaOf(input.labels);
  return {
    apiVersion: `${SANDBOX_API.group}/${SANDBOX_API.version}`,
    kind: SANDBOX_API.kind,
    metadata: { name: input.name, namespace: input.namespace, ...meta },
    spec: {
      podTemplate: {
        metadata: meta,
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 1,
          securityContext: podSecurityOf(uid, gid),
          ...(input.node ? { affinity: onNode(input.node) } : {}),
          containers: [
            {
              name: COPY_CONTAINER,
              image: input.image,
              imagePullPolicy: input.pullPolicy,
              command: ['sleep', String(input.lifetimeSeconds)],
              workingDir: '/',
              resources,
              securityContext,
              volumeMounts: mounts,
            },
          ],
          volumes,
        },
      },
    },
  };
}

/**
 * The shell functions every step shares. An entry of a volume's root is skipped when it is the
 * filesystem's own `lost+found` (root's: the agent can neither read nor remove it); the others are
 * named through a glob, never a listing parsed back (names are the tenant's), and copied by one
 * `cp -a` (busybox's `-dpR`: a link copied as a link, hard links kept as one file, a directory
 * made writable while it fills and given its mode after). Removal makes each directory the
 * agent's to empty first (a tenant's `chmod 500` would stop `rm`); `chmod -R` passes links by.
 */
/**
 * A step's exit when a volume it writes is not the agent's to write (storage that ignores the
 * pod's fsGroup): checked first, so the failure names the volume, not a file deep in a copy.
 * (No init container checks it, as a tenant pod's does: each is a container start, about half a
 * second of the copy pod's start on the test kubelet.)
 */
export const UNWRITABLE_EXIT = 86;
const writable = (...paths: string[]) => `for w in ${paths.join(' ')}; do [ -w "$w" ] || { echo "$w" >&2; exit ${UNWRITABLE_EXIT}; }; done`;

const FUNCTIONS = `
skip() { [ -e "$1" ] || [ -L "$1" ] || return 0
  [ "\${1##*/}" = lost+found ] && [ ! -L "$1" ] && [ "$(stat -c %u -- "$1")" = 0 ]; }
copy() { _s=$1; _d=$2; set --; for _e in "$_s"/* "$_s"/.[!.]* "$_s"/..?*; do skip "$_e" || set -- "$@" "$_e"; done
  [ $# = 0 ] || cp -a -- "$@" "$_d"/; }
zap() { if [ -d "$1" ] && [ ! -L "$1" ]; then chmod -R u+rwx -- "$1"; fi; rm -rf -- "$1"; }
clear() { _rc=0; for _e in "$1"/* "$1"/.[!.]* "$1"/..?*; do skip "$_e" && continue
  zap "$_e" || _rc=1; done; return $_rc; }
`;

/**
 * What the source volumes hold: their entries' `du` together, in blocks (KiB, a hard link once) and
 * apparent bytes (busybox `cp` writes a sparse file's holes out: its copy takes its whole length),
 * and how many entries there are.
 */
const MEASURE = `${FUNCTIONS}
set --; for r in ${COPY_MOUNTS.srcWorkspace} ${COPY_MOUNTS.srcHome}; do for e in "$r"/* "$r"/.[!.]* "$r"/..?*; do skip "$e" || set -- "$@" "$e"; done; done
if [ $# = 0 ]; then printf '0\ttotal\napparent 0\nfiles 0\n'
else du -sck -- "$@" | tail -n 1 && echo "apparent $(du -sbc -- "$@" | tail -n 1 | cut -f 1)" && echo "files $(find "$@" | wc -l)"; fi
`;

/**
 * Checkpoint $1 of the source volumes into the checkpoint volume: what the tenant no longer keeps
 * goes first (every entry not named in $2…, a crashed copy's .tmp-* too), then the copy is made in
 * .tmp-$1 and renamed into place; its size is the last line. A failed copy leaves nothing, and
 * names what the agent cannot read (a tenant's `chmod 000`: busybox cp fails on it in silence).
 */
const TAKE = `${FUNCTIONS}
${writable(COPY_MOUNTS.store)}
id=$1; shift; cd ${COPY_MOUNTS.store} || exit 1
for e in * .[!.]* ..?*; do skip "./$e" && continue
  k=0; for n in "$@"; do [ "$e" = "$n" ] && k=1; done; [ $k = 1 ] || zap "$e"; done
t=.tmp-$id
if mkdir -- "$t" "$t/ws" "$t/home" && copy ${COPY_MOUNTS.srcWorkspace} "$t/ws" && copy ${COPY_MOUNTS.srcHome} "$t/home" && mv -- "$t" "$id"; then du -sk -- "$id"
else rc=$?; zap "$t"
  find ${COPY_MOUNTS.srcWorkspace} ${COPY_MOUNTS.srcHome} \\( -type d ! -perm -u+rx \\) -o \\( ! -type d ! -type l ! -perm -u+r \\) 2>/dev/null | head -n 3 | sed 's/^/not readable: /' >&2
  exit $((rc ? rc : 1)); fi
`;

/** Put checkpoint $1 back into the target volumes (emptied first), then remove $2… (used up by the restore). */
const RESTORE = `${FUNCTIONS}
${writable(COPY_MOUNTS.dstWorkspace, COPY_MOUNTS.dstHome, COPY_MOUNTS.store)}
s=${COPY_MOUNTS.store}/$1; shift
[ -d "$s/ws" ] && [ -d "$s/home" ] || { echo "the checkpoint is not on the checkpoint volume" >&2; exit 3; }
clear ${COPY_MOUNTS.dstWorkspace} && clear ${COPY_MOUNTS.dstHome} && copy "$s/ws" ${COPY_MOUNTS.dstWorkspace} && copy "$s/home" ${COPY_MOUNTS.dstHome} || exit 1
for d in "$@"; do zap "${COPY_MOUNTS.store}/$d"; done
`;

/** Empty the target volumes (a checkpoint kept before the session had any). */
const CLEAR = `${FUNCTIONS}
${writable(COPY_MOUNTS.dstWorkspace, COPY_MOUNTS.dstHome)}
clear ${COPY_MOUNTS.dstWorkspace} && clear ${COPY_MOUNTS.dstHome}
`;

/** The source volumes into the target ones (emptied first): a fork. */
const FORK = `${FUNCTIONS}
${writable(COPY_MOUNTS.dstWorkspace, COPY_MOUNTS.dstHome)}
clear ${COPY_MOUNTS.dstWorkspace} && clear ${COPY_MOUNTS.dstHome} && copy ${COPY_MOUNTS.srcWorkspace} ${COPY_MOUNTS.dstWorkspace} && copy ${COPY_MOUNTS.srcHome} ${COPY_MOUNTS.dstHome}
`;

const ids = (list: readonly string[]) => {
  for (const id of list) if (!ID.test(id)) throw new BerthError('INTERNAL', `not a checkpoint id: ${JSON.stringify(id).slice(0, 80)}`);
  return [...list];
};
const script = (text: string, args: string[] = []) => ['sh', '-c', text, 'berth-checkpoint', ...args];

/** The argv of each step (an exec into the copy container). */
export const copySteps = {
  measure: () => script(MEASURE),
  take: (id: string, keep: readonly string[]) => script(TAKE, ids([id, ...keep])),
  restore: (id: string, drop: readonly string[]) => script(RESTORE, ids([id, ...drop])),
  clear: () => script(CLEAR),
  fork: () => script(FORK),
};

/** The measure's `du -sck` total ("<KiB>\ttotal"), "apparent N" and "files N": the bytes its copy will take (the larger), and entries. */
export function parseMeasure(stdout: string): { bytes: number; files: number } {
  const kib = /^(\d+)\s+total$/m.exec(stdout);
  const apparent = /^apparent (\d+)$/m.exec(stdout);
  const files = /^files (\d+)$/m.exec(stdout);
  if (!kib || !apparent || !files)
    throw new BerthError('RUN_FAILED', `the copy pod's measure said nothing readable: ${stdout.slice(0, 200)}`);
  return { bytes: Math.max(Number(kib[1]) * 1024, Number(apparent[1])), files: Number(files[1]) };
}

/** The take's last line: `du -sk` of the checkpoint made ("<KiB>\t<id>"), in bytes. */
export function parseTaken(stdout: string, id: string): number {
  const last = stdout.trim().split('\n').at(-1) ?? '';
  const m = /^(\d+)\s+(\S+)$/.exec(last);
  if (!m || m[2] !== id) throw new BerthError('RUN_FAILED', `the copy pod did not say the checkpoint's size: ${last.slice(0, 200)}`);
  return Number(m[1]) * 1024;
}
