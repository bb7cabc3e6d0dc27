import type { V1Container, V1VolumeMount } from '@kubernetes/client-node';
import { WORKSPACE_MOUNT, type RunPlan } from '../../plan/run-plan.js';

/** A tenant pod's init containers (kubernetes/objects.ts renders the rest), pure. */

/**
 * The kubelet expands `$(NAME)` in a container's command and env values from its env (`$$` is a
 * `$`): berth's strings are data, so each `$` is written as `$$` and reaches the pod as it was.
 */
export const kubeLiteral = (s: string): string => s.replaceAll('$', '$$$$');

/** The init container that makes the workspace volume what the plan's prepare step says (berth-bridge prepare). */
export const PREPARE_CONTAINER = 'prepare';
/**
 * The init container that checks the agent can write its volumes, before anything else: storage
 * that ignores fsGroup (hostPath, some CSI drivers) leaves a volume root-owned, and the run fails
 * naming its StorageClass (kubernetes/start-trouble.ts) instead of the agent failing on its first write.
 */
export const WRITABLE_CONTAINER = 'writable';

/**
 * What Docker's prepare step (runs/prepare-mounts.ts) makes of berth's host tree, as berth-bridge
 * prepare's entries for the volume at /workspace: directories, then the files and mountpoints
 * that must be real entries of their kind before anything is mounted over them. The container
 * runtime follows a link at a mount target (within the container's root): without this, a
 * tenant's link there moves berth's read-only copy, and the link stays the tenant's to remove.
 */
export function prepareEntries(plan: RunPlan): string[] {
  const p = plan.prepare;
  return [...p.dirs.map((d) => `dir:${d.path}`), ...p.files.map((f) => `file:${f}`), ...p.mountpoints.map((m) => `${m.kind}:${m.path}`)];
}

/**
 * A pod's init containers, as the agent, before anything of a tenant's runs in it: `test -w` on
 * each of its claims (the image's own test(1), no shell), then the prepare step on the workspace.
 */
export function initContainersOf(o: {
  image: string;
  imagePullPolicy: string;
  resources: V1Container['resources'];
  securityContext: V1Container['securityContext'];
  writable: V1VolumeMount[];
  prepare: { volume: string; entries: string[] } | undefined;
}): V1Container[] {
  const { image, imagePullPolicy, resources, securityContext } = o;
  const out: V1Container[] = [];
  if (o.writable.length)
    out.push({
      name: WRITABLE_CONTAINER,
      image,
      imagePullPolicy,
      command: ['test', ...o.writable.flatMap((m, i) => [...(i ? ['-a'] : []), '-w', m.mountPath])].map(kubeLiteral),
      resources,
      securityContext,
      volumeMounts: o.writable,
    });
  if (o.prepare)
    out.push({
      name: PREPARE_CONTAINER,
      image,
      imagePullPolicy,
      command: ['berth-bridge', 'prepare', WORKSPACE_MOUNT, ...o.prepare.entries].map(kubeLiteral),
      resources,
      securityContext,
      volumeMounts: [{ name: o.prepare.volume, mountPath: WORKSPACE_MOUNT }],
      // Why it failed (berth-bridge's words) is the pod's status: the run's error quotes it.
      terminationMessagePolicy: 'FallbackToLogsOnError',
    });
  return out;
}
