import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { listenHttp } from '../src/cli/serve.js';
import type { ProjectMetadataInput } from '../src/config/metadata.js';
import { createBerth } from '../src/main.js';
import { startFakeSignalCli } from '../test/fakes/signal-cli.js';
import { BENCH_IMAGE } from './bare.js';

/**
 * The rig the chat benches share (chat-first-output.ts, files.ts): a real berth serving HTTP with
 * warm containers, the Signal bridge on the fake signal-cli (its SSE events and sends as the real
 * daemon's; anyone may write) answered by project "bench" of the shell preset, and an idle
 * container for the bare dockerode exec each bench measures against. close() takes it all down.
 */
export const BENCH_PROJECT = 'bench';
const quiet = { out: () => undefined, err: () => undefined };

export async function startSignalBenchRig(opts: {
  /** Names the temporary home (berth-bench-<name>-). */
  name: string;
  /** runs.pool: pre-started containers. */
  pool?: number;
  project?: Omit<ProjectMetadataInput, 'name'>;
}) {
  const docker = new Docker();
  const home = fs.mkdtempSync(join(os.tmpdir(), `berth-bench-${opts.name}-`));
  const signal = await startFakeSignalCli({ receiveMode: 'on-connection' });
  fs.writeFileSync(
    join(home, 'berth.yaml'),
    [
      ...(opts.pool !== undefined ? [`runs: { pool: ${opts.pool} }`] : []),
      'bridges:',
      '  signal:',
      `    url: ${signal.url}`,
      `    account: '${signal.account}'`,
      '    senders: open',
      'routes:',
      `  signal: { project: ${BENCH_PROJECT} }`,
      '',
    ].join('\n'),
  );
  const berth = createBerth({ home, logLevel: 'silent', warm: true });
  berth.store.create({ name: BENCH_PROJECT, workspace_isolation: true, ...opts.project });
  const http = await listenHttp(berth, { host: '127.0.0.1', port: 0, token: 'bench-admin-token-0123456789' }, quiet);
  const idle = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['sleep', '3600'], HostConfig: { NetworkMode: 'none' } });
  await idle.start();
  await signal.waitForClients(1, 20_000);
  return {
    home,
    signal,
    berth,
    http,
    idle,
    async close() {
      await http.close();
      await berth.runner.drain(5000);
      await berth.runner.reapLeftovers();
      await idle.remove({ force: true });
      await signal.close();
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}
