import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installationId } from '../../src/main.js';
import { REPO_ROOT } from '../helpers.js';

/**
 * berth itself in a container (the repository's Dockerfile), driving the host engine through
 * its socket. The engine resolves bind-mount sources on the host, so berth's home must be at
 * the same absolute path inside and out; "berth doctor" checks it ("host paths").
 *
 * No registry is needed: scripts/make-node-base.sh imports the host's node as the base image.
 */
const BASE = 'berth/node-base:local';
const IMAGE = 'berth/berth:test';
const SOCKET = '/var/run/docker.sock';

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 });
}

/** "docker run" the berth image with the socket and one bind mount; never throws on exit. */
function berthInContainer(mount: { host: string; inside: string }, args: string[]): Result {
  const r = spawnSync(
    'docker',
    ['run', '--rm', '-v', `${SOCKET}:${SOCKET}`, '-v', `${mount.host}:${mount.inside}`, IMAGE, '--home', mount.inside, ...args],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  if (r.error) throw r.error;
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** Containers berth started for the home it saw at `inside` (runs and doctor's probes). */
function berthContainers(inside: string): string[] {
  const out = sh('docker', [
    'ps',
    '-aq',
    '--filter',
    'label=berth.managed=true',
    '--filter',
    `label=berth.installation=${installationId(inside)}`,
  ]);
  return out.split('\n').filter(Boolean);
}

const homes: Array<{ host: string; inside: string }> = [];

function tempHome(): string {
  return fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-ctr-')));
}

beforeAll(() => {
  expect(fs.existsSync(SOCKET), `${SOCKET} is missing: the berth container needs the engine socket`).toBe(true);
  expect(fs.existsSync(join(REPO_ROOT, 'dist')), 'dist/ is missing: run "npm run build" (make test does)').toBe(true);
  sh(join(REPO_ROOT, 'scripts', 'make-node-base.sh'), []);
  sh('docker', ['build', '-q', '--build-arg', `BASE=${BASE}`, '-t', IMAGE, REPO_ROOT]);
  // The image runs: its node and berth's entrypoint work.
  expect(sh('docker', ['run', '--rm', '--network', 'none', IMAGE, '--version'])).toMatch(/^berth \d+\.\d+\.\d+\n$/);
}, 180_000);

afterAll(() => {
  for (const { host, inside } of homes) {
    const ids = berthContainers(inside);
    if (ids.length) sh('docker', ['rm', '-f', ...ids]);
    fs.rmSync(host, { recursive: true, force: true });
  }
}, 60_000);

describe('berth in a container (Dockerfile, host engine socket)', () => {
  it('home at the same absolute path inside and out: runs reach the host, doctor says ok', () => {
    const home = tempHome();
    const mount = { host: home, inside: home };
    homes.push(mount);

    expect(berthInContainer(mount, ['project', 'create', 'boxed', '--isolation'])).toMatchObject({
      code: 0,
      stdout: `created project boxed at ${home}/projects/boxed\n`,
    });
    expect(berthInContainer(mount, ['run', 'boxed', '--user', 'web:a', '--', 'echo hi > f.txt; cat f.txt'])).toEqual({
      code: 0,
      stdout: 'hi\n',
      stderr: '',
    });

    // The agent container wrote through the bind mount into the host's workspace.
    const workspaces = fs.readdirSync(join(home, 'projects/boxed/workspaces'));
    expect(workspaces).toEqual([expect.stringMatching(/^[0-9a-f]{32}$/)]);
    expect(fs.readFileSync(join(home, 'projects/boxed/workspaces', workspaces[0] as string, 'f.txt'), 'utf8')).toBe('hi\n');

    const doctor = berthInContainer(mount, ['doctor']);
    expect(doctor.stdout).toMatch(new RegExp(`^ok +host paths +the engine sees ${home} as berth does$`, 'm'));
    expect(doctor.stdout).not.toMatch(/^FAIL +host paths/m);
  }, 120_000);

  it('home at a different path inside: doctor fails "host paths" and runs fail with a code', () => {
    const home = tempHome();
    // A path that exists only inside berth's container, never on the host the engine sees.
    const inside = `/srv/berth-elsewhere-${randomBytes(6).toString('hex')}`;
    expect(fs.existsSync(inside)).toBe(false);
    const mount = { host: home, inside };
    homes.push(mount);

    // Creating a project only touches files, so it works (on the host, under the real dir).
    expect(berthInContainer(mount, ['project', 'create', 'boxed', '--isolation'])).toMatchObject({ code: 0 });
    expect(fs.existsSync(join(home, 'projects/boxed/metadata.json'))).toBe(true);

    const doctor = berthInContainer(mount, ['doctor']);
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toMatch(/^FAIL +host paths +\S/m);
    expect(doctor.stdout).not.toMatch(/^ok +host paths/m);
    expect(doctor.stdout).toContain('berth is not safe to run as configured');

    // The engine looks for the workspace at the container-only path on the host and refuses.
    const run = berthInContainer(mount, ['run', 'boxed', '--user', 'web:a', '--', 'echo hi > f.txt; cat f.txt']);
    expect(run.code).not.toBe(0);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^(RUN_FAILED|E_SANDBOX_VIOLATION): /);
    expect(run.stderr.split('\n')[0]).toContain(`${inside}/projects/boxed/workspaces/`);
    // Nothing ran: no f.txt anywhere under the real home, and no container was left behind.
    const workspaces = fs.readdirSync(join(home, 'projects/boxed/workspaces'));
    for (const id of workspaces) expect(fs.existsSync(join(home, 'projects/boxed/workspaces', id, 'f.txt'))).toBe(false);
    expect(berthContainers(inside)).toEqual([]);
    expect(fs.existsSync(inside)).toBe(false);
  }, 120_000);
});
