import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { pino, type Logger } from 'pino';
import Docker from 'dockerode';
import type { Browser, Page } from 'playwright-core';
import { appDepsFrom, createApp } from '../src/api/app.js';
import { createBerth, installationId, type Berth } from '../src/main.js';
import { releaseMountsUnder } from '../src/fs/loop-quota.js';
import type { ProjectMetadataInput } from '../src/config/metadata.js';
import type { RunOutcome } from '../src/runs/runner.js';
import type { Launcher } from '../src/launch/launcher.js';
import type { RateWindows } from '../src/plan/pool-size.js';
import { createFakeLauncher } from './helpers/fake-launcher.js';
import type { PermissionLevel } from '../src/config/session.js';

export interface TestHome extends AsyncDisposable {
  home: string;
  berth: Berth;
  /** Its sessions' containers stay warm between messages. */
  warm: boolean;
  run(project: string, user: string, message: string, level?: PermissionLevel): Promise<RunOutcome>;
  create(input: ProjectMetadataInput): void;
}

/** A fresh berth home in a temp dir; disposing it removes its containers and files. */
/** BERTH_TEST_WARM=1: the attack tests run again with warm session containers (make test does both). */
export const WARM = process.env.BERTH_TEST_WARM === '1';
/**
 * BERTH_TEST_POOL=1: the attack tests run again on pre-started containers (warm, and every new
 * session's container is a pool container its mounts were attached to: runs/prestart-pool.ts).
 */
export const POOL = process.env.BERTH_TEST_POOL === '1';

/**
 * BERTH_TEST_RUNTIME=runsc: the attack tests run again with every project they create under that
 * OCI runtime (gVisor; make test registers it). berth.yaml offers it beside runc.
 */
export const RUNTIME = process.env.BERTH_TEST_RUNTIME;
/**
 * BERTH_TEST_CPUS=0.25: every project a test makes without its own CPU limit gets this one. The real
 * Kubernetes tier sets it: a pod's CPU request is reserved on its node, and 2 cores hold 2 pods of 1.
 */
export const TEST_CPUS = process.env.BERTH_TEST_CPUS ? Number(process.env.BERTH_TEST_CPUS) : undefined;
/** A write the kernel refused, in its words: runc's EROFS, or gVisor's gofer's EACCES on a read-only mount. */
export const WRITE_REFUSED = /Read-only file system|Permission denied/;

/** berth.yaml text for a test, offering RUNTIME beside runc when set (a test that rewrites berth.yaml uses it too). */
export function testConfig(config?: string): string | undefined {
  return RUNTIME ? `${config ?? ''}\nruntimes: [runc, ${RUNTIME}]\n` : config;
}

export function testHome(
  opts: { config?: string; warm?: boolean; launcher?: Launcher; pool?: 'always' | 'off'; poolWindows?: RateWindows } = {},
): TestHome {
  const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-test-')));
  const config = testConfig(opts.config);
  if (config) fs.writeFileSync(join(home, 'berth.yaml'), config);
  // A test that names its pool (undefined: berth.yaml's runs.pool) keeps it; the others have
  // none unless BERTH_TEST_POOL asks (their container counts are a warm container's).
  const pool = 'pool' in opts ? opts.pool : POOL && opts.warm !== false ? 'always' : 'off';
  const warm = opts.warm ?? (WARM || pool === 'always');
  const berth = createBerth({ home, logLevel: 'silent', warm, launcher: opts.launcher, pool, poolWindows: opts.poolWindows });
  return {
    home,
    berth,
    warm,
    run: (project, user, message, level) => berth.runner.run({ project, tenantKey: user, message, level }),
    create(input) {
      const withCpus = TEST_CPUS && input.limits?.cpus === undefined ? { ...input, limits: { ...input.limits, cpus: TEST_CPUS } } : input;
      berth.store.create(RUNTIME && !withCpus.runtime ? { ...withCpus, runtime: RUNTIME } : withCpus);
    },
    async [Symbol.asyncDispose]() {
      // As berth stops: the pre-started pool stops refilling and its starts under way end removed (none left created).
      await berth.runner.drain(0);
      await berth.runner.reapLeftovers();
      await berth.audit.flush(); // its head record is written off the event loop after a run's receipt line
      releaseMountsUnder(home); // workspace quotas: an rm -rf over a live mount fails
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}

/** A test home on the in-memory launcher: the unit tier runs with no engine. */
export const unitHome = (opts: { config?: string } = {}): TestHome => testHome({ ...opts, warm: false, launcher: createFakeLauncher() });

export function sha256(path: string): string {
  return createHash('sha256').update(fs.readFileSync(path)).digest('hex');
}

/** Every path under root (relative), symlinks not followed. */
export function listTree(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string) => {
    for (const name of fs.readdirSync(dir)) {
      const full = join(dir, name);
      const r = rel ? `${rel}/${name}` : name;
      out.push(r);
      if (fs.lstatSync(full).isDirectory()) walk(full, r);
    }
  };
  walk(root, '');
  return out.sort();
}

export const REPO_ROOT = join(import.meta.dirname, '..');
export const BERTH_BIN = join(REPO_ROOT, 'bin', 'berth.js');

/** Run the real CLI; never throws on a non-zero exit. */
export function cli(args: string[], env: Record<string, string> = {}): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BERTH_BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/**
 * The docs' shell commands: the lines of a guide's ```sh blocks (README.md or docs/<guide>.md;
 * with `section`, only from that "## " heading to the next), starting with `prefix`. The docs'
 * commands are the tested ones.
 */
export function docCommands(file: string, prefix: string, section?: string): string[] {
  let text = fs.readFileSync(join(REPO_ROOT, file), 'utf8');
  if (section !== undefined) {
    const start = text.indexOf(`\n## ${section}\n`);
    if (start < 0) throw new Error(`${file} has no section "${section}"`);
    const end = text.indexOf('\n## ', start + 1);
    text = text.slice(start, end < 0 ? undefined : end);
  }
  const lines = [...text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)]
    .flatMap((m) => (m[1] as string).split('\n'))
    .filter((l) => l.startsWith(prefix));
  if (lines.length === 0) throw new Error(`${file}${section ? ` section "${section}"` : ''} has no command starting "${prefix}"`);
  return lines;
}

/**
 * Run a docs line as written by a shell, on `home` (every `npx berth` in it is this checkout's
 * berth on that home), after `swap` replaced what only a real deployment has (a real URL, a key).
 */
export function runDocLine(
  line: string,
  home: string,
  swap: Array<[string, string]> = [],
): { code: number; stdout: string; stderr: string } {
  const r = spawnSync('sh', ['-c', docShellLine(line, home, swap)], {
    env: { PATH: process.env.PATH ?? '' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** The same, without blocking this process (a fake the line talks to answers from here). */
export function runDocLineAsync(
  line: string,
  home: string,
  swap: Array<[string, string]> = [],
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', docShellLine(line, home, swap)], {
      env: { PATH: process.env.PATH ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

function docShellLine(line: string, home: string, swap: Array<[string, string]>): string {
  let cmd = line
    .split('npx berth ')
    .join(`${JSON.stringify(process.execPath)} ${JSON.stringify(BERTH_BIN)} --home ${JSON.stringify(home)} `);
  for (const [from, to] of swap) cmd = cmd.split(from).join(to);
  return cmd;
}

/** The same, without blocking this process (for a CLI that talks to a server the test runs). */
export function cliAsync(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BERTH_BIN, ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/** The HTTP app of a berth, listening on a free loopback port (a real server, for real clients). */
export async function serveApp(berth: Berth, token: string, logger: Logger = pino({ level: 'silent' })) {
  const app = createApp(appDepsFrom(berth, { token, logger }));
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
  await new Promise((r) => server.once('listening', r));
  return { app, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => void server.close() };
}

/**
 * Debian's Chromium, headless, as measured to work here (never a downloaded browser). Its driver
 * is loaded here, not at the top: importing it takes about a second, and every unit file that
 * imports this module would pay it.
 */
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

/** Where browser tests write screenshots a person can open (test-results/screens/<name>.png; not committed). */
export const SCREENS_DIR = fileURLToPath(new URL('../test-results/screens/', import.meta.url));

export async function screenshot(page: Page, name: string): Promise<string> {
  fs.mkdirSync(SCREENS_DIR, { recursive: true });
  const file = join(SCREENS_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** Remove every container of a berth home (a test that killed berth cleans up what it left). */
export async function removeContainersOf(home: string): Promise<void> {
  const docker = new Docker();
  for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.installation=${installationId(home)}`] } })) {
    await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .catch(() => undefined);
  }
}
