import { Writable } from 'node:stream';
import type { CoreV1Api, Exec, V1Pod } from '@kubernetes/client-node';
import { tenantMounts, type Boundary, type Observed, type Source } from '../../plan/receipt.js';
import { sentryExec } from '../lifecycle.js';
import { mountinfoMounts, PROC_TEXT_MAX, statusFacts } from '../proc-facts.js';
import { AGENT_CONTAINER } from './objects.js';

/**
 * What a pod holds at its start, for its receipt (the Docker reader is launch/docker/observe.ts).
 * Two readers:
 * - the engine's side is the pod as the API server keeps it, which is what its kubelet was told:
 *   runtime class, limits, no-new-privs, read-only root, and the host namespaces it does not share;
 * - the kernel's side is read inside, by an exec into the agent container (its first process's
 *   status and mount table), marked `inside`: the tenant could shape it, and it is bounded.
 * Left unobserved, never guessed: a pod's network interfaces (it has its network plugin's by
 * design; its NetworkPolicy is the boundary, not the interface list) and the pids limit (the
 * kubelet's, not the pod's).
 */

const SEP = '@@berth-receipt@@';
const INSIDE = ['sh', '-c', `cat /proc/1/status; echo ${SEP}; cat /proc/1/mountinfo`];
const INSIDE_MS = 5000;

/** A Kubernetes quantity ("1", "500m", "512Mi", "536870912") in base units (cores, bytes), or undefined. */
export function quantity(q: string | undefined): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(m|k|Ki|M|Mi|G|Gi|T|Ti)?$/.exec(q ?? '');
  if (!m) return undefined;
  const scale: Record<string, number> = { m: 1e-3, k: 1e3, Ki: 1024, M: 1e6, Mi: 1024 ** 2, G: 1e9, Gi: 1024 ** 3, T: 1e12, Ti: 1024 ** 4 };
  return Number(m[1]) * (m[2] ? (scale[m[2]] as number) : 1);
}

/** What the stored pod says of its agent container's boundary (pure). */
export function podFacts(pod: V1Pod): Partial<Omit<Boundary, 'limits'>> {
  const spec = pod.spec;
  const agent = spec?.containers.find((c) => c.name === AGENT_CONTAINER);
  if (!spec || !agent) return {};
  const sc = agent.securityContext ?? {};
  const hostNetwork = spec.hostNetwork === true;
  return {
    runtime: spec.runtimeClassName ?? 'runc',
    ...(sc.allowPrivilegeEscalation === false ? { no_new_privs: true } : sc.allowPrivilegeEscalation ? { no_new_privs: false } : {}),
    ...(sc.readOnlyRootFilesystem === undefined ? {} : { read_only_root: sc.readOnlyRootFilesystem }),
    namespaces: {
      pid: spec.hostPID || spec.shareProcessNamespace ? 'host' : 'own',
      ipc: spec.hostIPC ? 'host' : 'own',
      net: hostNetwork ? 'host' : 'own',
      mnt: 'own',
      uts: hostNetwork ? 'host' : 'own',
    },
  };
}

/** Its agent container's memory and CPU limits (its pids limit is the kubelet's, not the pod's). */
export function podLimits(pod: V1Pod): Observed['limits'] {
  const agent = pod.spec?.containers.find((c) => c.name === AGENT_CONTAINER);
  const cpu = quantity(agent?.resources?.limits?.cpu);
  const memory = quantity(agent?.resources?.limits?.memory);
  if (cpu === undefined && memory === undefined) return undefined;
  return {
    ...(memory !== undefined ? { memory_bytes: Math.round(memory) } : {}),
    ...(cpu !== undefined ? { nano_cpus: Math.round(cpu * 1e9) } : {}),
  };
}

async function readInside(exec: Exec, namespace: string, pod: string, runtime: string): Promise<string | undefined> {
  let text = '';
  const out = new Writable({
    write: (chunk: Buffer, _e, done) => {
      if (text.length < 2 * PROC_TEXT_MAX) text += chunk.toString('utf8');
      done();
    },
  });
  const sink = new Writable({ write: (_c, _e, done) => done() });
  let timer: NodeJS.Timeout | undefined;
  let ok = false;
  const ws = await exec.exec(namespace, pod, AGENT_CONTAINER, sentryExec(runtime, INSIDE), out, sink, null, false, (s) => {
    ok = s.status === 'Success';
  });
  const ended = await Promise.race([
    new Promise<boolean>((r) => ws.on('close', () => r(true))),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), INSIDE_MS))),
  ]);
  clearTimeout(timer);
  if (!ended) ws.close();
  return ended && ok ? text : undefined;
}

export async function observePod(core: CoreV1Api, exec: Exec, namespace: string, pod: string): Promise<Observed> {
  const seen: Observed = { seen_from: {} };
  const put = (facts: Partial<Omit<Boundary, 'limits'>> & Pick<Observed, 'limits'>, from: Source) => {
    for (const [field, value] of Object.entries(facts)) {
      if (value === undefined) continue;
      (seen as Record<string, unknown>)[field] = value;
      seen.seen_from[field as keyof Boundary] = from;
    }
  };
  const stored = await core.readNamespacedPod({ name: pod, namespace });
  const engine = podFacts(stored);
  put({ ...engine, limits: podLimits(stored) }, 'engine');
  if (stored.status?.phase !== 'Running') return seen;
  const text = await readInside(exec, namespace, pod, engine.runtime ?? 'runc').catch(() => undefined);
  if (!text) return seen;
  const [status = '', mountinfo = ''] = text.split(`${SEP}\n`);
  const all = mountinfoMounts(mountinfo);
  const root = all.find((m) => m.target === '/');
  put(
    {
      ...statusFacts(status),
      ...(all.length ? { mounts: tenantMounts(all) } : {}),
      ...(root ? { read_only_root: root.read_only } : {}),
    },
    'inside',
  );
  return seen;
}
