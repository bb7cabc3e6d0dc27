import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BerthError } from '../../src/base/errors.js';
import { BerthConfigSchema } from '../../src/config/berth-config.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import type { Launcher, LauncherCapabilities } from '../../src/launch/launcher.js';
import { POOLED } from '../../src/plan/pool.js';
import { planRun, type RunPlan } from '../../src/plan/run-plan.js';
import { createPrestartPool, MAX_SHAPES } from '../../src/runs/prestart-pool.js';
import { createFakeLauncher, type FakeLauncher } from '../helpers/fake-launcher.js';
import { until } from '../helpers/until.js';

/**
 * The pre-started pool's bookkeeping (runs/prestart-pool.ts) on the fake launcher, told it can
 * attach mounts: learning shapes, refilling, falling back, forgetting. The real attach is
 * test/integration/prestart-pool.test.ts and late-mounts.test.ts.
 */
const log = pino({ level: 'silent' });
let dir: string;
let fake: FakeLauncher;
let attached: Array<{ id: string; workspace: string }>;
let attachFails: Error | undefined;
/** Containers attachMounts finds gone (their process ended unseen). */
let goneAtClaim: Set<string>;
let allGoneAtClaim: boolean;
/** The pool's listener for the engine's word that a container ended. */
let ended: ((id?: string) => void) | undefined;
let lateMounts: boolean;

function launcher(): Launcher {
  return {
    ...fake,
    capabilities: async (): Promise<LauncherCapabilities> => ({ ...(await fake.capabilities()), lateMounts: () => lateMounts }),
    async attachMounts(id, plan) {
      if (attachFails) throw attachFails;
      if (allGoneAtClaim || goneAtClaim.has(id)) return { gone: true as const, reason: 'its first process is gone' };
      attached.push({ id, workspace: plan.labels['berth.workspace'] as string });
      return undefined;
    },
    watchEnded(listener) {
      ended = listener;
      return () => (ended = undefined);
    },
  };
}

/** A plan of project `project` for `tenant`, its sources real directories and files. */
function plan(tenant: string, project = 'bot', meta: Record<string, unknown> = {}): RunPlan {
  const projectDir = join(dir, 'projects', project);
  fs.mkdirSync(join(projectDir, 'workspaces', `ws-${tenant}`), { recursive: true });
  fs.mkdirSync(join(dir, 'snap'), { recursive: true });
  fs.writeFileSync(join(dir, 'snap', 'AGENTS.md'), 'rules');
  return planRun({
    config: BerthConfigSchema.parse({}),
    project: {
      dir: projectDir,
      metadataFile: join(projectDir, 'metadata.json'),
      metadata: ProjectMetadataSchema.parse({ name: project, workspace_isolation: true, ...meta }),
    },
    workspace: { id: `ws-${tenant}`, dir: join(projectDir, 'workspaces', `ws-${tenant}`), isolated: meta.workspace_isolation !== false },
    protectedSnapshot: { dir: join(dir, 'snap'), entries: [{ path: 'AGENTS.md', kind: 'file' }] },
    run: { id: `run-${tenant}`, level: 'low', message: 'true', session: `s-${tenant}` },
    installation: 'inst1',
  });
}

const pool = (size = 2) => createPrestartPool({ launcher: launcher(), size: () => size, blankDir: join(dir, 'pool'), logger: log });
const live = () => fake.containers().filter((c) => c.state === 'running');
const settled = (check: () => boolean) => until(check, 'the pool to settle');

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-pool-')));
  fake = createFakeLauncher();
  attached = [];
  attachFails = undefined;
  goneAtClaim = new Set();
  allGoneAtClaim = false;
  ended = undefined;
  lateMounts = true;
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('the pre-started pool', () => {
  it("learns a shape from its first plan (that run starts its own), then keeps size() waiting, and the next tenant's claim takes one with its mounts attached", async () => {
    const p = pool(2);
    expect(await p.claim(plan('alice'), log)).toBeUndefined();
    await settled(() => p.size() === 2);
    const waiting = live().map((c) => c.id);
    expect(waiting).toHaveLength(2);
    // Started from the blank twin: the stand-ins under the pool's directory, no tenant in sight.
    for (const c of live()) {
      expect(c.plan.labels['berth.workspace']).toBe(POOLED);
      expect(c.plan.mounts.filter((m) => m.type === 'bind').every((m) => m.type === 'bind' && m.source.startsWith(join(dir, 'pool')))).toBe(
        true,
      );
    }
    const got = await p.claim(plan('bob'), log);
    expect(waiting).toContain(got?.containerId);
    expect(attached).toEqual([{ id: got?.containerId, workspace: 'ws-bob' }]);
    expect(p.isWaiting(got?.containerId as string)).toBe(false);
    // Refilled: two wait again, the claimed one is not among them.
    await settled(() => p.size() === 2);
    expect(live()).toHaveLength(3);
  });

  it('has one start under way at most while runs wait for a slot (theirs get the engine first), up to engineStarts once they have one', async () => {
    let queued = 3;
    const { launcher: held, most, open } = heldStarts();
    const p = createPrestartPool({
      launcher: held,
      size: () => 4,
      engineStarts: () => 3,
      blankDir: join(dir, 'pool'),
      logger: log,
      busy: () => queued > 0,
    });
    expect(await p.claim(plan('alice'), log)).toBeUndefined();
    await until(() => most() === 1, 'the first start');
    await new Promise((r) => setTimeout(r, 100));
    expect(most()).toBe(1);
    queued = 0;
    open();
    await settled(() => p.size() === 4);
    expect(most()).toBe(3);
  });

  it('a failed attach removes the container and the run starts its own; nothing is attached twice', async () => {
    const p = pool(1);
    await p.claim(plan('alice'), log);
    await settled(() => p.size() === 1);
    const [first] = live();
    attachFails = new BerthError('RUN_FAILED', 'berth-mount: the mount point /workspace/AGENTS.md: Too many levels of symbolic links');
    expect(await p.claim(plan('bob'), log)).toBeUndefined();
    expect(fake.containers().find((c) => c.id === first?.id)).toBeUndefined();
    expect(attached).toEqual([]);
  });

  it('a waiting container the engine says ended is dropped (removed, refilled); losing sight of the engine drops them all', async () => {
    const p = pool(2);
    await p.claim(plan('alice'), log);
    await settled(() => p.size() === 2);
    const [first, second] = live().map((c) => c.id);
    ended?.(first);
    expect(p.isWaiting(first as string)).toBe(false);
    expect(p.isWaiting(second as string)).toBe(true);
    await settled(() => p.size() === 2 && !fake.containers().some((c) => c.id === first));
    const before = live().map((c) => c.id);
    ended?.(undefined);
    expect(p.size()).toBe(0);
    await settled(() => p.size() === 2 && !fake.containers().some((c) => before.includes(c.id)));
    // An id the pool does not hold changes nothing.
    ended?.('not-a-pool-container');
    expect(p.size()).toBe(2);
    await p.close();
    expect(ended).toBeUndefined();
  });

  it('a claim whose container is gone (its process ended unseen) takes the next one; with none left, the run starts its own', async () => {
    const p = pool(2);
    await p.claim(plan('alice'), log);
    await settled(() => p.size() === 2);
    const [first, second] = live().map((c) => c.id);
    goneAtClaim.add(first as string);
    const got = await p.claim(plan('bob'), log);
    expect(got?.containerId).toBe(second);
    expect(attached).toEqual([{ id: second, workspace: 'ws-bob' }]);
    expect(fake.containers().some((c) => c.id === first)).toBe(false);
    await settled(() => p.size() === 2);
    allGoneAtClaim = true;
    const none = await p.claim(plan('carol'), log);
    expect(none).toBeUndefined();
    expect(attached.map((a) => a.workspace)).toEqual(['ws-bob']);
  });

  it('without late mounts nor adopt, for shared mode, or with size 0: no claim, no container', async () => {
    lateMounts = false;
    const p = pool(2);
    expect(await p.claim(plan('alice'), log)).toBeUndefined();
    lateMounts = true;
    expect(await p.claim(plan('carol', 'shared', { workspace_isolation: false }), log)).toBeUndefined();
    expect(await pool(0).claim(plan('dave'), log)).toBeUndefined();
    await new Promise((r) => setTimeout(r, 50));
    expect(fake.containers()).toEqual([]);
  });

  it('another shape (another project, other limits) gets its own containers; past MAX_SHAPES the least recently claimed lets its go', async () => {
    const p = pool(1);
    for (let i = 0; i <= MAX_SHAPES; i++) {
      await p.claim(plan('alice', `p${i}`), log);
      await settled(() => p.size() === Math.min(i + 1, MAX_SHAPES));
    }
    const projects = new Set(live().map((c) => c.plan.labels['berth.project']));
    expect(projects.size).toBe(MAX_SHAPES);
    expect(projects.has('p0')).toBe(false);
  });

  it("a deleted project's shapes are forgotten and their containers removed; close() removes the rest and refills stop", async () => {
    const p = pool(1);
    await p.claim(plan('alice', 'gone'), log);
    await p.claim(plan('alice', 'kept'), log);
    await settled(() => p.size() === 2);
    await p.forgetProject('gone');
    expect(live().map((c) => c.plan.labels['berth.project'])).toEqual(['kept']);
    expect(await p.close()).toBe(1);
    expect(live()).toEqual([]);
    expect(await p.claim(plan('bob', 'kept'), log)).toBeUndefined();
    await new Promise((r) => setTimeout(r, 50));
    expect(live()).toEqual([]);
  });

  it('grows while new people arrive faster than one start replaces a claim, starting engineStarts at once, and shrinks back once they stop', async () => {
    const { launcher: held, most, open } = heldStarts(100);
    const p = createPrestartPool({
      launcher: held,
      size: () => 2,
      max: () => 10,
      engineStarts: () => 3,
      windows: { shortMs: 400, longMs: 800 },
      blankDir: join(dir, 'pool'),
      logger: log,
    });
    await p.claim(plan('alice'), log);
    open();
    await settled(() => p.size() === 2);
    // Eight new people at once: more arrive in the short window than two starts' worth.
    const claimed = (await Promise.all(Array.from({ length: 8 }, (_, i) => p.claim(plan(`p${i}`), log)))).filter(Boolean);
    // Two waited; claims past them took starts under way (one each); the rest started their own.
    expect(claimed.length).toBeGreaterThan(2);
    expect(claimed.length).toBeLessThan(8);
    await settled(() => p.size() > 2);
    expect(most()).toBeLessThanOrEqual(3);
    // Nobody else comes: past the long window only size() wait, the rest removed (the claimed ones stay: they are warm).
    await settled(() => p.size() === 2 && live().length === claimed.length + 2);
  });

  it('a claim that finds none waiting takes the start already under way for its shape; one claim per start, the rest start their own', async () => {
    const { launcher: held, open } = heldStarts();
    const p = createPrestartPool({ launcher: held, size: () => 1, blankDir: join(dir, 'pool'), logger: log });
    await p.claim(plan('alice'), log);
    await until(() => fake.containers().length === 0 && true, 'nothing started yet');
    const bob = p.claim(plan('bob'), log);
    const carol = await p.claim(plan('carol'), log);
    expect(carol).toBeUndefined(); // the one start under way is bob's
    open();
    const got = await bob;
    expect(got?.containerId).toBeDefined();
    expect(attached).toEqual([{ id: got?.containerId, workspace: 'ws-bob' }]);
  });
});

/**
 * Adopt (gVisor): the fake launcher told its containers keep a renamed directory; the directories
 * are real, so what a claim does to them on the host is checked here (what a sandbox then sees is
 * test/integration/prestart-pool.test.ts).
 */
describe('the pre-started pool, adopt (a sandbox that sees no late mount)', () => {
  let claimedBy: Array<{ id: string; workspace: string }>;
  let claimGone: boolean;
  const adoptDir = () => join(dir, '.berth', 'adopt');
  function adoptLauncher(): Launcher {
    return {
      ...launcher(),
      capabilities: async (): Promise<LauncherCapabilities> => ({
        ...(await fake.capabilities()),
        lateMounts: () => false,
        adoptBinds: () => true,
      }),
      async claimStarted(id, plan) {
        if (claimGone) return { gone: true as const, reason: 'it was removed' };
        claimedBy.push({ id, workspace: plan.labels['berth.workspace'] as string });
        return undefined;
      },
    };
  }
  const adoptPool = (size = 1) =>
    createPrestartPool({ launcher: adoptLauncher(), size: () => size, blankDir: join(dir, 'pool'), adoptDir: adoptDir(), logger: log });
  /** A new person's plan as a run makes it: workspace (a seed, the protected path's mount point), agent home, run directory. */
  function personPlan(tenant: string): { plan: RunPlan; ws: string; home: string; runDir: string } {
    const projectDir = join(dir, 'projects', 'bot');
    const ws = join(projectDir, 'workspaces', `ws-${tenant}`);
    const home = join(dir, '.berth', 'projects', 'bot', 'homes', `s-${tenant}`);
    const runDir = join(dir, '.berth', 'sockets', `run-${tenant}`);
    for (const d of [ws, home, runDir, join(dir, 'snap')]) fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(join(ws, 'AGENTS.md'), `seed for ${tenant}`);
    fs.writeFileSync(join(home, '.decoy'), 'decoy');
    fs.writeFileSync(join(dir, 'snap', 'AGENTS.md'), 'rules');
    const plan = planRun({
      config: BerthConfigSchema.parse({}),
      project: {
        dir: projectDir,
        metadataFile: join(projectDir, 'metadata.json'),
        metadata: ProjectMetadataSchema.parse({ name: 'bot', workspace_isolation: true, protected_paths: ['AGENTS.md'] }),
      },
      workspace: { id: `ws-${tenant}`, dir: ws, isolated: true },
      protectedSnapshot: { dir: join(dir, 'snap'), entries: [{ path: 'AGENTS.md', kind: 'file' }] },
      run: { id: `run-${tenant}`, level: 'low', message: 'true', session: `s-${tenant}` },
      home: { dir: home },
      runDir,
      installation: 'inst1',
    });
    return { plan, ws, home, runDir };
  }
  const bindOf = (plan: RunPlan, target: string) => plan.mounts.find((m) => m.type === 'bind' && m.target === target) as { source: string };
  const NEW = { isNew: true, ownFilesystem: false };
  const KNOWN = { isNew: false, ownFilesystem: false };

  beforeEach(() => {
    claimedBy = [];
    claimGone = false;
  });

  it("learns its shape from any run; each container starts on fresh directories of its own; a new person's claim renames them to theirs, their entries inside", async () => {
    const p = adoptPool(1);
    expect(await p.claim(personPlan('alice').plan, log, KNOWN)).toBeUndefined();
    await settled(() => p.size() === 1);
    const [waiting] = live();
    const fresh = bindOf(waiting?.plan as RunPlan, '/workspace').source;
    expect(fresh.startsWith(`${adoptDir()}/`)).toBe(true);
    expect(bindOf(waiting?.plan as RunPlan, '/workspace/AGENTS.md').source).toBe(join(dir, 'snap', 'AGENTS.md')); // project-wide: the plan's own
    expect(fs.readdirSync(fresh)).toEqual(['AGENTS.md']);
    const freshInode = fs.statSync(fresh).ino;
    const bob = personPlan('bob');
    const got = await p.claim(bob.plan, log, NEW);
    expect(got?.containerId).toBe(waiting?.id);
    await until(() => claimedBy.length > 0, 'the claim written');
    expect(claimedBy).toEqual([{ id: waiting?.id, workspace: 'ws-bob' }]);
    expect(fs.statSync(bob.ws).ino).toBe(freshInode);
    expect(fs.readFileSync(join(bob.ws, 'AGENTS.md'), 'utf8')).toBe('seed for bob');
    expect(fs.readdirSync(bob.home)).toEqual(['.decoy']);
    expect(fs.existsSync(join(fresh, '..'))).toBe(false); // the container's own directory is gone: never handed out again
    await settled(() => p.size() === 1);
    expect(bindOf(live().find((c) => c.id !== waiting?.id)?.plan as RunPlan, '/workspace').source).not.toBe(fresh);
  });

  it('a person who is not new never claims (their directories stay as they are); nor one whose workspace is a filesystem of its own', async () => {
    const p = adoptPool(1);
    await p.claim(personPlan('alice').plan, log, KNOWN);
    await settled(() => p.size() === 1);
    const carol = personPlan('carol');
    const inode = fs.statSync(carol.ws).ino;
    expect(await p.claim(carol.plan, log, KNOWN)).toBeUndefined();
    expect(await p.claim(carol.plan, log, undefined)).toBeUndefined();
    expect(await p.claim(carol.plan, log, { isNew: true, ownFilesystem: true })).toBeUndefined();
    expect(fs.statSync(carol.ws).ino).toBe(inode);
    expect(claimedBy).toEqual([]);
    expect(p.size()).toBe(1);
  });

  it('a claim that cannot move the entries puts them back, removes the container and its directories; the run starts its own', async () => {
    const p = adoptPool(1);
    await p.claim(personPlan('alice').plan, log, KNOWN);
    await settled(() => p.size() === 1);
    const [waiting] = live();
    const root = join(bindOf(waiting?.plan as RunPlan, '/workspace').source, '..');
    const dave = personPlan('dave');
    fs.rmSync(join(dave.ws, 'AGENTS.md'));
    fs.mkdirSync(join(dave.ws, 'AGENTS.md')); // a directory where the mount point is a file: refused
    fs.writeFileSync(join(dave.ws, 'AGENTS.md', 'kept'), 'kept');
    fs.writeFileSync(join(dave.ws, 'notes.txt'), 'notes');
    const inode = fs.statSync(dave.ws).ino;
    expect(await p.claim(dave.plan, log, NEW)).toBeUndefined();
    expect(fs.statSync(dave.ws).ino).toBe(inode);
    expect(fs.readdirSync(dave.ws).sort()).toEqual(['AGENTS.md', 'notes.txt']);
    expect(fs.readFileSync(join(dave.ws, 'AGENTS.md', 'kept'), 'utf8')).toBe('kept');
    expect(fs.readdirSync(dave.home)).toEqual(['.decoy']);
    expect(fake.containers().some((c) => c.id === waiting?.id)).toBe(false);
    expect(fs.existsSync(root)).toBe(false);
  });

  it("the claim is written for other processes beside the message's exec: a sandbox gone meanwhile leaves the person's directories whole (the run's exec finds it gone and starts its own there); removed ones (close) take their directories along", async () => {
    const p = adoptPool(2);
    await p.claim(personPlan('alice').plan, log, KNOWN);
    await settled(() => p.size() === 2);
    claimGone = true;
    const erin = personPlan('erin');
    const got = await p.claim(erin.plan, log, NEW);
    expect(got?.containerId).toBeDefined();
    expect(fs.readFileSync(join(erin.ws, 'AGENTS.md'), 'utf8')).toBe('seed for erin');
    expect(fs.readdirSync(erin.home)).toEqual(['.decoy']);
    claimGone = false;
    const frank = personPlan('frank');
    await p.claim(frank.plan, log, NEW);
    await until(() => claimedBy.some((c) => c.workspace === 'ws-frank'), 'the claim written');
    await settled(() => p.size() === 2);
    const own = fs.readdirSync(adoptDir()).map((o) => join(adoptDir(), o));
    expect(own.flatMap((o) => fs.readdirSync(o))).toHaveLength(2);
    expect(await p.close()).toBe(2);
    expect(own.flatMap((o) => fs.readdirSync(o))).toEqual([]);
  });
});

/** The fake launcher with its starts held until `open()`, then taking `ms` each; `most()`: the most starts under way at once. */
function heldStarts(ms = 0) {
  const base = launcher();
  let release!: () => void;
  let gate: Promise<void> | undefined = new Promise<void>((r) => (release = r));
  let now = 0;
  let peak = 0;
  return {
    launcher: {
      ...base,
      async startIdle(...args: Parameters<Launcher['startIdle']>) {
        peak = Math.max(peak, ++now);
        try {
          await gate;
          await new Promise((r) => setTimeout(r, ms));
          return await base.startIdle(...args);
        } finally {
          now--;
        }
      },
    } satisfies Launcher,
    most: () => peak,
    open: () => {
      gate = undefined;
      release();
    },
  };
}
