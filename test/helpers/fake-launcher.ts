import { plannedBoundary, type Observed } from '../../src/plan/receipt.js';
import fs from 'node:fs';
import { posix } from 'node:path';
import { BerthError } from '../../src/base/errors.js';
import {
  managedContainer,
  type ContainerGone,
  type EngineInfo,
  type ExecLeftovers,
  type ExecResult,
  type IdleContainer,
  type Launcher,
  type LauncherCapabilities,
  type ManagedContainer,
  type RunOptions,
  type RunResult,
} from '../../src/launch/launcher.js';
import { commandNotFound, CONTAINER_LOST, runBounds, STOPPED_EXIT } from '../../src/launch/lifecycle.js';
import { labelFilter, type ContainerQuery } from '../../src/plan/labels.js';
import type { PlannedMount, RunPlan } from '../../src/plan/run-plan.js';

/**
 * A Launcher in memory: no processes, no engine. A container is a record (its plan, labels and
 * state); its command is one of a few programs interpreted from argv. The rules of a run's life
 * (output cap, timeout, abort, 127, 137) are lifecycle.ts's, as for every launcher; what a
 * program sees of files is what the plan mounts: binds read (and write) the host path under
 * their source, tmpfs mounts are the container's own, and the root filesystem holds nothing and
 * refuses writes.
 *
 * Programs: true, false, exit N, echo ARGS, cat PATH, write PATH TEXT, sleep MS, yes TEXT
 * (floods), bg (leaves a process running), ipc (leaves an IPC object), hold MIB (leaves memory
 * held), and the wrappers a plan
 * puts around them: `sh -c [--] "PROGRAM ARGS"` (not a shell: the words of one command, so a
 * shell-agent message can name a program) and `berth-bridge relay ... -- ARGV`. The keep-alive
 * is `berth-bridge idle`.
 */

export interface FakeContainer {
  id: string;
  plan: RunPlan;
  labels: Record<string, string>;
  state: 'running' | 'exited';
  /** Its main process: the plan's argv (run) or the keep-alive (startIdle). */
  cmd: string[];
  /** Processes execs left running ("pid comm"). */
  processes: string[];
  /** IPC objects execs left ("shm 1"). */
  ipc: string[];
  /** Bytes execs left held (hold MIB). */
  held: number;
  /** Files of its tmpfs mounts, by container path: they live and die with the container. */
  tmpfs: Map<string, string>;
  /** Stops each program running in it (removing the container kills them). */
  kills: Set<() => void>;
  /** An exec is running in it. */
  busy: boolean;
}

export type FakeEvent = { op: 'run' | 'startIdle' | 'execIn' | 'remove'; id: string; argv?: string[] };

export interface FakeLauncherOptions {
  runtimes?: string[];
  defaultRuntime?: string;
  hostPaths?: boolean;
  unixSockets?: boolean;
  loopQuotas?: boolean;
  /** Warm containers, and leftovers observed after each exec: for every runtime, or per runtime. */
  warm?: boolean | ((runtime: string) => boolean);
  /** Images it has (default: any); a plan for another fails as the engine's would (IMAGE_MISSING). */
  images?: string[];
  /** What `observe` reports of a container (default: its plan, kept to the letter): a launcher that drops a setting. */
  observed?: (asPlanned: Observed) => Observed;
}

export interface FakeLauncher extends Launcher {
  /** The containers that exist now (running or exited), oldest first. */
  containers(): FakeContainer[];
  /** What was asked of it, in order. */
  readonly events: FakeEvent[];
  /** The container goes away behind berth's back: removed (by hand, with its project) or its main process exited. */
  vanish(id: string, how?: 'removed' | 'exited'): void;
}

interface Proc {
  argv: string[];
  container: FakeContainer;
  plan: RunPlan;
  out(which: 'stdout' | 'stderr', text: string): void;
  /** Settles when the program is stopped (cap, timeout, abort, its container removed). */
  killed: Promise<void>;
  isKilled(): boolean;
}

type Program = (p: Proc) => Promise<number> | number;

const KEEP_ALIVE = ['berth-bridge', 'idle'];

export function createFakeLauncher(options: FakeLauncherOptions = {}): FakeLauncher {
  const runtimes = options.runtimes ?? ['runc'];
  const caps: LauncherCapabilities = {
    runtimes,
    defaultRuntime: options.defaultRuntime ?? runtimes[0] ?? 'runc',
    hostPaths: options.hostPaths ?? true,
    unixSockets: options.unixSockets ?? true,
    loopQuotas: options.loopQuotas ?? true,
    warm: (runtime) => runtimes.includes(runtime) && (typeof options.warm === 'function' ? options.warm(runtime) : (options.warm ?? true)),
    // A fake container has no mount namespace to attach to: the pool's other branch.
    lateMounts: () => false,
  };
  const live = new Map<string, FakeContainer>();
  const events: FakeEvent[] = [];
  let nextId = 1;
  let nextPid = 100;

  /** What an engine refuses before anything runs: a runtime it lacks, an image it does not have. */
  function create(plan: RunPlan, cmd: string[]): FakeContainer {
    if (!runtimes.includes(plan.runtime)) throw new BerthError('RUNTIME_MISSING', `the engine has no such runtime: ${plan.runtime}`);
    if (options.images && !options.images.includes(plan.image))
      throw new BerthError('IMAGE_MISSING', `image ${plan.image} is not on this engine`);
    const id = `fake${String(nextId++).padStart(12, '0')}`;
    const c: FakeContainer = {
      id,
      plan,
      labels: { ...plan.labels },
      state: 'running',
      cmd,
      processes: [],
      ipc: [],
      held: 0,
      tmpfs: new Map(),
      kills: new Set(),
      busy: false,
    };
    live.set(id, c);
    return c;
  }

  function remove(id: string): boolean {
    const c = live.get(id);
    if (!c) return false;
    live.delete(id);
    events.push({ op: 'remove', id });
    stopAll(c);
    return true;
  }

  function stopAll(c: FakeContainer): void {
    c.state = 'exited';
    for (const kill of [...c.kills]) kill();
    c.kills.clear();
  }

  /**
   * Run a program in a container under lifecycle.ts's bounds; `stop` is what stopping it means
   * for the caller (the run ends; an exec's container is removed).
   */
  async function execute(c: FakeContainer, plan: RunPlan, argv: string[], opts: RunOptions, stop: () => void) {
    if (!resolveProgram(argv))
      return { ...commandNotFound(argv, plan.image), truncated: false, timedOut: false, stopped: undefined, ranMs: 0 };
    let kill!: () => void;
    let killedFlag = false;
    const killed = new Promise<void>((r) => (kill = () => ((killedFlag = true), r())));
    c.kills.add(kill);
    const bounds = runBounds(plan, opts, () => {
      kill();
      stop();
    });
    const out = (which: 'stdout' | 'stderr', text: string) => {
      if (!killedFlag) bounds.output.push(which, Buffer.from(text));
    };
    const t0 = performance.now();
    bounds.arm();
    let code: number;
    try {
      code = await Promise.race([
        runArgv({ argv, container: c, plan, out, killed, isKilled: () => killedFlag }),
        killed.then(() => STOPPED_EXIT),
      ]);
    } finally {
      bounds.disarm();
      c.kills.delete(kill);
    }
    return {
      exitCode: killedFlag ? STOPPED_EXIT : code,
      stdout: bounds.output.text('stdout'),
      stderr: bounds.output.text('stderr'),
      truncated: bounds.output.truncated,
      timedOut: bounds.timedOut,
      // Stopped by its bounds, or by its container going away under it.
      stopped: bounds.why() ?? (killedFlag ? CONTAINER_LOST : undefined),
      ranMs: performance.now() - t0,
    };
  }

  function leftoversOf(c: FakeContainer): ExecLeftovers {
    // A runtime it does not keep warm is one it cannot look into: nothing observed, never "clean".
    if (!caps.warm(c.plan.runtime)) return {};
    return { running: [...c.processes], keepAliveHurt: [], mountsMissing: [], ipc: [...c.ipc], memoryGrowth: c.held };
  }

  function resolveProgram(argv: string[]): Program | undefined {
    const name = argv[0] ?? '';
    return launcherPrograms[name] ?? PROGRAMS[name];
  }

  async function runArgv(p: Proc): Promise<number> {
    const program = resolveProgram(p.argv);
    if (!program) {
      const nf = commandNotFound(p.argv, p.plan.image);
      p.out('stderr', nf.stderr);
      return nf.exitCode;
    }
    return program(p);
  }

  /** Programs that need the launcher: its pids, or its dispatch (the wrappers run what they wrap). */
  const launcherPrograms: Record<string, Program> = {
    bg: (p) => {
      p.container.processes.push(`${nextPid++} sleep`);
      return 0;
    },
    sh: (p) => {
      // A chat's traced run runs the same command here: the fake has no trace.
      // berth's shell preset around a message (traced, or without a network): the message is its $1.
      const wrapped = p.argv[1] === '-c' && p.argv[3] === 'sh' && /eval "(set -x; )?\$1"$/.test(p.argv[2] ?? '');
      const args = p.argv[1] === '-x' ? p.argv.slice(1) : wrapped ? ['sh', '-c', p.argv[4] ?? ''] : p.argv;
      const script = args[1] !== '-c' ? undefined : args[2] === '--' ? args[3] : args[2];
      const argv = script?.trim().split(/\s+/).filter(Boolean);
      if (!argv?.length) {
        p.out('stderr', 'sh: the fake runs `sh -c "PROGRAM ARGS"` only\n');
        return 2;
      }
      return runArgv({ ...p, argv });
    },
    'berth-bridge': (p) => {
      const sep = p.argv.indexOf('--');
      if (p.argv[1] === 'relay' && sep > 0) return runArgv({ ...p, argv: p.argv.slice(sep + 1) });
      if (p.argv[1] === 'idle') return p.killed.then(() => STOPPED_EXIT);
      p.out('stderr', 'berth-bridge: usage\n');
      return 2;
    },
  };

  function query(q: ContainerQuery): FakeContainer[] {
    // The same label selection the engine is asked for (plan/labels.ts).
    const wanted = labelFilter(q).label.map((kv) => kv.split(/=(.*)/s).slice(0, 2) as [string, string]);
    return [...live.values()].filter((c) => wanted.every(([k, v]) => c.labels[k] === v));
  }

  const managed = (c: FakeContainer): ManagedContainer => managedContainer(c.id, c.state, c.labels);

  function created(c: FakeContainer, onCreated?: (id: string) => void): void {
    try {
      onCreated?.(c.id);
    } catch (err) {
      remove(c.id);
      throw err;
    }
  }

  return {
    events,
    containers: () => [...live.values()],
    async attachMounts() {
      throw new BerthError('LAUNCHER_UNSUPPORTED', 'the fake launcher attaches no mounts');
    },
    vanish(id, how = 'removed') {
      const c = live.get(id);
      if (!c) throw new Error(`no container ${id}`);
      if (how === 'removed') remove(id);
      else stopAll(c);
    },

    async info(): Promise<EngineInfo> {
      return {
        name: 'Fake launcher 1.0',
        version: '1.0',
        apiVersion: 'fake',
        securityOptions: [],
        rootDir: '/nonexistent/fake-launcher',
        runtimes: runtimes.map((name) => ({ name, version: 'fake' })),
        defaultRuntime: caps.defaultRuntime,
      };
    },
    capabilities: async () => caps,
    // Read when asked, as a real engine is: a container removed meanwhile cannot be observed.
    observe(id) {
      const c = live.get(id);
      if (!c) return Promise.reject(new BerthError('NOT_FOUND', `no container ${id}`));
      const seen = plannedBoundary(c.plan);
      const asPlanned: Observed = { ...seen, seen_from: Object.fromEntries(Object.keys(seen).map((k) => [k, 'engine'])) };
      return Promise.resolve(options.observed ? options.observed(asPlanned) : asPlanned);
    },

    async run(plan, opts = {}): Promise<RunResult> {
      const t0 = performance.now();
      const c = create(plan, plan.argv);
      events.push({ op: 'run', id: c.id, argv: plan.argv });
      created(c, opts.onCreated);
      void opts.onStarted?.(c.id);
      const tCreated = performance.now();
      try {
        const r = await execute(c, plan, plan.argv, opts, () => undefined);
        const tDone = performance.now();
        return {
          containerId: c.id,
          exitCode: r.exitCode,
          stdout: r.stdout,
          stderr: r.stderr,
          truncated: r.truncated,
          timedOut: r.timedOut,
          timings: { createMs: tCreated - t0, startMs: 0, runMs: r.ranMs, totalMs: tDone - t0 },
        };
      } finally {
        remove(c.id);
      }
    },

    async startIdle(plan, keepAliveArgv, opts = {}): Promise<IdleContainer> {
      const t0 = performance.now();
      const c = create(plan, keepAliveArgv);
      events.push({ op: 'startIdle', id: c.id, argv: keepAliveArgv });
      created(c, opts.onCreated);
      // Only berth-bridge's idle mode (behind its relays, or not) keeps a container up.
      const sep = keepAliveArgv.indexOf('--');
      const main =
        keepAliveArgv[0] === 'berth-bridge' && keepAliveArgv[1] === 'relay' && sep > 0 ? keepAliveArgv.slice(sep + 1) : keepAliveArgv;
      if (main.join(' ') !== KEEP_ALIVE.join(' ')) {
        remove(c.id);
        throw new BerthError('RUN_FAILED', `the keep-alive "${keepAliveArgv.join(' ')}" exited at once (status 127)`);
      }
      return { containerId: c.id, timings: { createMs: performance.now() - t0, startMs: 0 } };
    },

    async execIn(containerId, plan, argv, opts = {}): Promise<ExecResult | ContainerGone> {
      const t0 = performance.now();
      const c = live.get(containerId);
      if (!c) return { gone: true, reason: `No such container: ${containerId}` };
      if (c.state !== 'running') return { gone: true, reason: `container ${containerId} is not running` };
      if (c.busy) throw new Error(`fake launcher: a second exec into ${containerId} while one runs (the contract allows one at a time)`);
      events.push({ op: 'execIn', id: containerId, argv });
      await opts.onStarted?.(containerId);
      opts.onCreated?.(containerId);
      c.busy = true;
      try {
        // No way to stop an exec alone: stopping it removes its container, as on Docker.
        const r = await execute(c, plan, argv, opts, () => remove(containerId));
        const tDone = performance.now();
        return {
          containerId,
          exitCode: r.exitCode,
          stdout: r.stdout,
          stderr: r.stderr,
          truncated: r.truncated,
          timedOut: r.timedOut,
          ...(r.stopped ? { stopped: r.stopped } : {}),
          ...(r.stopped === CONTAINER_LOST ? { lost: 'it was removed' } : {}),
          leftovers: r.stopped ? {} : leftoversOf(c),
          timings: { createMs: 0, startMs: 0, runMs: r.ranMs, totalMs: tDone - t0 },
        };
      } finally {
        c.busy = false;
      }
    },

    async removeContainers(ids) {
      for (const id of ids) remove(id);
      return ids.length; // as the Docker launcher counts: the ids it was given
    },
    listManaged: async (q) => query(q).map(managed),
    async removeManaged(q) {
      const found = query(q);
      for (const c of found) remove(c.id);
      return found.length;
    },
  };
}

/** The mount that shows a container path: the deepest target at or above it (a later one of the same target wins). */
function coveringMount(mounts: PlannedMount[], path: string): PlannedMount | undefined {
  let best: PlannedMount | undefined;
  for (const m of mounts) {
    const inside = path === m.target || path.startsWith(m.target === '/' ? '/' : `${m.target}/`);
    if (inside && (!best || m.target.length >= best.target.length)) best = m;
  }
  return best;
}

/** A container path as the program names it (relative to the plan's cwd), normalized. */
const containerPath = (p: Proc, path: string) => posix.resolve(p.plan.cwd, path);

/** The host path a bind shows at a container path. */
const hostPath = (m: PlannedMount & { type: 'bind' }, path: string) => posix.join(m.source, posix.relative(m.target, path));

const errnoText = (err: unknown) =>
  ({ ENOENT: 'No such file or directory', EISDIR: 'Is a directory', ENOTDIR: 'Not a directory', EACCES: 'Permission denied' })[
    (err as NodeJS.ErrnoException).code ?? ''
  ] ?? String(err);

const PROGRAMS: Record<string, Program> = {
  true: () => 0,
  false: () => 1,
  exit: (p) => Number(p.argv[1] ?? 0) & 0xff,
  echo: (p) => {
    p.out('stdout', `${p.argv.slice(1).join(' ')}\n`);
    return 0;
  },
  cat: (p) => {
    const path = containerPath(p, p.argv[1] ?? '');
    const m = coveringMount(p.plan.mounts, path);
    try {
      if (!m) throw Object.assign(new Error(), { code: 'ENOENT' }); // the root filesystem holds nothing of the host
      if (m.type === 'tmpfs') {
        const text = p.container.tmpfs.get(path);
        if (text === undefined) throw Object.assign(new Error(), { code: 'ENOENT' });
        p.out('stdout', text);
      } else {
        p.out('stdout', fs.readFileSync(hostPath(m, path), 'utf8'));
      }
      return 0;
    } catch (err) {
      p.out('stderr', `cat: ${p.argv[1]}: ${errnoText(err)}\n`);
      return 1;
    }
  },
  write: (p) => {
    const path = containerPath(p, p.argv[1] ?? '');
    const m = coveringMount(p.plan.mounts, path);
    // Outside every mount is the root filesystem, read-only like a read-only mount.
    if (!m || m.readOnly) {
      p.out('stderr', `write: ${p.argv[1]}: Read-only file system\n`);
      return 1;
    }
    const text = p.argv.slice(2).join(' ');
    try {
      if (m.type === 'tmpfs') p.container.tmpfs.set(path, text);
      else fs.writeFileSync(hostPath(m, path), text);
      return 0;
    } catch (err) {
      p.out('stderr', `write: ${p.argv[1]}: ${errnoText(err)}\n`);
      return 1;
    }
  },
  sleep: async (p) => {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise((r) => (timer = setTimeout(r, Number(p.argv[1] ?? 0)))), p.killed]);
    clearTimeout(timer);
    return 0;
  },
  yes: async (p) => {
    const chunk = `${p.argv.slice(1).join(' ') || 'y'}\n`.repeat(256);
    // Until the cap stops it (or the timeout, or an abort); each chunk lets timers run.
    while (!p.isKilled()) {
      p.out('stdout', chunk);
      await new Promise((r) => setImmediate(r));
    }
    return STOPPED_EXIT;
  },
  ipc: (p) => {
    p.container.ipc.push(`shm ${p.container.ipc.length + 1}`);
    return 0;
  },
  hold: (p) => {
    p.container.held += Number(p.argv[1] ?? 0) * 2 ** 20;
    return 0;
  },
};
