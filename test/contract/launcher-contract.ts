import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  isGone,
  type ContainerGone,
  type ExecResult,
  type Launcher,
  type ManagedContainer,
  type RunOptions,
} from '../../src/launch/launcher.js';
import { commandNotFound, CONTAINER_LOST, execVerdict, STOPPED_EXIT, WARM_MEMORY_SLACK } from '../../src/launch/lifecycle.js';
import { LABELS, type ContainerQuery } from '../../src/plan/labels.js';
import { WORKSPACE_MOUNT, type RunPlan } from '../../src/plan/run-plan.js';
import { adoptPlanOf, blankPlanOf, freshLayoutOf, personBindsOf, POOLED } from '../../src/plan/pool.js';
import { adoptFreshDirs, makeFreshDirs } from '../../src/runs/fresh-dirs.js';
import { CONTRACT_OWNER, PROTECTED_TEXT, SECRET_TEXT, type ContractPlanOptions } from './contract-plan.js';

/**
 * What every launcher berth ships must do with a RunPlan (src/launch/launcher.ts), checked the
 * same way for each: isolation, protected paths, limits, warm reuse and its leftovers, labels,
 * capabilities. Plans come from contract-plan.ts (planRun on a temporary home); each case says
 * its command through `cmd`, so a real engine runs real commands and the fake its programs.
 */

/** Each returns the argv that does it in the launcher's images. */
export interface ContractCommands {
  cat(path: string): string[];
  /** Write `text` as is (no newline added) to `path`. */
  write(path: string, text: string): string[];
  sleep(seconds: number): string[];
  /** Print "berth-flood\n" without end. */
  flood(): string[];
  /** Exit 0, leaving a process running in the container. */
  background(): string[];
  /** Exit 0, leaving an IPC object in the container's IPC namespace. */
  ipc(): string[];
  /** Exit 0, leaving `mib` MiB held in memory (a file in /tmp, a tmpfs). */
  hold(mib: number): string[];
  exit(code: number): string[];
}

export interface LauncherUnderTest {
  launcher: Launcher;
  /** A plan from contract-plan.ts's home (its layout: tenants a and b, a's secret.txt, a protected AGENTS.md). */
  plan(opts: ContractPlanOptions): RunPlan;
  /** A directory of the test's for blank stand-ins. */
  blankDir: string;
  cleanup(): Promise<void>;
}

export interface ContractOptions {
  /** The runtime the plans name. */
  runtime: string;
  /** Whether the launcher keeps warm containers for it (its capabilities are held to this). */
  warm: boolean;
  /** Whether it attaches mounts to a started container for it (the pre-started pool; held the same way). */
  lateMounts: boolean;
  /** Without late mounts: whether a started container keeps serving a bind's directory berth renames (the pool's adopt). */
  adopt?: boolean;
  cmd: ContractCommands;
  /**
   * Whether a run's /workspace is the plan's host directory (Docker). A cluster's is a volume
   * berth cannot reach from the host: the cases then put files there with a run, and judge by runs.
   */
  hostWorkspaces?: boolean;
}

const FLOOD_LINE = 'berth-flood\n';
/**
 * A sleep that outlasts every test's timeout (and the plan's own 30 s one): a run of it that
 * returns at all was stopped, and its outcome (timedOut, truncated, 137) says by what. No
 * wall-clock bound: a busy host is slow to stop a container, never wrong about why.
 */
const FOREVER_SECONDS = 600;

export function describeLauncherContract(name: string, make: () => Promise<LauncherUnderTest>, opts: ContractOptions): void {
  const { cmd, runtime } = opts;
  const hostWorkspaces = opts.hostWorkspaces ?? true;

  describe(`launcher contract: ${name}, runtime ${runtime}`, () => {
    let s: LauncherUnderTest | undefined;
    let installation = '';
    const subject = () => {
      if (!s) throw new Error('the launcher under test was not made');
      return s;
    };
    const launcher = () => subject().launcher;
    const plan = (o: ContractPlanOptions) => subject().plan(o);
    const run = (o: ContractPlanOptions, ro?: RunOptions) => launcher().run(plan(o), ro);
    const list = (q: Partial<ContainerQuery> = {}) => launcher().listManaged({ installation, ...q });
    const removeAll = async () => void (s && installation && (await s.launcher.removeManaged({ installation })));

    beforeAll(async () => {
      s = await make();
      installation = plan({ argv: ['true'] }).labels[LABELS.installation] ?? '';
      expect(installation).not.toBe('');
    });
    // Whatever a case left (a container it did not remove, a run it did not end).
    afterEach(removeAll);
    afterAll(async () => {
      await removeAll();
      await s?.cleanup();
    });

    describe('isolation', () => {
      it("a run's /workspace is its own tenant's planned workspace", async () => {
        const p = plan({ tenant: 'b', argv: cmd.cat(`${WORKSPACE_MOUNT}/whoami.txt`) });
        expect(bindAt(p, WORKSPACE_MOUNT).source).toMatch(/\/workspaces\/b$/);
        if (!hostWorkspaces) {
          for (const tenant of ['a', 'b'] as const)
            expect(await run({ tenant, argv: cmd.write(`${WORKSPACE_MOUNT}/whoami.txt`, `tenant ${tenant}\n`) })).toMatchObject({
              exitCode: 0,
            });
        }
        expect(await launcher().run(p)).toMatchObject({ exitCode: 0, stdout: 'tenant b\n' });
        expect(await run({ tenant: 'a', argv: cmd.cat(`${WORKSPACE_MOUNT}/whoami.txt`) })).toMatchObject({
          exitCode: 0,
          stdout: 'tenant a\n',
        });
      });

      it("tenant A's file is not readable by a run planned for tenant B: not at /workspace, not at A's host path", async () => {
        const hostSecret = join(bindAt(plan({ tenant: 'a', argv: ['true'] }), WORKSPACE_MOUNT).source, 'secret.txt');
        expect(fs.readFileSync(hostSecret, 'utf8')).toBe(SECRET_TEXT);
        if (!hostWorkspaces)
          expect(await run({ tenant: 'a', argv: cmd.write(`${WORKSPACE_MOUNT}/secret.txt`, SECRET_TEXT) })).toMatchObject({ exitCode: 0 });
        expect(await run({ tenant: 'a', argv: cmd.cat(`${WORKSPACE_MOUNT}/secret.txt`) })).toMatchObject({
          exitCode: 0,
          stdout: SECRET_TEXT,
        });
        for (const path of [`${WORKSPACE_MOUNT}/secret.txt`, hostSecret]) {
          const r = await run({ tenant: 'b', argv: cmd.cat(path) });
          expect(r.exitCode, path).not.toBe(0);
          expect(r.stdout + r.stderr, path).not.toContain(SECRET_TEXT.trim());
        }
      });
    });

    describe('protected paths', () => {
      it("a read-only bind refuses writes: the protected file stays berth's copy", async () => {
        const p = plan({ argv: cmd.write(`${WORKSPACE_MOUNT}/AGENTS.md`, 'tampered') });
        const snapshot = bindAt(p, `${WORKSPACE_MOUNT}/AGENTS.md`);
        expect(snapshot.readOnly).toBe(true);
        const r = await launcher().run(p);
        expect(r.exitCode).not.toBe(0);
        expect(r.stderr).toMatch(/Read-only file system/);
        expect(fs.readFileSync(snapshot.source, 'utf8')).toBe(PROTECTED_TEXT);
        expect(await run({ argv: cmd.cat(`${WORKSPACE_MOUNT}/AGENTS.md`) })).toMatchObject({ exitCode: 0, stdout: PROTECTED_TEXT });
      });

      it('the root filesystem refuses writes, even from the owner of /; the workspace takes them', async () => {
        expect((await run({ argv: cmd.write('/berth-rootfs-probe', 'x') })).exitCode).not.toBe(0);
        // As root (no capabilities, but the owner of /): no file mode refuses it, only the read-only root.
        const asOwner = await launcher().run({ ...plan({ argv: cmd.write('/berth-rootfs-probe', 'x') }), user: '0:0' });
        expect(asOwner.exitCode).not.toBe(0);
        expect(asOwner.stderr).toMatch(/Read-only file system/);
        const p = plan({ argv: cmd.write(`${WORKSPACE_MOUNT}/written.txt`, 'by the run') });
        const host = join(bindAt(p, WORKSPACE_MOUNT).source, 'written.txt');
        fs.rmSync(host, { force: true });
        expect(await launcher().run(p)).toMatchObject({ exitCode: 0, stderr: '' });
        if (hostWorkspaces) {
          expect(fs.readFileSync(host, 'utf8')).toBe('by the run');
          fs.rmSync(host);
        } else {
          expect(await run({ argv: cmd.cat(`${WORKSPACE_MOUNT}/written.txt`) })).toMatchObject({ exitCode: 0, stdout: 'by the run' });
        }
      });
    });

    describe('limits', () => {
      it("the exit status is the command's; onCreated and onStarted are told the container that ran it (its receipt is read then)", async () => {
        const told: string[] = [];
        const r = await run(
          { argv: cmd.exit(3) },
          { onCreated: (id) => told.push(`created ${id}`), onStarted: (id) => void told.push(`started ${id}`) },
        );
        expect(r).toMatchObject({ exitCode: 3, truncated: false, timedOut: false });
        expect(told).toEqual([`created ${r.containerId}`, `started ${r.containerId}`]);
      });

      it('output past the cap: truncated, stopped (137), cut at the cap; what onOutput saw is what was kept', async () => {
        const cap = 64 * 1024;
        let seen = 0;
        const r = await run({ argv: cmd.flood(), limits: { output_bytes: cap } }, { onOutput: (_s, chunk) => (seen += chunk.length) });
        // The flood never ends by itself: not timed out means the cap stopped it, not the planned 30 s.
        expect(r).toMatchObject({ truncated: true, timedOut: false, exitCode: STOPPED_EXIT });
        expect(Buffer.byteLength(r.stdout) + Buffer.byteLength(r.stderr)).toBe(cap);
        expect(seen).toBe(cap);
        expect(r.stdout.startsWith(FLOOD_LINE)).toBe(true);
      });

      it('past the timeout: timedOut, stopped (137)', async () => {
        const t0 = Date.now();
        const r = await run({ argv: cmd.sleep(FOREVER_SECONDS), timeoutMs: 1000 });
        expect(r).toMatchObject({ timedOut: true, truncated: false, exitCode: STOPPED_EXIT });
        expect(Date.now() - t0).toBeGreaterThanOrEqual(900); // not before its timeout (a floor holds on a busy host)
      });

      it('an abort stops it (137), neither timed out nor truncated', async () => {
        const ac = new AbortController();
        const r = await run(
          { argv: cmd.sleep(FOREVER_SECONDS) },
          { signal: ac.signal, onCreated: () => void setTimeout(() => ac.abort(), 200) },
        );
        // Not timed out: the abort stopped it, not the planned 30 s (its sleep would outlast the test).
        expect(r).toMatchObject({ exitCode: STOPPED_EXIT, timedOut: false, truncated: false });
      });

      it("a command missing from the image answers 127 with lifecycle's message", async () => {
        const p = plan({ argv: ['berth-no-such-tool', 'x'] });
        const r = await launcher().run(p);
        expect({ exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr }).toEqual(commandNotFound(p.argv, p.image));
        expect(await list()).toEqual([]); // not left behind either
      });
    });

    describe('warm containers and leftovers', () => {
      /** A warm container of tenant a; each exec gets its own plan, as each message does. */
      async function idle(): Promise<string> {
        const p = plan({ argv: ['true'] });
        const created: string[] = [];
        const { containerId } = await launcher().startIdle(p, p.keepAlive, { onCreated: (id) => created.push(id) });
        expect(created).toEqual([containerId]);
        return containerId;
      }
      async function exec(id: string, argv: string[], o: Omit<ContractPlanOptions, 'argv'> = {}, ro?: RunOptions): Promise<ExecResult> {
        const r = await launcher().execIn(id, plan({ ...o, argv }), argv, ro);
        if (isGone(r)) throw new Error(`the warm container is gone: ${r.reason}`);
        return r;
      }
      const exists = async (id: string) => (await list()).some((c) => c.id === id);

      if (!opts.warm) {
        it(`capabilities say runtime ${runtime} has no warm containers`, async () => {
          expect((await launcher().capabilities()).warm(runtime)).toBe(false);
        });

        it('an exec it cannot look into is never judged clean', async () => {
          const r = await exec(await idle(), cmd.exit(0));
          expect(r.exitCode).toBe(0);
          expect(execVerdict(r)).toMatch(/cannot be (read|checked) by this launcher/);
        });
        return;
      }

      it(`capabilities say runtime ${runtime} keeps warm containers`, async () => {
        expect((await launcher().capabilities()).warm(runtime)).toBe(true);
      });

      it('two execs share the container: what the first left in /tmp the second reads; both clean', async () => {
        const id = await idle();
        const started: string[] = [];
        const first = await exec(id, cmd.write('/tmp/state', 'kept'), {}, { onStarted: (c) => void started.push(c) });
        expect(started).toEqual([id]);
        expect(first).toMatchObject({ containerId: id, exitCode: 0 });
        expect(execVerdict(first)).toBeUndefined();
        const second = await exec(id, cmd.cat('/tmp/state'));
        expect(second).toMatchObject({ exitCode: 0, stdout: 'kept' });
        expect(execVerdict(second)).toBeUndefined();
        // A container of its own does not see it: /tmp is the container's.
        expect((await run({ argv: cmd.cat('/tmp/state') })).exitCode).not.toBe(0);
      });

      it('a command missing from the image answers 127 in an exec too, and leaves it clean', async () => {
        const id = await idle();
        const argv = ['berth-no-such-tool', 'x'];
        const r = await exec(id, argv);
        expect({ exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr }).toEqual(commandNotFound(argv, plan({ argv }).image));
        expect(execVerdict(r)).toBeUndefined();
      });

      it('an exec that leaves a process running is not clean; the container is left for the caller to remove', async () => {
        const id = await idle();
        const r = await exec(id, cmd.background());
        expect(r).toMatchObject({ exitCode: 0, timedOut: false, truncated: false });
        expect(r.stopped).toBeUndefined();
        expect(execVerdict(r)).toMatch(/^it left processes running: /);
        expect(await exists(id)).toBe(true);
        expect(await launcher().removeContainers([id])).toBe(1);
        expect(await exists(id)).toBe(false);
      });

      it('an exec that leaves an IPC object is not clean', async () => {
        const id = await idle();
        const r = await exec(id, cmd.ipc());
        expect(r.exitCode).toBe(0);
        expect(execVerdict(r)).toMatch(/^it left IPC objects: /);
      });

      it('an exec that leaves memory held (48 MiB in /tmp, past the slack) is not clean', async () => {
        const id = await idle();
        const r = await exec(id, cmd.hold(48));
        expect(r.exitCode).toBe(0);
        expect(execVerdict(r)).toMatch(/^it holds \d+ MiB more than when idle/);
        expect(r.leftovers.memoryGrowth).toBeGreaterThan(WARM_MEMORY_SLACK);
      });

      it('a timed-out exec is stopped (137) and its container removed; execIn then answers ContainerGone', async () => {
        const id = await idle();
        const r = await exec(id, cmd.sleep(FOREVER_SECONDS), { timeoutMs: 1000 });
        expect(r).toMatchObject({ timedOut: true, truncated: false, exitCode: STOPPED_EXIT, stopped: 'timed out' });
        expect(execVerdict(r)).toBe('timed out');
        expect(await exists(id)).toBe(false);
        const again = await launcher().execIn(id, plan({ argv: ['true'] }), cmd.exit(0));
        expect(isGone(again)).toBe(true);
        expect((again as ContainerGone).reason).not.toBe('');
      });

      it('an exec past the output cap is stopped, cut at the cap, and its container removed', async () => {
        const id = await idle();
        const cap = 64 * 1024;
        const r = await exec(id, cmd.flood(), { limits: { output_bytes: cap } });
        expect(r).toMatchObject({ truncated: true, timedOut: false, exitCode: STOPPED_EXIT, stopped: 'output past the cap' });
        expect(Buffer.byteLength(r.stdout) + Buffer.byteLength(r.stderr)).toBe(cap);
        expect(r.stdout.startsWith(FLOOD_LINE)).toBe(true);
        expect(await exists(id)).toBe(false);
      });

      it('an aborted exec is stopped (137) and its container removed', async () => {
        const id = await idle();
        const ac = new AbortController();
        const r = await exec(id, cmd.sleep(30), {}, { signal: ac.signal, onCreated: () => void setTimeout(() => ac.abort(), 200) });
        expect(r).toMatchObject({ exitCode: STOPPED_EXIT, timedOut: false, truncated: false, stopped: 'aborted' });
        expect(await exists(id)).toBe(false);
      });

      it('an exec whose container is removed under it (by hand) ends 137, says it was lost, and is not taken for a timeout', async () => {
        const id = await idle();
        const r = await exec(
          id,
          cmd.sleep(30),
          { timeoutMs: 20_000 },
          { onCreated: () => void setTimeout(() => void launcher().removeContainers([id]), 300) },
        );
        expect(r).toMatchObject({ exitCode: STOPPED_EXIT, timedOut: false, truncated: false, stopped: CONTAINER_LOST });
        expect(r.lost).toMatch(/\S/);
        expect(execVerdict(r)).toBe(CONTAINER_LOST);
      });

      it('execIn into a removed container answers ContainerGone, never throws', async () => {
        const id = await idle();
        expect(await launcher().removeContainers([id])).toBe(1);
        const r = await launcher().execIn(id, plan({ argv: ['true'] }), cmd.exit(0));
        expect(r).toMatchObject({ gone: true });
      });
    });

    describe('labels and recovery', () => {
      it('listManaged finds exactly the labelled containers; removeManaged and removeContainers remove them, and their runs end (137)', async () => {
        const specs = [
          { project: 'p1', tenant: 'a', run: 'lbl-1' },
          { project: 'p1', tenant: 'b', run: 'lbl-2' },
          { project: 'p2', tenant: 'a', run: 'lbl-3' },
        ] as const;
        const ids = new Map<string, string>();
        const runs = specs.map((sp) => run({ ...sp, argv: cmd.sleep(30) }, { onCreated: (id) => ids.set(sp.run, id) }));
        // Running, not only created: removing a container before its start fails the start instead.
        await until(async () => (await list()).filter((c) => c.state === 'running').length === specs.length);

        const all = await list();
        expect(all.map((c) => c.id).sort()).toEqual([...ids.values()].sort());
        for (const sp of specs) {
          expect(all.find((c) => c.run === sp.run)).toEqual<ManagedContainer>({
            id: ids.get(sp.run)!,
            project: sp.project,
            workspace: sp.tenant,
            run: sp.run,
            state: 'running',
            reach: 'workspace',
            owner: CONTRACT_OWNER,
          });
        }
        expect((await list({ project: 'p1' })).map((c) => c.run).sort()).toEqual(['lbl-1', 'lbl-2']);
        expect((await list({ run: 'lbl-3' })).map((c) => c.id)).toEqual([ids.get('lbl-3')]);
        expect(await launcher().listManaged({ installation: `${installation}-other` })).toEqual([]);

        expect(await launcher().removeManaged({ installation, project: 'p1' })).toBe(2);
        expect((await Promise.all(runs.slice(0, 2))).map((r) => r.exitCode)).toEqual([STOPPED_EXIT, STOPPED_EXIT]);
        expect((await list()).map((c) => c.id)).toEqual([ids.get('lbl-3')]);

        expect(await launcher().removeContainers([ids.get('lbl-3')!])).toBe(1);
        expect((await runs[2]!).exitCode).toBe(STOPPED_EXIT);
        expect(await list()).toEqual([]);
      });
    });

    describe('late mounts (the pre-started pool)', () => {
      const launcher = () => subject().launcher;
      /** A container started from the plan's blank twin (plan/pool.ts): stand-ins of each source's kind. */
      async function blankFor(p: RunPlan): Promise<string> {
        const dir = fs.mkdtempSync(join(subject().blankDir, 'blank-'));
        const blank = blankPlanOf(p, (i, m) => {
          const path = join(dir, `b${i}`);
          if (m.type === 'bind' && fs.statSync(m.source).isDirectory()) fs.mkdirSync(path);
          else fs.writeFileSync(path, '');
          return path;
        });
        return (await launcher().startIdle(blank, blank.keepAlive)).containerId;
      }

      if (!opts.lateMounts) {
        it(`capabilities say runtime ${runtime} has no late mounts, and attachMounts refuses (LAUNCHER_UNSUPPORTED)`, async () => {
          expect((await launcher().capabilities()).lateMounts(runtime)).toBe(false);
          const p = plan({ argv: ['true'] });
          const { containerId } = await launcher().startIdle(p, p.keepAlive);
          await expect(launcher().attachMounts(containerId, p)).rejects.toMatchObject({ code: 'LAUNCHER_UNSUPPORTED' });
        });
        it(`capabilities say whether runtime ${runtime} keeps a renamed bind directory (adopt: ${opts.adopt === true})`, async () => {
          expect((await launcher().capabilities()).adoptBinds?.(runtime) === true).toBe(opts.adopt === true);
        });
        if (opts.adopt)
          it(`adopt: a container started on a fresh directory of berth's shows the tenant's files once it is renamed over theirs, protected files read-only, and is listed as that tenant's; one it removed is no longer its to claim`, async () => {
            const p = plan({ argv: ['true'], tenant: 'a', project: 'adopt' });
            const fresh = makeFreshDirs(fs.mkdtempSync(join(subject().blankDir, 'adopt-')), freshLayoutOf(p));
            const blank = blankPlanOf(p, (_, m) => (m.type === 'bind' && m.target !== WORKSPACE_MOUNT ? m.source : ''));
            const { containerId: id } = await launcher().startIdle(adoptPlanOf(blank, fresh.byTarget), blank.keepAlive);
            expect((await list()).find((c) => c.id === id)?.workspace).toBe(POOLED);
            adoptFreshDirs(fresh, personBindsOf(p));
            expect(await launcher().claimStarted?.(id, p)).toBeUndefined();
            const exec = async (argv: string[]) => {
              const r = await launcher().execIn(id, p, argv);
              if (isGone(r)) throw new Error(`gone: ${r.reason}`);
              return r;
            };
            expect((await exec(cmd.cat(`${WORKSPACE_MOUNT}/secret.txt`))).stdout).toBe(SECRET_TEXT);
            expect((await exec(cmd.cat(`${WORKSPACE_MOUNT}/AGENTS.md`))).stdout).toBe(PROTECTED_TEXT);
            expect((await exec(cmd.write(`${WORKSPACE_MOUNT}/AGENTS.md`, 'changed'))).exitCode).not.toBe(0);
            expect((await exec(cmd.write(`${WORKSPACE_MOUNT}/new.txt`, 'new'))).exitCode).toBe(0);
            expect(fs.readFileSync(join(p.prepare.rwRoot, 'new.txt'), 'utf8')).toBe('new');
            expect((await list()).find((c) => c.id === id)?.workspace).toBe(p.labels[LABELS.workspace]);
            await launcher().removeContainers([id]);
            await expect(launcher().claimStarted?.(id, p)).rejects.toMatchObject({ code: 'LAUNCHER_UNSUPPORTED' });
          });
        return;
      }

      it(`capabilities say runtime ${runtime} takes late mounts; a blank container then shows the tenant's workspace alone, protected files read-only, and is listed as that tenant's`, async () => {
        expect((await launcher().capabilities()).lateMounts(runtime)).toBe(true);
        const p = plan({ argv: ['true'], tenant: 'a' });
        const id = await blankFor(p);
        expect((await list()).find((c) => c.id === id)?.workspace).toBe(POOLED);
        await launcher().attachMounts(id, p);
        const exec = async (argv: string[]) => {
          const r = await launcher().execIn(id, p, argv);
          if (isGone(r)) throw new Error(`gone: ${r.reason}`);
          return r;
        };
        expect((await exec(cmd.cat(`${WORKSPACE_MOUNT}/secret.txt`))).stdout).toBe(SECRET_TEXT);
        expect((await exec(cmd.cat(`${WORKSPACE_MOUNT}/AGENTS.md`))).stdout).toBe(PROTECTED_TEXT);
        expect((await exec(cmd.write(`${WORKSPACE_MOUNT}/AGENTS.md`, 'changed'))).exitCode).not.toBe(0);
        expect((await list()).find((c) => c.id === id)?.workspace).toBe(p.labels[LABELS.workspace]);
      });
    });

    describe('capabilities and info', () => {
      it("the plan's runtime is among the capabilities' runtimes, and info lists it", async () => {
        const caps = await launcher().capabilities();
        const p = plan({ argv: ['true'] });
        expect(p.runtime).toBe(runtime);
        expect(caps.runtimes).toContain(p.runtime);
        expect(caps.runtimes).toContain(caps.defaultRuntime);
        const info = await launcher().info();
        expect(info.runtimes.map((r) => r.name)).toContain(runtime);
        expect(info.defaultRuntime).toBe(caps.defaultRuntime);
        expect(info.version).not.toBe('');
      });

      it('a plan for a runtime it lacks is refused (RUNTIME_MISSING), and nothing is left', async () => {
        const p: RunPlan = { ...plan({ argv: ['true'] }), runtime: 'berth-no-such-runtime' };
        expect((await launcher().capabilities()).runtimes).not.toContain(p.runtime);
        await expect(launcher().run(p)).rejects.toMatchObject({ code: 'RUNTIME_MISSING' });
        expect(await list()).toEqual([]);
      });
    });
  });
}

function bindAt(plan: RunPlan, target: string): { source: string; readOnly: boolean } {
  const m = plan.mounts.find((x) => x.target === target);
  if (m?.type !== 'bind') throw new Error(`the plan binds nothing at ${target}`);
  return m;
}

/** Poll until `ok` (a container's state changes on the engine's time, not ours). */
async function until(ok: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`not so after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
