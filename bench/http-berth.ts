import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { pino } from 'pino';
import { appDepsFrom, createApp } from '../src/api/app.js';
import { createBerth, type Berth } from '../src/main.js';

const TOKEN = 'bench-token-0123456789abcdef';

/** A berth with warm containers behind its HTTP API on loopback, project `bench` (isolated workspaces). */
export interface HttpBerth {
  berth: Berth;
  /** One message from `user`; its round trip in ms (throws unless it ran and exited 0). */
  message(user: string, text?: string): Promise<number>;
  /** Containers waiting in the pre-started pool now. */
  poolSize(): Promise<number>;
  /** Until the pool holds `n` (exactly, when `exact`), at most `ms`. */
  poolAt(n: number, exact?: boolean, ms?: number): Promise<void>;
  close(): Promise<void>;
}

export async function serveHttpBerth(runsYaml: string): Promise<HttpBerth> {
  const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-http-'));
  fs.writeFileSync(join(home, 'berth.yaml'), `runs: ${runsYaml}\n`);
  const berth = createBerth({ home, logLevel: 'silent', warm: true });
  berth.store.create({ name: 'bench', workspace_isolation: true });
  const app = createApp(appDepsFrom(berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
  await new Promise((r) => server.once('listening', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const poolSize = async () => (await berth.metrics.registry.getSingleMetric('berth_pool_containers')?.get())?.values[0]?.value ?? 0;
  return {
    berth,
    async message(user, text = 'true') {
      const t0 = performance.now();
      const res = await fetch(`${base}/api/projects/bench/runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user, message: text, level: 'low' }),
      });
      const body = (await res.json()) as { exit_code?: number };
      const ms = performance.now() - t0;
      if (res.status !== 200 || body.exit_code !== 0) throw new Error(`a message answered ${res.status}: ${JSON.stringify(body)}`);
      return ms;
    },
    poolSize,
    async poolAt(n, exact = false, ms = 90_000) {
      const end = Date.now() + ms;
      for (;;) {
        const size = await poolSize();
        if (exact ? size === n : size >= n) return;
        if (Date.now() > end) throw new Error(`the pool held ${size}, not ${n}, after ${ms / 1000} s`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async close() {
      server.close();
      await berth.runner.drain(5000);
      await berth.runner.reapLeftovers();
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}
