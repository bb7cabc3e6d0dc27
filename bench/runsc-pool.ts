/**
 * A pre-started pool under gVisor (issue 45, item 1): a new person's first reply under runsc,
 * against bare Docker under runc and runsc in the same run, interleaved round by round:
 * - berth's own: POST /api/projects/:name/runs for a tenant berth has never seen (shell preset,
 *   `true`, level low, a project on runsc), through the HTTP API of a berth with warm containers,
 *   with its pool (adopt, runs/pool-ways.ts; each round waits until it is refilled) and without;
 * - the candidates at the engine, berth left out. Two ways to hand a started sandbox its tenant's workspace:
 * - staging: the sandbox was started with a per-container staging directory (an rshared host
 *   mount, bound rslave); the claim mounts the workspace one level below it on the host. The
 *   gofer sees it there, but only below a bind: a mount over the bind's own root is never seen
 *   (the gofer holds that directory open since the sandbox started), so it cannot put a
 *   workspace at /workspace itself.
 * - adopt: the sandbox was started with a fresh, empty directory of berth's at /workspace; the
 *   claim moves the new workspace's seed into it and renames it to the workspace's path. No mount,
 *   no propagation: the gofer serves the same directory under its new name.
 * Each claim ends with an exec of `test -f <workspace>/seed` (the first reply's exec). The pool
 * is refilled outside the timing, as berth's refills in the background.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import Docker from 'dockerode';
import { pino } from 'pino';
import { appDepsFrom, createApp } from '../src/api/app.js';
import { createBerth, type Berth } from '../src/main.js';
import { readRunRecords } from '../src/store/run-log.js';
import { BENCH_IMAGE, bareExec, bareRun } from './bare.js';
import { fmt, summary } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ITERATIONS ?? 30);
/** Sandboxes berth keeps waiting (runs.pool). */
const POOL = Number(process.env.BENCH_POOL ?? 2);
const TOKEN = 'bench-token-0123456789abcdef';
const WARMUP = 2;
const RESTORE_ROUNDS = 5;
const docker = new Docker();
const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-runsc-pool-'));
const stage = join(dir, 'stage');
const HOST = { NetworkMode: 'none', Runtime: 'runsc', CapDrop: ['ALL'], ReadonlyRootfs: true, SecurityOpt: ['no-new-privileges'] };

/** An exec that must exit 0, to its end. */
async function execOk(c: Docker.Container, cmd: string[]): Promise<void> {
  const exec = await c.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  await new Promise<void>((r) => {
    stream.on('end', r);
    stream.on('close', r);
    stream.resume();
  });
  const { ExitCode } = await exec.inspect();
  if (ExitCode !== 0) throw new Error(`${cmd.join(' ')} exited ${ExitCode}`);
}

let n = 0;
/** A new person's workspace as berth makes it: a directory with the project's seed. */
function newWorkspace(): string {
  const ws = join(dir, `ws-${++n}`);
  fs.mkdirSync(join(ws, 'src'), { recursive: true });
  fs.writeFileSync(join(ws, 'seed'), 'seed\n');
  fs.writeFileSync(join(ws, 'src', 'main.c'), 'int main(void) { return 0; }\n');
  return ws;
}

async function started(mounts: Docker.MountSettings[] = []): Promise<Docker.Container> {
  const c = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['sleep', '3600'], HostConfig: { ...HOST, Mounts: mounts } });
  await c.start();
  return c;
}
const bind = (source: string, target: string, propagation?: 'rslave'): Docker.MountSettings => ({
  Type: 'bind',
  Source: source,
  Target: target,
  ...(propagation ? { BindOptions: { Propagation: propagation } } : {}),
});

/** Does a sandbox see a host mount made after its start over its bind's own root? (It does not: printed, not assumed.) */
async function overTheRootSeen(): Promise<boolean> {
  const slot = join(stage, 'root-check');
  fs.mkdirSync(slot);
  const c = await started([bind(slot, '/stage', 'rslave')]);
  const ws = newWorkspace();
  try {
    execFileSync('mount', ['--bind', ws, slot]);
    await execOk(c, ['test', '-f', '/stage/seed']);
    return true;
  } catch {
    return false;
  } finally {
    await c.remove({ force: true });
    execFileSync('umount', ['-l', slot]);
  }
}

/** Staging: one pre-started sandbox, its staging directory below the rshared stage. */
async function stagingReady(): Promise<{ c: Docker.Container; slot: string }> {
  const slot = join(stage, `s${++n}`);
  fs.mkdirSync(join(slot, 'ws'), { recursive: true });
  return { c: await started([bind(slot, '/stage', 'rslave')]), slot };
}
async function stagingClaim(p: { c: Docker.Container; slot: string }): Promise<void> {
  const ws = newWorkspace();
  execFileSync('mount', ['--bind', ws, join(p.slot, 'ws')]);
  await execOk(p.c, ['test', '-f', '/stage/ws/seed']);
}

/** Adopt: one pre-started sandbox with a fresh directory at /workspace. */
async function adoptReady(): Promise<{ c: Docker.Container; fresh: string }> {
  const fresh = join(dir, `fresh-${++n}`);
  fs.mkdirSync(fresh, { mode: 0o755 });
  return { c: await started([bind(fresh, '/workspace')]), fresh };
}
async function adoptClaim(p: { c: Docker.Container; fresh: string }): Promise<void> {
  const ws = newWorkspace();
  for (const e of fs.readdirSync(ws)) fs.renameSync(join(ws, e), join(p.fresh, e));
  fs.renameSync(p.fresh, ws); // over the now empty workspace directory
  await p.c.rename({ name: `berth-bench-claimed-${n}` });
  await execOk(p.c, ['test', '-f', '/workspace/seed']);
}

/**
 * Checkpoint/restore of a blank sandbox, with runsc itself: Docker 20.10 restores a checkpoint
 * only in experimental mode, which needs the engine restarted. Cold `runsc run` against `runsc
 * restore` of a sandbox checkpointed once, in one bundle (the image's files, read-only root).
 */
async function restoreFigures(rounds: number): Promise<{ run: number[]; restore: number[]; running: number }> {
  const bundle = join(dir, 'ck', 'bundle');
  const root = join(dir, 'ck', 'root');
  const image = join(dir, 'ck', 'image');
  fs.mkdirSync(join(bundle, 'rootfs'), { recursive: true });
  fs.mkdirSync(root);
  fs.mkdirSync(image);
  const made = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['true'] });
  try {
    const tar = (await made.export()) as NodeJS.ReadableStream;
    const chunks: Buffer[] = [];
    for await (const chunk of tar) chunks.push(chunk as Buffer);
    execFileSync('tar', ['-C', join(bundle, 'rootfs'), '-x'], { input: Buffer.concat(chunks) });
  } finally {
    await made.remove({ force: true });
  }
  execFileSync('runsc', ['spec', '--', 'sleep', '3600'], { cwd: bundle });
  const config = JSON.parse(fs.readFileSync(join(bundle, 'config.json'), 'utf8')) as {
    process: { terminal: boolean };
    root: { readonly: boolean };
    linux: { namespaces: Array<{ type: string }> };
  };
  config.process.terminal = false;
  config.root.readonly = true;
  config.linux.namespaces = config.linux.namespaces.filter((ns) => ns.type !== 'network');
  fs.writeFileSync(join(bundle, 'config.json'), JSON.stringify(config));
  // A detached sandbox keeps the descriptors it was given: only `state`, which starts none, is read.
  const runsc = (args: string[], read = false) =>
    execFileSync('runsc', ['--root', root, '--platform=ptrace', '--network=none', ...args], {
      stdio: ['ignore', read ? 'pipe' : 'ignore', 'ignore'],
      timeout: 30_000,
    })?.toString() ?? '';
  const out = { run: [] as number[], restore: [] as number[], running: 0 };
  try {
    runsc(['run', '-detach', '-bundle', bundle, 'blank']);
    runsc(['checkpoint', '-image-path', image, 'blank']);
    runsc(['delete', '-force', 'blank']);
    for (let i = 0; i < rounds; i++) {
      let t0 = performance.now();
      runsc(['run', '-detach', '-bundle', bundle, `run-${i}`]);
      out.run.push(performance.now() - t0);
      runsc(['delete', '-force', `run-${i}`]);
      t0 = performance.now();
      runsc(['restore', '-detach', '-image-path', image, '-bundle', bundle, `restored-${i}`]);
      out.restore.push(performance.now() - t0);
      if ((JSON.parse(runsc(['state', `restored-${i}`], true)) as { status?: string }).status === 'running') out.running++;
      runsc(['delete', '-force', `restored-${i}`]);
    }
  } finally {
    const left = JSON.parse(runsc(['list', '-format', 'json'], true) || 'null') as Array<{ id: string }> | null;
    for (const { id } of left ?? []) runsc(['delete', '-force', id]);
  }
  return out;
}

interface Server {
  berth: Berth;
  base: string;
  close(): Promise<void>;
}

/** A berth with warm containers over HTTP, its project on runsc; `pool` sandboxes kept waiting (0: none). */
async function berthServer(pool: number): Promise<Server> {
  const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-runsc-'));
  fs.writeFileSync(
    join(home, 'berth.yaml'),
    `runtimes: [runc, runsc]\nruns: { pool: ${pool}, warm_idle_seconds: 600, max_concurrent: 8, per_tenant: 2 }\n`,
  );
  const berth = createBerth({ home, logLevel: 'silent', warm: true });
  berth.store.create({ name: 'bench', workspace_isolation: true, runtime: 'runsc' });
  const app = createApp(appDepsFrom(berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
  await new Promise((r) => server.once('listening', r));
  return {
    berth,
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.close();
      await berth.runner.drain(5000);
      await berth.runner.reapLeftovers();
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}

let tenant = 0;
/** One new person's first message over HTTP, to its answer: its round trip in ms, and how its container came (pool, cold). */
async function firstMessage(s: Server): Promise<{ ms: number; start?: string }> {
  const t0 = performance.now();
  const res = await fetch(`${s.base}/api/projects/bench/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user: `bench:new-${++tenant}`, message: 'true', level: 'low' }),
  });
  const body = (await res.json()) as { exit_code?: number; run?: string };
  const ms = performance.now() - t0;
  if (res.status !== 200 || body.exit_code !== 0) throw new Error(`a first message answered ${res.status}: ${JSON.stringify(body)}`);
  const { sessionsDir } = s.berth.store.get('bench').paths;
  const [record] = readRunRecords(sessionsDir, { keep: (r) => r.run === body.run, limit: 1 }).records;
  return { ms, start: record?.receipt?.policy.start };
}

async function refilled(s: Server, n: number): Promise<void> {
  const end = Date.now() + 120_000;
  const size = async () => (await s.berth.metrics.registry.getSingleMetric('berth_pool_containers')?.get())?.values[0]?.value ?? 0;
  while ((await size()) < n) {
    if (Date.now() > end) throw new Error(`the pool did not refill to ${n} within 120 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

if (process.getuid?.() !== 0) throw new Error('bench/runsc-pool.ts mounts on the host: run it as root (as berth runs its pool)');
fs.mkdirSync(stage);
execFileSync('mount', ['--bind', stage, stage]);
execFileSync('mount', ['--make-rshared', stage]);
const used: Docker.Container[] = [];
let pooled: Server | undefined;
let cold: Server | undefined;
try {
  // A running container of each runtime for the bare exec.
  const runscIdle = await started();
  const runcIdle = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['sleep', '3600'], HostConfig: { NetworkMode: 'none' } });
  await runcIdle.start();
  used.push(runcIdle, runscIdle);
  const rootSeen = await overTheRootSeen();
  const load = [os.loadavg()];
  pooled = await berthServer(POOL);
  cold = await berthServer(0);
  // Each server's first session teaches it the shape.
  await firstMessage(pooled);
  await firstMessage(cold);
  console.error(`berth bench (runsc pool): ${ROUNDS} interleaved rounds (+${WARMUP} warm-up), berth's pool of ${POOL} ...`);
  const t: Record<string, number[]> = {
    runRunc: [],
    runRunsc: [],
    execRunc: [],
    execRunsc: [],
    staging: [],
    adopt: [],
    berthPool: [],
    berthCold: [],
  };
  let notPooled = 0;
  for (let i = 0; i < ROUNDS + WARMUP; i++) {
    const s = await stagingReady();
    const a = await adoptReady();
    used.push(s.c, a.c);
    const timed = async (k: string, fn: () => Promise<void>) => {
      const t0 = performance.now();
      await fn();
      if (i >= WARMUP) t[k]!.push(performance.now() - t0);
    };
    await timed('runRunc', () => bareRun(docker, 'true', 'none', 'runc'));
    await timed('runRunsc', () => bareRun(docker, 'true', 'none', 'runsc'));
    await timed('execRunc', () => bareExec(runcIdle));
    await timed('execRunsc', () => bareExec(runscIdle));
    await timed('staging', () => stagingClaim(s));
    await timed('adopt', () => adoptClaim(a));
    await Promise.all([s.c.remove({ force: true }), a.c.remove({ force: true })]);
    // berth's own, each against a pool refilled outside the timing (as its refill runs between arrivals).
    await refilled(pooled, POOL);
    const p = await firstMessage(pooled);
    if (p.start !== 'pool') notPooled++;
    const c = await firstMessage(cold);
    if (i >= WARMUP) {
      t.berthPool!.push(p.ms);
      t.berthCold!.push(c.ms);
    }
    execFileSync('umount', ['-l', join(s.slot, 'ws')]);
  }
  const ck = await restoreFigures(RESTORE_ROUNDS);
  const runsc = summary(t.runRunsc!);
  const runc = summary(t.runRunc!);
  const execRunsc = summary(t.execRunsc!);
  const row = (what: string, v: number[]) => {
    const s = summary(v);
    return `| ${what} | ${fmt(s.p50)} | ${fmt(s.p95)} | ${fmt(s.p99)} | ${(s.p50 / runsc.p50).toFixed(2)} | ${(s.p50 / runc.p50).toFixed(2)} | ${(s.p50 / execRunsc.p50).toFixed(2)} |`;
  };
  console.log(
    `\n| under gVisor (${ROUNDS} rounds) | p50 | p95 | p99 | p50 ÷ bare run runsc | p50 ÷ bare run runc | p50 ÷ bare exec runsc |`,
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  console.log(row('bare run of `true`, runc (create, start, wait, remove)', t.runRunc!));
  console.log(row('bare run of `true`, runsc', t.runRunsc!));
  console.log(row('bare exec of `true` into a running container, runc', t.execRunc!));
  console.log(row('bare exec of `true` into a running sandbox, runsc', t.execRunsc!));
  console.log(row('claim, staging: host mount below the staging bind + exec', t.staging!));
  console.log(row('claim, adopt: seed moved, fresh directory renamed + exec', t.adopt!));
  console.log(row(`berth: new person's first reply over HTTP, runsc, pool of ${POOL} (adopt)`, t.berthPool!));
  console.log(row("berth: new person's first reply over HTTP, runsc, no pool (cold)", t.berthCold!));
  load.push(os.loadavg());
  const bp = summary(t.berthPool!);
  console.log(
    `\ntarget (issue 45 item 1): berth's first reply under runsc p50 ≤ 150 ms: ${fmt(bp.p50)} ${bp.p50 <= 150 ? 'met' : 'MISSED'}; p99 ≤ 400 ms: ${fmt(bp.p99)} ${bp.p99 <= 400 ? 'met' : 'MISSED'}` +
      `; ratio to a bare runsc exec ${(bp.p50 / execRunsc.p50).toFixed(2)}, to a bare runsc run ${(bp.p50 / runsc.p50).toFixed(2)}; ${notPooled} of ${ROUNDS + WARMUP} pooled first messages did not come from the pool`,
  );
  console.log(
    `load average (1, 5, 15 min) at the start: ${load[0]?.map((l) => l.toFixed(2)).join(', ')}; at the end: ${load[1]?.map((l) => l.toFixed(2)).join(', ')}`,
  );
  const r = summary(ck.run);
  const rs = summary(ck.restore);
  console.log(`\n| runsc itself (${RESTORE_ROUNDS} rounds) | p50 | p99 | restore ÷ run |`);
  console.log('| --- | --- | --- | --- |');
  console.log(`| runsc run -detach of a blank sandbox | ${fmt(r.p50)} | ${fmt(r.p99)} | 1.00 |`);
  console.log(`| runsc restore of it, checkpointed once | ${fmt(rs.p50)} | ${fmt(rs.p99)} | ${(rs.p50 / r.p50).toFixed(2)} |`);
  console.log(`restored sandboxes still running after the restore: ${ck.running} of ${RESTORE_ROUNDS}`);
  console.log(`\na host mount over a bind's own root, made after the sandbox started, seen inside: ${rootSeen ? 'yes' : 'no'}`);
  console.log(`(${os.cpus().length} cores, Node ${process.version})`);
} finally {
  await pooled?.close();
  await cold?.close();
  await Promise.all(used.map((c) => c.remove({ force: true }).catch(() => undefined)));
  execFileSync('umount', ['-R', '-l', stage]);
  fs.rmSync(dir, { recursive: true, force: true });
}
