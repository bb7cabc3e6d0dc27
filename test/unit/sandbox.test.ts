import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sandboxDelete, sandboxInfo, sandboxRead, sandboxReadText, sandboxWrite } from '../../src/fs/sandbox.js';

let base: string;
let root: string;
let rootFd: number;
const CANARY = 'outside-canary';

beforeEach(() => {
  base = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-sbx-')));
  root = join(base, 'root');
  fs.mkdirSync(join(root, 'dir'), { recursive: true });
  fs.writeFileSync(join(root, 'dir/ok.txt'), 'inside');
  fs.mkdirSync(join(base, 'outside'));
  fs.writeFileSync(join(base, 'outside/secret.txt'), CANARY);
  rootFd = fs.openSync(root, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
});
afterEach(() => {
  fs.closeSync(rootFd);
  fs.rmSync(base, { recursive: true, force: true });
});

const violation = expect.objectContaining({ code: 'E_SANDBOX_VIOLATION', details: expect.objectContaining({ kind: 'sandbox_violation' }) });

function plant() {
  fs.symlinkSync(join(base, 'outside/secret.txt'), join(root, 'abs-link'));
  fs.symlinkSync('../outside/secret.txt', join(root, 'rel-link'));
  fs.symlinkSync(join(base, 'nowhere'), join(root, 'dangling'));
  fs.symlinkSync('abs-link', join(root, 'chained'));
  fs.symlinkSync('loop-b', join(root, 'loop-a'));
  fs.symlinkSync('loop-a', join(root, 'loop-b'));
  fs.symlinkSync(join(base, 'outside'), join(root, 'linked-dir'));
  execFileSync('mkfifo', [join(root, 'fifo')]);
}

describe('path sandbox: escapes fail closed', () => {
  it('works inside', () => {
    expect(sandboxRead(rootFd, 'dir/ok.txt')?.toString()).toBe('inside');
    expect(sandboxWrite(rootFd, 'new/deep/file.txt', Buffer.from('x'))).toMatchObject({ path: 'new/deep/file.txt', type: 'file', size: 1 });
    expect(sandboxInfo(rootFd, 'new/deep')).toMatchObject({ type: 'dir' });
    expect(sandboxDelete(rootFd, 'new/deep/file.txt')).toBe(true);
    expect(sandboxRead(rootFd, 'missing.txt')).toBeUndefined();
    expect(sandboxRead(rootFd, 'ünïcödé/ok')).toBeUndefined();
  });

  it.each(['/etc/passwd', '../outside/secret.txt', 'dir/../../outside/secret.txt', 'a\0b'])('refuses the path %j', (p) => {
    expect(() => sandboxRead(rootFd, p)).toThrow(violation);
    expect(() => sandboxReadText(rootFd, p)).toThrow(violation);
    expect(() => sandboxWrite(rootFd, p, Buffer.from('x'))).toThrow(violation);
  });

  it.each(['abs-link', 'rel-link', 'dangling', 'chained', 'loop-a', 'linked-dir/secret.txt', 'fifo'])(
    '%s: read, write, delete, info are violations and the outside is untouched',
    (p) => {
      plant();
      expect(() => sandboxRead(rootFd, p)).toThrow(violation);
      expect(() => sandboxReadText(rootFd, p)).toThrow(violation);
      expect(() => sandboxWrite(rootFd, p, Buffer.from('pwned'))).toThrow(violation);
      expect(() => sandboxDelete(rootFd, p)).toThrow(violation);
      expect(() => sandboxInfo(rootFd, p)).toThrow(violation);
      expect(fs.readFileSync(join(base, 'outside/secret.txt'), 'utf8')).toBe(CANARY);
      expect(fs.readdirSync(join(base, 'outside'))).toEqual(['secret.txt']);
    },
  );

  it('a text read decodes as one Buffer.toString would: characters split across its 64 KiB slices, invalid bytes as U+FFFD', () => {
    // Multi-byte characters at every offset around each slice boundary, a broken sequence and a lone continuation byte.
    const unit = Buffer.concat([
      Buffer.from('a€😀ü'),
      Buffer.from([0xe2, 0x82]),
      Buffer.from('b'),
      Buffer.from([0x80]),
      Buffer.from('\n"\\'),
    ]);
    for (const lead of [0, 1, 2, 3]) {
      const bytes = Buffer.concat([Buffer.alloc(lead, 'x'), ...Array.from({ length: 20_000 }, () => unit)]);
      fs.writeFileSync(join(root, 'text.txt'), bytes);
      const text = sandboxReadText(rootFd, 'text.txt');
      expect(text?.length).toBe(bytes.toString('utf8').length);
      expect(text === bytes.toString('utf8'), `lead ${lead}`).toBe(true);
    }
    expect(sandboxReadText(rootFd, 'dir/ok.txt')).toBe('inside');
    expect(sandboxReadText(rootFd, 'missing.txt')).toBeUndefined();
    fs.writeFileSync(join(root, 'empty.txt'), '');
    expect(sandboxReadText(rootFd, 'empty.txt')).toBe('');
  });

  it('a hardlink to an outside file is a regular file inside: writes replace the link, not the outside content', () => {
    fs.linkSync(join(base, 'outside/secret.txt'), join(root, 'hard'));
    sandboxWrite(rootFd, 'hard', Buffer.from('new'));
    expect(fs.readFileSync(join(base, 'outside/secret.txt'), 'utf8')).toBe(CANARY);
    expect(fs.readFileSync(join(root, 'hard'), 'utf8')).toBe('new');
  });

  it('over-long names and paths are clean errors; huge files are refused', () => {
    expect(() => sandboxRead(rootFd, 'a'.repeat(256))).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    expect(() => sandboxRead(rootFd, 'a/'.repeat(2100))).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    fs.writeFileSync(join(root, 'big'), '');
    fs.truncateSync(join(root, 'big'), 10 * 1024 * 1024 * 1024);
    expect(() => sandboxRead(rootFd, 'big')).toThrow(violation);
  });
});
