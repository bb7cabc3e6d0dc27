import fs from 'node:fs';
import Docker from 'dockerode';
import { PassThrough } from 'node:stream';
import { NAMESPACES, tenantMounts, type Boundary, type Observed, type Source } from '../../plan/receipt.js';
import { SENTRY_RUNTIMES, sentryExec } from '../lifecycle.js';
import { mountinfoMounts, netDevInterfaces, PROC_TEXT_MAX, statusFacts } from '../proc-facts.js';
import { toContainerSettings } from './inspect.js';
import { createObserver } from '../observer.js';
import { holdProcess, releaseProcess } from './proc-handle.js';

/**
 * What a Docker container holds at its start, for its receipt. Two readers, each where it is
 * most reliable:
 * - the engine's inspect: runtime and limits (the cgroup settings, which gVisor's kernel does
 *   not show inside), and no-new-privs under gVisor (its kernel reports none);
 * - the kernel's /proc of the container's first process: under runc read from the host, where
 *   the tenant cannot shape it (seccomp, capabilities, no-new-privs, namespaces, mounts,
 *   interfaces); under gVisor the host process is the sandbox's, not the tenant's, so the same
 *   files are read inside, from gVisor's own kernel, and marked as such.
 * Anything that cannot be read stays unobserved; this decides nothing.
 */

const SEP = '@@berth-receipt@@';
/** Read inside: pid 1's status and mount table, and the network namespace's interfaces. */
const INSIDE = ['sh', '-c', `cat /proc/1/status; echo ${SEP}; cat /proc/1/mountinfo; echo ${SEP}; cat /proc/net/dev`];
const INSIDE_MS = 5000;

type Facts = Partial<Boundary>;

function readProc(dir: string): { status: string; mountinfo: string; netDev: string } | undefined {
  try {
    const read = (name: string) => fs.readFileSync(`${dir}/${name}`, 'utf8').slice(0, PROC_TEXT_MAX);
    return { status: read('status'), mountinfo: read('mountinfo'), netDev: read('net/dev') };
  } catch {
    return undefined; // it ended already (a short run)
  }
}

function kernelFacts(t: { status: string; mountinfo: string; netDev: string }): Facts {
  const all = mountinfoMounts(t.mountinfo);
  const root = all.find((m) => m.target === '/');
  return {
    ...statusFacts(t.status),
    ...(all.length ? { mounts: tenantMounts(all) } : {}),
    ...(root ? { read_only_root: root.read_only } : {}),
    ...(t.netDev ? { interfaces: netDevInterfaces(t.netDev) } : {}),
  };
}

/** Its namespaces against the host's init and berth's own (either: the container shares the host's). */
function namespacesOf(dir: string): Boundary['namespaces'] | undefined {
  try {
    const link = (base: string, n: string) => {
      try {
        return fs.readlinkSync(`${base}/ns/${n}`);
      } catch {
        return undefined;
      }
    };
    const entries = NAMESPACES.map((n) => {
      const own = fs.readlinkSync(`${dir}/ns/${n}`);
      return [n, own === link('/proc/self', n) || own === link('/proc/1', n) ? 'host' : 'own'] as const;
    });
    return Object.fromEntries(entries) as Boundary['namespaces'];
  } catch {
    return undefined;
  }
}

async function readInside(docker: Docker, containerId: string, runtime: string): Promise<string | undefined> {
  const exec = await docker
    .getContainer(containerId)
    .exec({ Cmd: sentryExec(runtime, INSIDE), AttachStdout: true, AttachStderr: false, Tty: false });
  const stream = await exec.start({ hijack: true, stdin: false });
  const out = new PassThrough();
  let text = '';
  out.on('data', (c: Buffer) => {
    if (text.length < 3 * PROC_TEXT_MAX) text += c.toString('utf8');
  });
  docker.modem.demuxStream(stream, out, new PassThrough().resume());
  let timer: NodeJS.Timeout | undefined;
  const ended = await Promise.race([
    new Promise<boolean>((r) => {
      stream.on('end', () => r(true));
      stream.on('error', () => r(false));
    }),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), INSIDE_MS))),
  ]);
  clearTimeout(timer);
  if (!ended) stream.destroy();
  return ended ? text : undefined;
}

export async function observeDockerContainer(docker: Docker, containerId: string): Promise<Observed> {
  const info = await docker.getContainer(containerId).inspect();
  const s = toContainerSettings(info);
  const seen: Observed = { seen_from: {} };
  const put = <K extends keyof Boundary>(field: K, value: Boundary[K] | undefined, from: Source) => {
    if (value === undefined) return;
    (seen as Record<string, unknown>)[field] = value;
    seen.seen_from[field] = from;
  };
  put('runtime', s.Runtime || undefined, 'engine');
  put('limits', { memory_bytes: s.Memory, nano_cpus: s.NanoCpus, pids: s.PidsLimit }, 'engine');
  put(
    'no_new_privs',
    s.SecurityOpt.some((o) => /^no-new-privileges([=:]true)?$/.test(o)),
    'engine',
  );
  put('read_only_root', s.ReadonlyRootfs, 'engine');

  const pid = info.State?.Pid ?? 0;
  const sandboxed = SENTRY_RUNTIMES.has(s.Runtime);
  const handle = !sandboxed && pid > 0 ? tryHold(pid, containerId) : undefined;
  if (handle) {
    try {
      const text = readProc(handle.dir);
      const ns = namespacesOf(handle.dir);
      if (text) for (const [k, v] of Object.entries(kernelFacts(text))) put(k as keyof Boundary, v as never, 'host-proc');
      put('namespaces', ns, 'host-proc');
    } finally {
      releaseProcess(handle);
    }
  } else if (info.State?.Running) {
    const text = await readInside(docker, containerId, s.Runtime).catch(() => undefined);
    const [status = '', mountinfo = '', netDev = ''] = (text ?? '').split(`${SEP}\n`);
    if (text)
      for (const [k, v] of Object.entries(kernelFacts({ status, mountinfo, netDev }))) put(k as keyof Boundary, v as never, 'inside');
  }
  return seen;
}

function tryHold(pid: number, containerId: string) {
  try {
    return holdProcess(pid, containerId);
  } catch {
    return undefined; // it ended at once: nothing of the kernel's to read
  }
}

/** Each container's reading, taken once (`wrap`: the launcher's engine-error translation). */
export const dockerObserver = (docker: Docker, wrap: <T>(call: () => Promise<T>) => Promise<T>) =>
  createObserver((id) => wrap(() => observeDockerContainer(docker, id)));
