import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import { testHome, type TestHome } from '../helpers.js';
import type { FilesChannel } from './chat-files-channels.js';

/**
 * One berth serve with every chat channel on its fake service, all routed to one project of the
 * shell preset (each message runs as `sh -c` in a real container): the rig the end-to-end files
 * tests share (chat-files.test.ts) and bench/files.ts measures.
 */
export const FILES_PROJECT = 'chatfiles';
const quiet = { out: () => undefined, err: () => undefined };

export interface ChatFilesRig {
  h: TestHome;
  server: HttpSurface;
  channels: FilesChannel[];
  /** A file that landed in some workspace's inbox/ (names are unique per test), or undefined. */
  inboxFile(name: string): Buffer | undefined;
  /** A file the agent sent, as it stays in its workspace (outbox/sent/). */
  sentFile(name: string): Buffer | undefined;
  close(): Promise<void>;
}

export async function startChatFilesRig(
  channels: FilesChannel[],
  files: { max_file_mb: number; max_message_mb: number; types: string[] },
): Promise<ChatFilesRig> {
  const privateHosts = channels.flatMap((c) => c.privateHosts ?? []);
  const config = [
    'bridges:',
    '  max_concurrent_runs: 5',
    ...channels.flatMap((c) => c.config),
    'routes:',
    ...channels.map((c) => `  ${c.name}: { project: ${FILES_PROJECT} }`),
    ...(privateHosts.length ? ['egress:', `  private_hosts: [${privateHosts.map((p) => `'${p}'`).join(', ')}]`] : []),
    '',
  ].join('\n');
  const h = testHome({ config });
  h.create({ name: FILES_PROJECT, workspace_isolation: true, files });
  const server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: 'chat-files-admin-token-0123456789' }, quiet);
  await Promise.all(channels.map((c) => c.ready()));
  const workspaces = join(h.home, 'projects', FILES_PROJECT, 'workspaces');
  const find = (...path: string[]) => {
    for (const ws of fs.readdirSync(workspaces)) {
      const p = join(workspaces, ws, ...path);
      if (fs.existsSync(p)) return fs.readFileSync(p);
    }
    return undefined;
  };
  return {
    h,
    server,
    channels,
    inboxFile: (name) => find('inbox', name),
    sentFile: (name) => find('outbox', 'sent', name),
    async close() {
      await server.close();
      for (const c of channels) await c.close().catch(() => undefined);
      await h[Symbol.asyncDispose]();
    },
  };
}

export const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** The links berth sent for files (one line each: `name (size): url`), by name. */
export function fileLinks(texts: readonly string[]): Map<string, string> {
  const links = new Map<string, string>();
  for (const t of texts)
    for (const m of t.matchAll(/^(.+?) \([^)]*\): (\S*\/chat\/api\/runs\/[^\s>|]+)/gm)) links.set(m[1]!, m[2]!.replace(/^<|>$/g, ''));
  return links;
}
