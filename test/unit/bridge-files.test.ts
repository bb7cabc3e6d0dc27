import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatTransport } from '../../src/bridges/chat-transport.js';
import { createBridgeCore } from '../../src/bridges/core.js';
import { BerthError } from '../../src/base/errors.js';
import type { ChannelAttachment, ReplyFile } from '../../src/channels/contract.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import type { IncomingFile } from '../../src/plan/files-in.js';
import { openBridgeState } from '../../src/store/bridge-state.js';
import { openInbox } from '../../src/store/inbox.js';
import { fakeCoreAdmin, runViewOf } from '../fakes/core-admin.js';

/**
 * The bridge core's files, in memory: attachments fetched through the transport (bounded) and
 * handed to the run; the run's outbox files sent after the answer, as files or as links.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const MiB = 1024 * 1024;

function setup(
  opts: {
    workflow?: boolean;
    sendFile?: boolean;
    fileLimit?: number;
    files?: { max_file_mb?: number };
    outFiles?: Array<{ name: string; size: number; type: string }>;
    notice?: string;
    publicUrl?: string;
  } = {},
) {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-core-files-'));
  dirs.push(dir);
  const said: string[] = [];
  const filesSent: Array<{ file: ReplyFile; answerTo?: string }> = [];
  const fetched: Array<{ ref: string; maxBytes: number }> = [];
  const stored = new Map<string, Buffer>(Object.entries({ 'chart.png': Buffer.from('PNG'), 'big.zip': Buffer.alloc(10) }));
  const transport: ChatTransport = {
    name: 'test',
    send: async (_chat, text) => void said.push(text),
    typing: async () => undefined,
    acknowledge: async () => undefined,
    ...(opts.workflow ? {} : { projectOf: () => 'p' }),
    async fetchAttachment(ref, limits) {
      fetched.push({ ref, maxBytes: limits.maxBytes });
      if (ref === 'huge') throw new BerthError('TOO_LARGE', 'over');
      if (ref === 'broken') throw new Error('HTTP 500');
      return Buffer.from(`bytes of ${ref}`);
    },
    ...(opts.sendFile
      ? {
          sendFile: async (_chat: string, file: ReplyFile, _caption: string, about?: { answerTo?: string }) =>
            void filesSent.push({ file, answerTo: about?.answerTo }),
        }
      : {}),
    ...(opts.fileLimit !== undefined ? { fileLimitBytes: opts.fileLimit } : {}),
  };
  const runs: Array<{ message: string; files?: IncomingFile[] }> = [];
  const admin = fakeCoreAdmin({
    getProjectMetadata: () => ProjectMetadataSchema.parse({ name: 'p', files: opts.files ?? {} }),
    async runMessage(_project, request) {
      await request.whenReady?.();
      runs.push({ message: request.message, files: request.files });
      return runViewOf({
        run: 'rabc0123456789a',
        stdout: 'answer',
        ...(opts.notice ? { files_in: { saved: [], refused: [], notice: opts.notice } } : {}),
        ...(opts.outFiles ? { files: opts.outFiles.map((f) => ({ ...f, url: `/api/x/${f.name}` })) } : {}),
      });
    },
    runWorkflow: async () =>
      ({
        workflow_run: 'w1',
        workflow: 'w',
        project: 'p',
        status: 'succeeded',
        steps: [{ index: 0, stdout: 'ran', stderr: '', exit_code: 0 }],
      }) as never,
    runFile: (_p, _run, name) => {
      // A stored file as AdminService.runFile gives it: held open, with the run's link key.
      fs.writeFileSync(join(dir, name), stored.get(name)!);
      const fd = fs.openSync(join(dir, name), 'r');
      return { fd, size: stored.get(name)!.byteLength, type: 'image/png', name, tenant_key: 'test:a', key: 'k3y' };
    },
  });
  const config = BerthConfigSchema.parse({
    bridges: { ...(opts.publicUrl ? { public_url: opts.publicUrl } : {}) },
    ...(opts.workflow ? { routes: { test: { project: 'p', workflow: 'w' } } } : {}),
  });
  const inbox = openInbox(dir, 'test');
  const core = createBridgeCore({
    transport,
    inbox,
    state: openBridgeState(dir, 'test'),
    admin,
    config: () => config,
    logger: pino({ level: 'silent' }),
    senderAllowed: () => true,
  });
  const send = async (text: string, attachments?: ChannelAttachment[]) => {
    core.receive({
      id: `m${said.length}-${runs.length}`,
      chat: 'a',
      tenant: 'test:a',
      sender: 'test:a',
      text,
      ...(attachments ? { attachments } : {}),
    });
    await core.idle();
  };
  return { send, said, filesSent, fetched, runs, inbox, core };
}

describe('bridge core: files in', () => {
  it('fetches each attachment bounded by max_file_mb, journals it with the message, and hands the bytes to the run', async () => {
    const t = setup({ files: { max_file_mb: 2 } });
    await t.send('plot it', [
      { ref: 'f1', name: 'data.csv', mime: 'text/csv' },
      { ref: 'v1', name: 'voice.ogg', voice: true },
    ]);
    expect(t.fetched).toEqual([
      { ref: 'f1', maxBytes: 2 * MiB },
      { ref: 'v1', maxBytes: 2 * MiB },
    ]);
    expect(t.runs[0]?.message).toBe('plot it');
    expect(t.runs[0]?.files?.map((f) => [f.name, Buffer.from(f.data!).toString(), f.voice])).toEqual([
      ['data.csv', 'bytes of f1', false],
      ['voice.ogg', 'bytes of v1', true],
    ]);
    expect(t.inbox.all()[0]?.attachments).toEqual([
      { ref: 'f1', name: 'data.csv', mime: 'text/csv' },
      { ref: 'v1', name: 'voice.ogg', voice: true },
    ]);
  });

  it('a fetch refused as too big, one that fails, and one declared over the limit are refusals: the run still runs, nothing over the limit is fetched', async () => {
    const t = setup({ files: { max_file_mb: 1 }, notice: 'berth: 3 files were not saved (…)' });
    await t.send('', [
      { ref: 'huge', name: 'a.bin' },
      { ref: 'broken', name: 'b.bin' },
      { ref: 'declared', name: 'c.bin', size: MiB + 1 },
    ]);
    expect(t.fetched.map((f) => f.ref)).toEqual(['huge', 'broken']);
    expect(t.runs[0]?.files?.map((f) => [f.name, f.refused])).toEqual([
      ['a.bin', 'too_big'],
      ['b.bin', 'fetch'],
      ['c.bin', 'too_big'],
    ]);
    expect(t.runs[0]?.message).toMatch(/only the files/);
    expect(t.said).toEqual(['berth: 3 files were not saved (…)', 'answer']);
  });
});

describe('bridge core: files out', () => {
  const outFiles = [
    { name: 'chart.png', size: 3, type: 'image/png' },
    { name: 'big.zip', size: 50 * MiB, type: 'application/zip' },
  ];

  it('sends what fits as files after the answer, and the rest as a link: never dropped', async () => {
    const t = setup({ sendFile: true, fileLimit: 20 * MiB, outFiles, publicUrl: 'https://berth.example.org/' });
    await t.send('chart please');
    expect(t.said[0]).toBe('answer');
    expect(t.filesSent).toEqual([
      { file: { name: 'chart.png', mime: 'image/png', data: new Uint8Array(Buffer.from('PNG')) }, answerTo: expect.any(String) },
    ]);
    expect(t.said[1]).toBe(
      'berth: the agent sent a file to open at its link:\nbig.zip (50 MB): https://berth.example.org/chat/api/runs/rabc0123456789a/files/big.zip?project=p&key=k3y',
    );
  });

  it('a transport without sendFile gets every file as a link', async () => {
    const t = setup({ outFiles });
    await t.send('x');
    expect(t.said).toEqual([
      'answer',
      'berth: the agent sent 2 files to open at their links:\nchart.png (3 bytes): /chat/api/runs/rabc0123456789a/files/chart.png?project=p&key=k3y\nbig.zip (50 MB): /chat/api/runs/rabc0123456789a/files/big.zip?project=p&key=k3y',
    ]);
  });
});

describe('bridge core: a chat a workflow answers', () => {
  it('tells the person their files were not saved (a workflow takes text only), and answers', async () => {
    const t = setup({ workflow: true });
    await t.send('go', [{ ref: 'f1', name: 'a.txt' }]);
    expect(t.said).toEqual(['berth: this chat is answered by a workflow, which takes text only: your files were not saved.', 'ran']);
  });
});

describe('bridge core: files after a restart', () => {
  it('an answer journaled with its files (not yet sent when berth died) is sent, then its files', async () => {
    const t = setup({ sendFile: true });
    t.inbox.receive({ id: 'old', chat: 'a', sender: 'test:a', tenant: 'test:a', text: 'chart please' });
    t.inbox.mark('old', 'answered', {
      reply: 'here it is',
      files: { run: 'rabc0123456789a', list: [{ name: 'chart.png', size: 3, type: 'image/png' }] },
    });
    t.core.recover();
    await t.core.idle();
    expect(t.said).toEqual(['here it is']);
    expect(t.filesSent.map((f) => f.file.name)).toEqual(['chart.png']);
    expect(t.inbox.all().find((e) => e.id === 'old')?.phase).toBe('replied');
  });
});
