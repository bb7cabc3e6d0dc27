import type { ContainerSettings } from '../../launch/docker/inspect.js';
import type { RunPlan } from '../../plan/run-plan.js';
import { compareEngineSettings } from './engine-settings.js';
import type { HostFacts } from './host-facts.js';
import type { ProbeFacts } from './probe.js';
import type { VerifyCheck } from './verify-check.js';

/**
 * The kernel's side of every verify container: is the confinement berth planned actually in
 * force? Each check is a pure function of (what was read, what was planned); `judge` turns one
 * check over all containers into one verify line.
 */
export interface ObservedContainer {
  id: string;
  /** The plan it was created from. */
  plan: RunPlan;
  /** What it said from inside; undefined: its probe printed nothing. */
  inside?: ProbeFacts;
  /** What the engine says it was created with, or why that could not be read. */
  engine: ContainerSettings | { error: string };
}

/** The init namespaces have fixed inode numbers on every Linux kernel (PROC_PID_INIT_INO, PROC_IPC_INIT_INO). */
export const INIT_PID_NS = 'pid:[4026531836]';
export const INIT_IPC_NS = 'ipc:[4026531839]';

/** Past this, a cgroup v1 memory limit is the kernel's "no limit" (PAGE_COUNTER_MAX pages). */
const NO_MEMORY_LIMIT = 2 ** 62;
const PAGE = 4096;
/** A process's comm: its program's file name, cut at 15 characters. */
const commOf = (program: string) => program.slice(program.lastIndexOf('/') + 1).slice(0, 15);

const mib = (bytes: number) => `${Math.round((bytes / 2 ** 20) * 10) / 10} MiB`;

export function seccompProblems(f: ProbeFacts): string[] {
  return f.Seccomp === '2' ? [] : [`Seccomp: ${f.Seccomp || 'unreadable'} (no seccomp filter in force)`];
}

export function privilegeProblems(f: ProbeFacts): string[] {
  return [
    ...(/^0+$/.test(f.CapEff) ? [] : [`CapEff: ${f.CapEff || 'unreadable'} (capabilities in force)`]),
    ...(f.NoNewPrivs === '1' ? [] : [`NoNewPrivs: ${f.NoNewPrivs || 'unreadable'}`]),
  ];
}

/** Which mandatory access control the kernel enforces: the host's view, or the container's view of the same kernel. */
export function lsmOf(host: HostFacts, f?: ProbeFacts): 'AppArmor' | 'SELinux' | undefined {
  if (host.apparmor || f?.apparmor === 'Y') return 'AppArmor';
  return host.selinux ? 'SELinux' : undefined;
}

export function lsmProblems(f: ProbeFacts, host: HostFacts): string[] {
  const lsm = lsmOf(host, f);
  const label = f.label;
  if (lsm === 'AppArmor' && (label === '' || label === 'unconfined'))
    return [`AppArmor is on in this kernel but the container runs unconfined${label ? '' : ' (no label at all)'}`];
  if (lsm === 'SELinux' && (label === '' || /:(unconfined_t|spc_t|kernel_t)(:|$)/.test(label)))
    return [`SELinux is enforcing but the container's label is "${label}" (unconfined)`];
  return [];
}

export function pidNamespaceProblems(f: ProbeFacts, plan: RunPlan, host: HostFacts): string[] {
  if (!f.pidns) return ['its pid namespace is unreadable'];
  if (f.pidns === INIT_PID_NS || host.pidNamespaces.includes(f.pidns))
    return [`the container is in the host's pid namespace (${f.pidns}): it sees every host process`];
  // Its pid 1 is what the plan started: the command, or the agent berth-bridge's relays exec after "--".
  const afterRelays = plan.argv.indexOf('--');
  const started = [plan.argv[0], afterRelays >= 0 ? plan.argv[afterRelays + 1] : undefined].filter((a) => a !== undefined).map(commOf);
  return started.includes(f.init) ? [] : [`its pid 1 is "${f.init}", not the "${started.join('" or "')}" it was started with`];
}

export function ipcNamespaceProblems(f: ProbeFacts, host: HostFacts): string[] {
  if (!f.ipcns) return ['its IPC namespace is unreadable'];
  return f.ipcns === INIT_IPC_NS || host.ipcNamespaces.includes(f.ipcns)
    ? [`the container is in the host's IPC namespace (${f.ipcns})`]
    : [];
}

export function pidsLimitProblems(f: ProbeFacts, plan: RunPlan): string[] {
  return f['pids.max'] === String(plan.limits.pids) ? [] : [`pids.max ${f['pids.max'] || 'unreadable'} (planned ${plan.limits.pids})`];
}

export function memoryLimitProblems(f: ProbeFacts, plan: RunPlan): string[] {
  const raw = f['memory.max'];
  const planned = Math.floor(plan.limits.memoryBytes / PAGE) * PAGE; // the kernel keeps whole pages
  if (raw === 'max' || Number(raw) >= NO_MEMORY_LIMIT) return [`no memory limit (${raw}; planned ${mib(planned)})`];
  if (!/^\d+$/.test(raw)) return [`memory limit unreadable (planned ${mib(planned)})`];
  return Number(raw) === planned ? [] : [`memory limit ${mib(Number(raw))} (planned ${mib(planned)})`];
}

/**
 * The runtime the plan chose is the one that answers inside: runc shares the host's kernel (its
 * release), gVisor's sentry announces itself and reports its own release, and any other runtime
 * (a VM) must not be the host's kernel.
 */
export function runtimeProblems(f: ProbeFacts, plan: RunPlan, host: HostFacts): string[] {
  if (!f.kernel) return ['its kernel release is unreadable'];
  const hostKernel = f.kernel === host.kernel;
  if (plan.runtime === 'runc' || plan.runtime === 'crun')
    return hostKernel ? [] : [`${plan.runtime} planned, but the kernel inside is ${f.kernel}, not the host's ${host.kernel}`];
  if (plan.runtime === 'runsc' && !f.sentry) return [`runsc planned, but gVisor did not answer inside (kernel ${f.kernel})`];
  return hostKernel ? [`${plan.runtime} planned, but the host's kernel (${f.kernel}) answers inside`] : [];
}

/** "runsc: gVisor (kernel 4.4.0)", once per runtime seen. */
function runtimesSeen(containers: ObservedContainer[]): string {
  const seen = new Map<string, string>();
  for (const c of containers) {
    if (!c.inside || seen.has(c.plan.runtime)) continue;
    seen.set(
      c.plan.runtime,
      `${c.plan.runtime}: ${c.inside.sentry ? "gVisor's kernel" : c.plan.runtime === 'runc' || c.plan.runtime === 'crun' ? "the host's kernel" : 'its own kernel'} (${c.inside.kernel})`,
    );
  }
  return [...seen.values()].join('; ');
}

export interface ConfinementCheck {
  name: string;
  /** The verify line when it held in every container. */
  held(host: HostFacts, containers: ObservedContainer[]): string;
  /** What did not hold in one container; empty: it held there. */
  problems(c: ObservedContainer, host: HostFacts): string[];
}

/**
 * gVisor's kernel reports no NoNewPrivs, IPC namespace or cgroup limits inside: under its sentry
 * (proven by the runtime check) those facts are read from the engine's record of the container
 * instead, and the verify line says so.
 */
const underSentry = (c: ObservedContainer) => c.plan.runtime === 'runsc' && !!c.inside?.sentry;

/** What compareEngineSettings says of each fact gVisor's kernel does not report inside (its lines start so). */
const ENGINE_RECORD = {
  NoNewPrivs: 'SecurityOpt without no-new-privileges',
  IpcMode: 'IpcMode ',
  PidsLimit: 'PidsLimit ',
  Memory: 'Memory ',
} as const;

function engineRecordProblems(c: ObservedContainer, what: keyof typeof ENGINE_RECORD): string[] {
  if ('error' in c.engine) return [`could not inspect it: ${c.engine.error}`];
  return compareEngineSettings(c.engine, c.plan)
    .filter((d) => d.startsWith(ENGINE_RECORD[what]))
    .map((d) => `under gVisor, the engine's record: ${d}`);
}

/** Checks read from inside need the probe's facts; without them nothing can be said of that container. */
const inside =
  (fn: (f: ProbeFacts, c: ObservedContainer, host: HostFacts) => string[]) =>
  (c: ObservedContainer, host: HostFacts): string[] =>
    c.inside ? fn(c.inside, c, host) : ['it printed no facts from inside (the probe did not run)'];

export const CONFINEMENT_CHECKS: ConfinementCheck[] = [
  {
    name: 'runtime',
    held: (_host, cs) => `the planned runtime answers inside: ${runtimesSeen(cs)}`,
    problems: inside((f, c, host) => runtimeProblems(f, c.plan, host)),
  },
  { name: 'seccomp', held: () => 'Seccomp: 2 (a filter in force)', problems: inside((f) => seccompProblems(f)) },
  {
    name: 'capabilities',
    held: (_h, cs) => `CapEff 0 and NoNewPrivs 1${cs.some(underSentry) ? " (under gVisor: NoNewPrivs from the engine's record)" : ''}`,
    problems: inside((f, c) =>
      underSentry(c) ? [...privilegeProblems({ ...f, NoNewPrivs: '1' }), ...engineRecordProblems(c, 'NoNewPrivs')] : privilegeProblems(f),
    ),
  },
  {
    name: 'LSM label',
    held: (host, cs) => {
      const lsm = lsmOf(host, cs.find((c) => c.inside)?.inside);
      return lsm
        ? `${lsm} label in force ("${cs.find((c) => c.inside)?.inside?.label}")`
        : 'note: this kernel has neither AppArmor nor SELinux in force; seccomp, capabilities and namespaces are the confinement';
    },
    problems: inside((f, _c, host) => lsmProblems(f, host)),
  },
  {
    name: 'pid namespace',
    held: () => 'its own: pid 1 is its own process, no host process is visible',
    problems: inside((f, c, host) => pidNamespaceProblems(f, c.plan, host)),
  },
  {
    name: 'IPC namespace',
    held: () => "its own, not the host's",
    problems: inside((f, c, host) => (underSentry(c) ? engineRecordProblems(c, 'IpcMode') : ipcNamespaceProblems(f, host))),
  },
  {
    name: 'pids limit',
    held: () => 'pids.max as planned',
    problems: inside((f, c) => (underSentry(c) ? engineRecordProblems(c, 'PidsLimit') : pidsLimitProblems(f, c.plan))),
  },
  {
    name: 'memory limit',
    held: () => 'the memory limit as planned',
    problems: inside((f, c) => (underSentry(c) ? engineRecordProblems(c, 'Memory') : memoryLimitProblems(f, c.plan))),
  },
  {
    name: 'engine settings',
    held: () =>
      "the engine's inspect matches the plan (user, network, read-only root, capabilities, no-new-privileges, seccomp/AppArmor, pids, memory, CPU, pid and IPC mode, IPC sysctls)",
    problems: (c) => ('error' in c.engine ? [`could not inspect it: ${c.engine.error}`] : compareEngineSettings(c.engine, c.plan)),
  },
];

/** One check over every container verify made: each distinct problem named once, with how many containers had any. */
export function judge(check: ConfinementCheck, containers: ObservedContainer[], host: HostFacts): VerifyCheck {
  if (containers.length === 0) return { name: check.name, status: 'error', detail: 'no container ran, so nothing could be read' };
  const problems: string[] = [];
  let failing = 0;
  for (const c of containers) {
    const found = check.problems(c, host);
    if (found.length) failing++;
    for (const p of found) if (!problems.includes(p)) problems.push(p);
  }
  const n = containers.length;
  if (failing === 0)
    return { name: check.name, status: 'ok', detail: `${check.held(host, containers)} (${n} container${n === 1 ? '' : 's'})` };
  return { name: check.name, status: 'escape', detail: `${problems.join('; ')} (${failing} of ${n} containers)` };
}
