import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tenantDigest } from '../../src/admin/tenant-data.js';
import { isBerthError } from '../../src/base/errors.js';
import { pino } from 'pino';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { homePaths } from '../../src/config/home.js';
import { openDecoyHolders } from '../../src/store/decoy-holders.js';
import { testHome, type TestHome } from '../helpers.js';
import { runCli } from '../helpers/cli-main.js';

/**
 * A person's data, whole, on the real engine: `berth tenant export` archives everything berth
 * keeps of one tenant (and nothing of another: a link planted towards another's file is kept as a
 * link, a fifo is skipped and says so), `berth tenant forget` removes it, and a second export
 * finds nothing but the audit lines (the chain keeps names, never content) and the forget line,
 * which names the tenant by digest only. The other tenant's files and runs are untouched.
 */
let h: TestHome;
let dir: string;
const list = (archive: string) => execFileSync('tar', ['-tvf', archive], { encoding: 'utf8' });
const read = (archive: string, member: string) => execFileSync('tar', ['-xOf', archive, member], { encoding: 'utf8' });

beforeAll(async () => {
  // Decoys in the containers: forgetting the tenant also ends berth's API looking for theirs.
  h = testHome({ config: 'projects:\n  kept: { honeytokens: true }\n' });
  dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-export-'));
  h.create({ name: 'kept', workspace_isolation: true });
  await h.run(
    'kept',
    'web:alice',
    'echo alice-secret > notes.txt && ln -s /etc/shadow shadow && mkfifo pipe && mkdir -p d && echo deep > d/x',
    'low',
  );
  await h.run('kept', 'web:alice', 'cat notes.txt', 'low');
  await h.run('kept', 'web:bob', 'echo bob-secret > bob.txt', 'low');
}, 120_000);
afterAll(async () => {
  await h?.[Symbol.asyncDispose]();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('berth tenant export and forget', () => {
  it('exports one tenant whole: sessions, transcripts, workspace (links as links, fifos skipped), runs, and nothing of another', async () => {
    const out = join(dir, 'alice.tar');
    const r = await runCli(['--home', h.home, 'tenant', 'export', 'kept', 'web:alice', '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/wrote .*alice\.tar \(\d+ bytes\): 1 sessions, 1 workspaces, 2 runs/);
    expect(r.stdout).toMatch(/skipped workspaces\/[0-9a-f]+\/pipe: not a regular file/);
    expect((fs.statSync(out).mode & 0o777).toString(8)).toBe('600');
    const members = list(out);
    expect(members).toMatch(/workspaces\/[0-9a-f]+\/notes\.txt/);
    expect(members).toMatch(/workspaces\/[0-9a-f]+\/shadow -> \/etc\/shadow/);
    expect(members).toMatch(/workspaces\/[0-9a-f]+\/d\/x/);
    expect(members).not.toMatch(/bob/);
    const ws = /workspaces\/([0-9a-f]+)\/notes\.txt/.exec(members)?.[1] as string;
    expect(read(out, `workspaces/${ws}/notes.txt`)).toBe('alice-secret\n');
    const runs = read(out, 'runs.jsonl').trim().split('\n');
    expect(runs).toHaveLength(2);
    const manifest = JSON.parse(read(out, 'manifest.json')) as { tenant: string; counts: Record<string, number> };
    expect(manifest).toMatchObject({ tenant: 'web:alice', counts: { sessions: 1, workspaces: 1, runs: 2 } });
    expect(fs.readdirSync(dir).filter((n) => n.includes('partial'))).toEqual([]);
  });

  it('refuses to forget without the tenant named again, and changes nothing', async () => {
    const r = await runCli(['--home', h.home, 'tenant', 'forget', 'kept', 'web:alice', '--confirm', 'web:bob']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('CONFIG_INVALID');
    expect(r.stderr).toContain('confirm');
    expect(h.berth.sessions.list(h.berth.store.get('kept'), { tenantKey: 'web:alice' })).toHaveLength(1);
  });

  it('forgets the tenant: a second export holds no session, workspace, run or memory; bob is untouched', async () => {
    const holders = () =>
      openDecoyHolders(homePaths(h.home).stateDir)
        .list()
        .map((d) => d.tenant);
    expect(holders().sort()).toEqual(['web:alice', 'web:bob']);
    const r = await runCli(['--home', h.home, 'tenant', 'forget', 'kept', 'web:alice', '--confirm', 'web:alice', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const forgot = JSON.parse(r.stdout) as { removed: Record<string, number> };
    expect(forgot.removed).toMatchObject({ sessions: 1, workspaces: 1, runs: 2 });
    expect(holders()).toEqual(['web:bob']);

    const again = join(dir, 'alice-after.tar');
    const e = await h.berth.tenants.export('kept', 'web:alice', again);
    expect(e.counts).toMatchObject({ sessions: 0, workspaces: 0, runs: 0, memory: 0, schedules: 0 });
    expect(list(again)).not.toMatch(/workspaces\/|sessions\/|homes\//);
    const found = spawnSync('grep', ['-rl', 'alice-secret', h.home], { encoding: 'utf8' });
    expect(found.stdout).toBe('');
    expect(found.status).toBe(1); // grep: no line anywhere in the home

    const line = h.berth.audit.list({ kind: 'admin', limit: 10 } as never).find((l) => l.action === 'tenant.forget');
    expect(line?.target).toBe(tenantDigest('kept', 'web:alice'));
    expect(JSON.stringify(line)).not.toContain('alice');
    expect(h.berth.audit.verify().ok).toBe(true);

    const bob = await h.run('kept', 'web:bob', 'cat bob.txt', 'low');
    expect(bob.stdout).toBe('bob-secret\n');
  }, 60_000);

  it('the API does the same: the archive streamed back, forget with its confirmation, frozen listed', async () => {
    const app = createApp(appDepsFrom(h.berth, { token: 'tenant-api-token-0123456789', logger: pino({ level: 'silent' }) }));
    const auth = { authorization: 'Bearer tenant-api-token-0123456789' };
    const tar = await app.request('/api/projects/kept/tenants/web%3Abob/export', { method: 'POST', headers: auth });
    expect(tar.status).toBe(200);
    expect(tar.headers.get('content-type')).toBe('application/x-tar');
    const file = join(dir, 'bob-api.tar');
    fs.writeFileSync(file, Buffer.from(await tar.arrayBuffer()));
    expect(read(file, 'manifest.json')).toContain('"tenant": "web:bob"');
    const wrong = await app.request('/api/projects/kept/tenants/web%3Abob/forget', {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ confirm: 'web:alice' }),
    });
    expect(wrong.status).toBe(400);
    const frozen = await app.request('/api/tenants/frozen', { headers: auth });
    expect(await frozen.json()).toEqual({ frozen: [] });
    expect(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('berth-tenant-export-'))).toEqual([]);
  });

  it('an unknown project is PROJECT_NOT_FOUND, and an archive is never half-written over an existing file', async () => {
    await expect(h.berth.tenants.export('nope', 'web:alice', join(dir, 'x.tar'))).rejects.toSatisfy(
      (err: unknown) => isBerthError(err) && err.code === 'PROJECT_NOT_FOUND',
    );
    expect(fs.existsSync(join(dir, 'x.tar'))).toBe(false);
  });
});
