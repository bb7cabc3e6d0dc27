/**
 * The fake git host against the host's real `git` client over loopback HTTPS: credentials are
 * required (none, a wrong token → 401 and git gives up), a Bearer header or Basic auth with the
 * token as password clone; pushes land (small, and a 2 MB one sent as a chunked POST); a fetch
 * with many `want` lines sends a gzip body, which http-backend inflates.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeGitHost, type FakeGitHost } from '../fakes/git-https.js';

const TOKEN = 'ghp_fake_token_0123456789';
const IDENT = ['-c', 'user.name=tester', '-c', 'user.email=tester@example.test'];

let host: FakeGitHost;
let tmp: string;
let env: NodeJS.ProcessEnv;
let dirs = 0;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function git(args: string[], cwd?: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile('git', args, { cwd, env, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024, timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

async function ok(args: string[], cwd?: string): Promise<string> {
  const r = await git(args, cwd);
  if (r.code !== 0) throw new Error(`git ${args.join(' ')} failed (${r.code}):\n${r.stderr}`);
  return r.stdout;
}

function bearer(token = TOKEN): string[] {
  return ['-c', `http.extraHeader=Authorization: Bearer ${token}`];
}

function newDir(): string {
  return path.join(tmp, `clone-${++dirs}`);
}

describe('fake git host (smart HTTP over TLS via git http-backend)', () => {
  beforeAll(async () => {
    host = await startFakeGitHost({ token: TOKEN });
    host.createRepo('demo');
    tmp = mkdtempSync(path.join(os.tmpdir(), 'berth-fake-git-test-'));
    const caFile = path.join(tmp, 'ca.pem');
    writeFileSync(caFile, host.caPem);
    const home = path.join(tmp, 'home');
    await import('node:fs/promises').then((fs) => fs.mkdir(home));
    env = { ...process.env };
    for (const k of Object.keys(env)) {
      // No proxies (loopback only), and nothing of an enclosing git (GIT_DIR in a hook, askpass…).
      if (/^(https?_proxy|all_proxy|no_proxy)$/i.test(k) || k.startsWith('GIT_') || k === 'SSH_ASKPASS') delete env[k];
    }
    Object.assign(env, { GIT_SSL_CAINFO: caFile, GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_NOSYSTEM: '1', HOME: home });
  });

  afterAll(async () => {
    await host?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('listens on loopback with a localhost certificate from its own CA', () => {
    expect(host.url).toBe(`https://localhost:${host.port}`);
    expect(host.caPem).toContain('BEGIN CERTIFICATE');
    expect(host.log('demo')).toEqual(['Initial commit']);
  });

  it('refuses a clone without credentials', async () => {
    const before = host.requests.length;
    const r = await git(['clone', `${host.url}/demo.git`, newDir()]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/could not read Username|Authentication failed/i);
    const seen = host.requests.slice(before);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((q) => q.status === 401 && q.authorization === undefined)).toBe(true);
  });

  it('refuses the wrong token', async () => {
    const before = host.requests.length;
    const r = await git([...bearer('not-the-token'), 'clone', `${host.url}/demo.git`, newDir()]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/could not read Username|Authentication failed/i);
    const seen = host.requests.slice(before);
    expect(seen[0]).toMatchObject({ method: 'GET', status: 401, authorization: 'Bearer not-the-token' });
    expect(seen.every((q) => q.status === 401)).toBe(true);
  });

  it('clones with a Bearer header, and takes pushes small and large', async () => {
    const dir = newDir();
    const before = host.requests.length;
    await ok([...bearer(), 'clone', '--quiet', `${host.url}/demo.git`, dir]);
    expect(readFileSync(path.join(dir, 'README.md'), 'utf8')).toContain('# demo');
    const cloned = host.requests.slice(before);
    expect(cloned[0]).toMatchObject({ method: 'GET', path: '/demo.git/info/refs?service=git-upload-pack', status: 200 });
    expect(cloned.some((q) => q.method === 'POST' && q.path === '/demo.git/git-upload-pack' && q.status === 200)).toBe(true);
    expect(cloned.every((q) => q.authorization === `Bearer ${TOKEN}`)).toBe(true);

    writeFileSync(path.join(dir, 'notes.txt'), 'hello from the test\n');
    await ok(['add', 'notes.txt'], dir);
    await ok([...IDENT, 'commit', '--quiet', '-m', 'Add notes'], dir);
    await ok([...bearer(), 'push', '--quiet', 'origin', 'main'], dir);
    expect(host.log('demo')).toEqual(['Add notes', 'Initial commit']);
    expect(host.requests.some((q) => q.method === 'POST' && q.path === '/demo.git/git-receive-pack' && q.status === 200)).toBe(true);

    // Over http.postBuffer (1 MiB): git sends a probe, then the pack as a chunked body.
    writeFileSync(path.join(dir, 'blob.bin'), randomBytes(2 * 1024 * 1024));
    await ok(['add', 'blob.bin'], dir);
    await ok([...IDENT, 'commit', '--quiet', '-m', 'Add a big blob'], dir);
    await ok([...bearer(), 'push', '--quiet', 'origin', 'main'], dir);
    expect(host.log('demo')).toEqual(['Add a big blob', 'Add notes', 'Initial commit']);
  });

  it('inflates gzip request bodies (a fetch that wants many refs)', async () => {
    const a = newDir();
    const b = newDir();
    await ok([...bearer(), 'clone', '--quiet', `${host.url}/demo.git`, a]);
    await ok([...bearer(), 'clone', '--quiet', `${host.url}/demo.git`, b]);
    // 30 new branches, each at its own commit: b's fetch lists 30 `want` lines (~50 bytes each),
    // over the 1 KiB past which git gzips an upload-pack request.
    for (let i = 0; i < 30; i++) {
      await ok([...IDENT, 'commit', '--quiet', '--allow-empty', '-m', `Topic ${i}`], a);
      await ok(['branch', `topic-${i}`], a);
    }
    await ok([...bearer(), 'push', '--quiet', 'origin', '--all'], a);

    const before = host.requests.length;
    await ok([...bearer(), 'fetch', '--quiet', 'origin'], b);
    expect((await ok(['log', '-1', '--format=%s', 'origin/topic-29'], b)).trim()).toBe('Topic 29');
    expect((await ok(['for-each-ref', '--format=%(refname)', 'refs/remotes/origin/topic-*'], b)).trim().split('\n')).toHaveLength(30);
    const gzipped = host.requests.slice(before).filter((q) => q.contentEncoding === 'gzip');
    expect(gzipped.length).toBeGreaterThan(0);
    expect(gzipped.every((q) => q.method === 'POST' && q.path === '/demo.git/git-upload-pack' && q.status === 200)).toBe(true);
  });

  it('accepts Basic auth with the token as password', async () => {
    const dir = newDir();
    const before = host.requests.length;
    const url = `https://x-access-token:${TOKEN}@localhost:${host.port}/demo.git`;
    await ok(['clone', '--quiet', url, dir]);
    expect(existsSync(path.join(dir, 'README.md'))).toBe(true);
    const basic = `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`;
    expect(host.requests.slice(before).some((q) => q.authorization === basic && q.status === 200)).toBe(true);
  });
});
