import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FilesSettingsSchema } from '../../src/config/metadata.js';
import { sandboxRead } from '../../src/fs/sandbox.js';
import { planIncoming, type IncomingFile } from '../../src/plan/files-in.js';
import { landIncoming } from '../../src/store/inbox-files.js';
import { collectOutbox, pruneRunFiles, queueOutboxFile, readRunFile, runFilesDirOf } from '../../src/store/run-files.js';

let base: string;
let ws: string;
let outside: string;
let state: string;
const settings = FilesSettingsSchema.parse({});
const who = { tenant_key: 'web:alice', session: 's1' };

beforeEach(() => {
  base = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-files-')));
  ws = join(base, 'ws');
  outside = join(base, 'outside');
  state = join(base, 'state');
  fs.mkdirSync(ws);
  fs.mkdirSync(outside);
  fs.writeFileSync(join(outside, 'secret.txt'), 'host secret');
});
afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

const land = (files: IncomingFile[]) => landIncoming(ws, files, planIncoming(files, settings).accept);
const file = (name: string, text: string): IncomingFile => ({ name, data: Buffer.from(text) });

describe('files in: written into inbox/ without following anything the tenant planted', () => {
  it('a symlink at inbox/ is moved aside, never followed', () => {
    fs.symlinkSync(outside, join(ws, 'inbox'));
    const { saved } = land([file('x.txt', 'hello')]);
    expect(saved).toEqual([{ path: 'inbox/x.txt', kind: 'text', size: 5, voice: false }]);
    expect(fs.readdirSync(outside)).toEqual(['secret.txt']);
    expect(fs.lstatSync(join(ws, 'inbox')).isDirectory()).toBe(true);
    expect(fs.readFileSync(join(ws, 'inbox/x.txt'), 'utf8')).toBe('hello');
    expect(fs.readdirSync(ws).some((n) => n.startsWith('inbox.displaced-by-berth-'))).toBe(true);
  });

  it('a fifo at inbox/ is moved aside without blocking', () => {
    execFileSync('mkfifo', [join(ws, 'inbox')]);
    expect(land([file('x.txt', 'hi')]).saved).toHaveLength(1);
    expect(fs.lstatSync(join(ws, 'inbox')).isDirectory()).toBe(true);
  });

  it('a symlink, fifo or hard link at the name is never written through: the file gets the next free name', () => {
    fs.mkdirSync(join(ws, 'inbox'));
    fs.symlinkSync(join(outside, 'secret.txt'), join(ws, 'inbox/a.txt'));
    execFileSync('mkfifo', [join(ws, 'inbox/a-2.txt')]);
    fs.linkSync(join(outside, 'secret.txt'), join(ws, 'inbox/a-3.txt'));
    const { saved } = land([file('a.txt', 'new')]);
    expect(saved.map((s) => s.path)).toEqual(['inbox/a-4.txt']);
    expect(fs.readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('host secret');
    expect(fs.readFileSync(join(ws, 'inbox/a-4.txt'), 'utf8')).toBe('new');
  });

  it('"../../x" lands as inbox/x, and many files of one name are numbered', () => {
    const files = [file('../../x', '1'), ...Array.from({ length: 5 }, (_, i) => file('same.txt', String(i)))];
    const { saved } = land(files);
    expect(saved.map((s) => s.path)).toEqual([
      'inbox/x',
      'inbox/same.txt',
      'inbox/same-2.txt',
      'inbox/same-3.txt',
      'inbox/same-4.txt',
      'inbox/same-5.txt',
    ]);
    expect(fs.existsSync(join(base, 'x'))).toBe(false);
    expect(fs.readdirSync(join(ws, 'inbox')).some((n) => n.startsWith('.berth-'))).toBe(false);
  });

  it('a 0-byte file lands empty', () => {
    expect(land([file('empty', '')]).saved).toEqual([{ path: 'inbox/empty', kind: 'file', size: 0, voice: false }]);
    expect(fs.statSync(join(ws, 'inbox/empty')).size).toBe(0);
  });
});

describe('files out: outbox/ collected by descriptor, bounded, never twice', () => {
  const collect = (over: Record<string, unknown> = {}) =>
    collectOutbox({ workspaceDir: ws, filesDir: runFilesDirOf(state, 'rabc0123456789a'), settings: FilesSettingsSchema.parse(over), who });

  it('takes regular files into berth state and moves them to outbox/sent/: a second collection sends nothing', () => {
    fs.mkdirSync(join(ws, 'outbox'));
    fs.writeFileSync(join(ws, 'outbox/chart.png'), 'PNG');
    fs.writeFileSync(join(ws, 'outbox/empty.txt'), '');
    const first = collect();
    expect(first.files).toEqual([
      { name: 'chart.png', size: 3, type: 'image/png' },
      { name: 'empty.txt', size: 0, type: 'text/plain' },
    ]);
    expect(fs.readdirSync(join(ws, 'outbox/sent')).sort()).toEqual(['chart.png', 'empty.txt']);
    expect(readRunFile(state, 'rabc0123456789a', 'chart.png')?.data.toString()).toBe('PNG');
    expect(readRunFile(state, 'rabc0123456789a', 'chart.png')?.record.tenant_key).toBe('web:alice');
    expect(collect().files).toEqual([]);
  });

  it('leaves a symlink, a fifo, a hard link and a directory where they are, and reads nothing through them', () => {
    fs.mkdirSync(join(ws, 'outbox'));
    fs.symlinkSync(join(outside, 'secret.txt'), join(ws, 'outbox/link.txt'));
    execFileSync('mkfifo', [join(ws, 'outbox/fifo')]);
    fs.linkSync(join(outside, 'secret.txt'), join(ws, 'outbox/hard.txt'));
    fs.mkdirSync(join(ws, 'outbox/dir'));
    const { files, left } = collect();
    expect(files).toEqual([]);
    expect(left.map((l) => l.name).sort()).toEqual(['dir', 'fifo', 'hard.txt', 'link.txt']);
    expect(fs.existsSync(runFilesDirOf(state, 'rabc0123456789a'))).toBe(false);
    expect(fs.readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('host secret');
  });

  it('a symlink at outbox/ itself sends nothing', () => {
    fs.writeFileSync(join(outside, 'chart.png'), 'x');
    fs.symlinkSync(outside, join(ws, 'outbox'));
    expect(collect()).toEqual({ files: [], left: [{ name: 'outbox/', reason: expect.stringContaining('not a directory') }] });
    expect(fs.readdirSync(outside).sort()).toEqual(['chart.png', 'secret.txt']);
  });

  it('bounds count and size: the rest waits in outbox/', () => {
    fs.mkdirSync(join(ws, 'outbox'));
    for (const n of ['a', 'b', 'c']) fs.writeFileSync(join(ws, 'outbox', n), n);
    fs.writeFileSync(join(ws, 'outbox/huge'), Buffer.alloc(1024 * 1024 + 1));
    const { files, left } = collect({ max_files: 2, max_file_mb: 1 });
    expect(files.map((f) => f.name)).toEqual(['a', 'b']);
    expect(left.map((l) => l.name)).toEqual(['c', 'huge']);
    expect(fs.readdirSync(join(ws, 'outbox')).sort()).toEqual(['c', 'huge', 'sent']);
  });

  it('a download names only a stored file of a real run id', () => {
    expect(readRunFile(state, '../../etc', 'passwd')).toBeUndefined();
    expect(readRunFile(state, 'rabc0123456789a', '.run.json')).toBeUndefined();
  });
});

describe('send_file: a workspace file queued into outbox/', () => {
  const read = (path: string) => (rootFd: number, max: number) => sandboxRead(rootFd, path, max);

  it('copies it under a free name, and refuses a link to a host file', () => {
    fs.mkdirSync(join(ws, 'out'));
    fs.writeFileSync(join(ws, 'out/report.md'), '# r');
    expect(queueOutboxFile(ws, read('out/report.md'), 'out/report.md', settings)).toEqual({
      queued: 'outbox/report.md',
      size: 3,
      kind: 'text',
    });
    expect(queueOutboxFile(ws, read('out/report.md'), 'out/report.md', settings).queued).toBe('outbox/report-2.md');
    fs.symlinkSync(join(outside, 'secret.txt'), join(ws, 'leak.txt'));
    expect(() => queueOutboxFile(ws, read('leak.txt'), 'leak.txt', settings)).toThrow(
      expect.objectContaining({ code: 'E_SANDBOX_VIOLATION' }),
    );
    expect(() => queueOutboxFile(ws, read('nothing'), 'nothing', settings)).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
  });
});

describe('run files kept for download: bounded by age and size', () => {
  it('removes runs past runFilesDays, keeps the recent ones', () => {
    const root = join(state, 'run-files');
    for (const run of ['rold', 'rnew']) {
      fs.mkdirSync(join(root, run), { recursive: true });
      fs.writeFileSync(join(root, run, 'a.txt'), 'x');
    }
    const old = new Date(Date.now() - 8 * 86_400_000);
    fs.utimesSync(join(root, 'rold'), old, old);
    expect(pruneRunFiles(state, Date.now())).toBe(1);
    expect(fs.readdirSync(root)).toEqual(['rnew']);
  });
});
