import fs from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { cli, testHome, type TestHome } from '../helpers.js';
import { readRunRecords } from '../../src/store/run-log.js';

/**
 * Files in and out through the run API, end to end on the engine (shell preset): a file sent in
 * lands at /workspace/inbox/<name> and the run can read it; a file the run writes to
 * /workspace/outbox/ comes back in the answer, downloadable with the admin token and not without.
 */
const TOKEN = 'test-token-0123456789abcdef';
let h: TestHome;
let app: ReturnType<typeof createApp>;

beforeAll(() => {
  h = testHome();
  app = createApp(appDepsFrom(h.berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
  h.create({ name: 'files', workspace_isolation: true, files: { max_file_mb: 1 } });
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64');

async function run(body: unknown) {
  const res = await app.request('/api/projects/files/runs', {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe('files through the run API (shell preset, real containers)', () => {
  it('a file sent in lands at /workspace/inbox/<name>; one over max_file_mb is refused and the run still runs', async () => {
    const r = await run({
      user: 'web:alice',
      message: 'cat /workspace/inbox/notes.txt; ls /workspace/inbox',
      files: [
        { name: '../../notes.txt', content_base64: b64('hello from the person\n') },
        { name: 'big.bin', content_base64: b64(Buffer.alloc(1024 * 1024 + 1)) },
        { name: 'empty', content_base64: '' },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.body.exit_code).toBe(0);
    expect(r.body.stdout).toBe('hello from the person\nempty\nnotes.txt\n');
    expect(r.body.files_in).toEqual({
      saved: [
        { path: 'inbox/notes.txt', kind: 'text', size: 22, voice: false },
        { path: 'inbox/empty', kind: 'file', size: 0, voice: false },
      ],
      refused: [{ name: 'big.bin', reason: 'too_big', size: 1024 * 1024 + 1 }],
      notice: expect.stringContaining('big.bin: too big'),
    });
    // The run's record keeps what landed (paths and sizes): the console's run view and `berth runs show` list them.
    const { records } = readRunRecords(h.berth.store.get('files').paths.sessionsDir, { keep: (x) => x.run === r.body.run, limit: 1 });
    expect(records[0]?.files_in).toEqual([
      { path: 'inbox/notes.txt', size: 22 },
      { path: 'inbox/empty', size: 0 },
    ]);
  });

  it('a file written to /workspace/outbox/ comes back in the answer, downloadable with the token only, and is not sent twice', async () => {
    const r = await run({
      user: 'web:alice',
      message:
        'mkdir -p /workspace/outbox && printf "a,b\\n1,2\\n" > /workspace/outbox/result.csv && ln -s /etc/passwd /workspace/outbox/leak',
    });
    expect(r.status).toBe(200);
    expect(r.body.files).toEqual([
      { name: 'result.csv', size: 8, type: 'text/csv', url: `/api/projects/files/runs/${r.body.run}/files/result.csv` },
    ]);
    const url = r.body.files[0].url as string;
    const got = await app.request(url, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(got.status).toBe(200);
    expect(got.headers.get('content-disposition')).toMatch(/^attachment;/);
    expect(got.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await got.text()).toBe('a,b\n1,2\n');
    expect((await app.request(url)).status).toBe(401);
    expect((await app.request(url.replace('result.csv', 'leak'), { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
    const again = await run({ user: 'web:alice', message: 'ls /workspace/outbox /workspace/outbox/sent' });
    expect(again.body.files).toBeUndefined();
    expect(again.body.stdout).toContain('result.csv');
  });

  it('a symlink planted at inbox/ is moved aside: the file lands in a real directory, nothing is written through the link', async () => {
    await run({ user: 'web:eve', message: 'rm -rf /workspace/inbox && ln -s /tmp /workspace/inbox' });
    const r = await run({
      user: 'web:eve',
      message: 'test -L /workspace/inbox || echo real-dir; cat /workspace/inbox/x.txt',
      files: [{ name: 'x.txt', content_base64: b64('safe') }],
    });
    expect(r.body.stdout).toBe('real-dir\nsafe');
    const ws = join(h.home, 'projects/files/workspaces', r.body.workspace as string);
    expect(fs.readdirSync(ws).some((n) => n.startsWith('inbox.displaced-by-berth-'))).toBe(true);
  });

  it('send_file queues a workspace file: the next answer carries it; a link to a host file is refused', async () => {
    const first = await run({ user: 'web:carol', message: 'mkdir -p out && echo report > out/report.md && ln -s /etc/hostname out/leak' });
    const ref = { project: 'files', session: first.body.session as string };
    expect(h.berth.sessionTools.sendFile(ref, { path: 'out/report.md' })).toEqual({ queued: 'outbox/report.md', size: 7, kind: 'text' });
    expect(() => h.berth.sessionTools.sendFile(ref, { path: '/workspace/out/leak' })).toThrow(
      expect.objectContaining({ code: 'E_SANDBOX_VIOLATION' }),
    );
    const next = await run({ user: 'web:carol', message: 'true' });
    expect(next.body.files).toEqual([expect.objectContaining({ name: 'report.md', size: 7 })]);
  });

  it('berth run --file lands the file in inbox/ and lists what the agent sent on stderr', () => {
    const local = join(h.home, 'from-disk.txt');
    fs.writeFileSync(local, 'on disk\n');
    const r = cli([
      '--home',
      h.home,
      'run',
      'files',
      '--user',
      'web:dave',
      '--file',
      local,
      '--',
      'cat inbox/from-disk.txt && mkdir -p outbox && cp inbox/from-disk.txt outbox/back.txt',
    ]);
    expect(r).toMatchObject({ code: 0, stdout: 'on disk\n' });
    expect(r.stderr).toMatch(/berth: the agent sent back\.txt \(8 bytes\): GET \/api\/projects\/files\/runs\/r[0-9a-z]+\/files\/back\.txt/);
    expect(cli(['--home', h.home, 'run', 'files', '--user', 'web:dave', '--file', join(h.home, 'missing'), '--', 'true'])).toMatchObject({
      code: 64,
      stderr: expect.stringContaining('no such file'),
    });
  });
});
