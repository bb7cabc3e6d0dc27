import { describe, expect, it } from 'vitest';
import { FilesSettingsSchema } from '../../src/config/metadata.js';
import { candidateNames, mediaTypeOf, MAX_NAME_BYTES, safeFileName, sizeWords, typeAllowed } from '../../src/plan/file-names.js';
import { incomingNotice, planIncoming, withIncomingWords, type IncomingFile } from '../../src/plan/files-in.js';

const settings = (over: Record<string, unknown> = {}) => FilesSettingsSchema.parse(over);
const bytes = (n: number) => new Uint8Array(n);
const MiB = 1024 * 1024;

describe('file names: what a sender names is made safe', () => {
  it.each([
    ['../../x', 'x'],
    ['/etc/passwd', 'passwd'],
    ['C:\\Users\\me\\report.pdf', 'report.pdf'],
    ['..', 'file'],
    ['.', 'file'],
    ['.bashrc', 'bashrc'],
    ['...hidden.txt', 'hidden.txt'],
    ['a\u0000b\u001b[31m.txt', 'ab[31m.txt'],
    ['evil\u202egnp.exe', 'evilgnp.exe'],
    ['name. ', 'name'],
    ['  spaced   out .csv', 'spaced out .csv'],
    ['', 'file'],
  ])('%j becomes %j', (raw, safe) => {
    const name = safeFileName(raw);
    expect(name).toBe(safe);
    expect(name).not.toMatch(/[/\\\0]/);
    expect(name === '.' || name === '..').toBe(false);
  });

  it('names a nameless file by its type', () => {
    expect(safeFileName(undefined, 'image/jpeg')).toBe('file.jpg');
    expect(safeFileName(undefined, 'application/pdf')).toBe('file.pdf');
    expect(safeFileName(undefined, 'x/unknown')).toBe('file');
  });

  it('bounds a long name in bytes and keeps its extension, never cutting a character', () => {
    const long = `${'ä'.repeat(300)}.png`;
    const name = safeFileName(long);
    expect(Buffer.byteLength(name)).toBeLessThanOrEqual(MAX_NAME_BYTES);
    expect(name.endsWith('.png')).toBe(true);
    expect(name).not.toContain('\uFFFD');
  });

  it('numbers a collision before the extension, within the byte bound', () => {
    expect(candidateNames('chart.png').slice(0, 3)).toEqual(['chart.png', 'chart-2.png', 'chart-3.png']);
    expect(candidateNames('README').slice(0, 2)).toEqual(['README', 'README-2']);
    const long = safeFileName(`${'x'.repeat(200)}.csv`);
    for (const c of candidateNames(long)) expect(Buffer.byteLength(c)).toBeLessThanOrEqual(MAX_NAME_BYTES);
    expect(new Set(candidateNames(long)).size).toBe(candidateNames(long).length);
  });

  it('judges a type by the extension berth knows before the declared one', () => {
    expect(mediaTypeOf('x.png', 'text/html')).toBe('image/png');
    expect(mediaTypeOf('noext', 'Image/PNG; q=1')).toBe('image/png');
    expect(mediaTypeOf('noext', 'garbage')).toBe('application/octet-stream');
    expect(typeAllowed('image/png', ['image/*'])).toBe(true);
    expect(typeAllowed('application/pdf', ['image/*', 'text/csv'])).toBe(false);
    expect(typeAllowed('anything/else', ['*/*'])).toBe(true);
  });

  it('says sizes as people read them', () => {
    expect([sizeWords(0), sizeWords(1), sizeWords(122_880), sizeWords(3.4 * MiB), sizeWords(20 * MiB)]).toEqual([
      '0 bytes',
      '1 byte',
      '120 KB',
      '3.4 MB',
      '20 MB',
    ]);
  });
});

describe('planIncoming: which files land, and why the others do not', () => {
  it('takes a 0-byte file and refuses one over max_file_mb, the rest still land', () => {
    const files: IncomingFile[] = [
      { name: 'empty.txt', data: bytes(0) },
      { name: 'big.bin', data: bytes(2 * MiB + 1) },
      { name: 'chart.png', data: bytes(10) },
    ];
    expect(planIncoming(files, settings({ max_file_mb: 2 }))).toEqual({
      accept: [
        { index: 0, name: 'empty.txt', type: 'text/plain', kind: 'text', size: 0, voice: false },
        { index: 2, name: 'chart.png', type: 'image/png', kind: 'image', size: 10, voice: false },
      ],
      refuse: [{ name: 'big.bin', reason: 'too_big', size: 2 * MiB + 1 }],
    });
  });

  it('refuses past max_files, past max_message_mb, a type not allowed, a failed fetch, and past the free room', () => {
    const files: IncomingFile[] = [
      { name: 'a.png', data: bytes(MiB) },
      { name: 'b.pdf', data: bytes(10) },
      { name: 'c.png', data: bytes(MiB) },
      { name: 'd.png', refused: 'fetch', size: 99 },
      { name: 'e.png', data: bytes(10) },
      { name: 'f.png', data: bytes(10) },
    ];
    const s = settings({ max_files: 5, max_message_mb: 1, types: ['image/*'] });
    const { accept, refuse } = planIncoming(files, s);
    expect(accept.map((a) => a.name)).toEqual(['a.png']);
    expect(refuse.map((r) => [r.name, r.reason])).toEqual([
      ['b.pdf', 'type'],
      ['c.png', 'message_total'],
      ['d.png', 'fetch'],
      ['e.png', 'message_total'],
      ['f.png', 'count'],
    ]);
    expect(planIncoming([{ name: 'x.png', data: bytes(100) }], settings(), 99).refuse).toEqual([
      { name: 'x.png', reason: 'quota', size: 100 },
    ]);
  });

  it('plans many files with one name: the writer numbers them', () => {
    const files = Array.from({ length: 10 }, () => ({ name: '../../same.txt', data: bytes(1) }));
    expect(planIncoming(files, settings()).accept.map((a) => a.name)).toEqual(Array(10).fill('same.txt'));
  });
});

describe('the words: what the agent and the person read', () => {
  it('tells the agent where each file is, an image to open', () => {
    const text = withIncomingWords(
      'plot it',
      [
        { path: 'inbox/chart.png', kind: 'image', size: 122_880, voice: false },
        { path: 'inbox/data.csv', kind: 'text', size: 3000, voice: false },
      ],
      1,
    );
    expect(text).toBe(
      '[The person sent 2 files with this message, saved in your working directory: inbox/chart.png (image, 120 KB: open it to see it); inbox/data.csv (text, 3 KB).] [1 more file could not be saved; the person was told.] [To send the person a file, save it in outbox/ (in your working directory): it is delivered after your answer.]\n\nplot it',
    );
    expect(withIncomingWords('hi', [], 0)).toBe('hi');
    // The shell preset runs the message: the words are comment lines before it.
    expect(withIncomingWords('cat inbox/a.txt', [{ path: 'inbox/a.txt', kind: 'text', size: 2, voice: false }], 0, true)).toBe(
      '# [The person sent a file with this message, saved in your working directory: inbox/a.txt (text, 2 bytes).]\n# [To send the person a file, save it in outbox/ (in your working directory): it is delivered after your answer.]\ncat inbox/a.txt',
    );
  });

  it('tells the person what was refused and why (voice notes are plan/voice-notes.ts)', () => {
    const s = settings({ max_file_mb: 20 });
    expect(
      incomingNotice(
        [{ path: 'inbox/a.png', kind: 'image', size: 1, voice: false }],
        [{ name: 'big.zip', reason: 'too_big', size: 30 * MiB }],
        s,
      ),
    ).toBe(
      'berth: a file was not saved (big.zip: too big (30 MB): files up to 20 MB are taken). The other went to the agent with your message.',
    );
    expect(incomingNotice([{ path: 'inbox/voice.ogg', kind: 'audio', size: 5, voice: true }], [], s)).toBeUndefined();
    expect(incomingNotice([{ path: 'inbox/a.png', kind: 'image', size: 1, voice: false }], [], s)).toBeUndefined();
    expect(incomingNotice([], [{ name: 'x', reason: 'quota' }], s)).toContain('your workspace is full');
  });
});
