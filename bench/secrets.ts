/**
 * Brokered secrets' cost (issue 26): an HTTPS request through the egress proxy with berth
 * terminating TLS and adding the token, against the same request sent straight to the host with
 * the token, interleaved. Three processes (bench/secrets-peers.ts): the host, berth's proxy (this
 * one), the client. Targets: p50 added ≤ 5 ms for a small request; a 100 MiB download at ≥ 80 %
 * of the direct throughput.
 */
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { BerthConfigSchema } from '../src/config/berth-config-schema.js';
import { ProjectMetadataSchema } from '../src/config/metadata.js';
import { createMetrics } from '../src/base/metrics.js';
import { loadOrCreateEgressCa } from '../src/outbound/egress-ca.js';
import { createEgressProxy } from '../src/outbound/egress-proxy.js';
import { createSecretBroker } from '../src/outbound/secret-broker.js';
import { createSecretValues } from '../src/store/secret-values.js';
import { summary } from './stats.js';

const ROUNDS = Number(process.env.BENCH_SECRET_ROUNDS ?? 6);
const PER_ROUND = 50;
const TOKEN = 'ghp_benchTOKEN0123456789';
const PEERS = join(import.meta.dirname, 'secrets-peers.ts');
const ms = (v: number) => `${v.toFixed(2)} ms`;

const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-secrets-'));
const upstream = spawn(process.execPath, ['--import', 'tsx', PEERS, 'upstream', TOKEN], { stdio: ['ignore', 'pipe', 'inherit'] });
const { port, caPem } = await new Promise<{ port: number; caPem: string }>((resolve) =>
  upstream.stdout.once('data', (d: Buffer) => resolve(JSON.parse(d.toString()))),
);
try {
  fs.writeFileSync(join(dir, 'public-ca.pem'), caPem);
  fs.writeFileSync(join(dir, 'token'), TOKEN, { mode: 0o600 });
  const config = BerthConfigSchema.parse({
    egress: { private_hosts: [`localhost:${port}`], trust_ca_files: [join(dir, 'public-ca.pem')] },
    secrets: { GH_TOKEN: { file: join(dir, 'token'), grants: [{ project: 'bench', host: `localhost:${port}` }] } },
  });
  const metrics = createMetrics({ processMetrics: false });
  const ca = loadOrCreateEgressCa(join(dir, 'state'));
  const broker = createSecretBroker({ config: () => config, values: createSecretValues(), metrics });
  const proxy = createEgressProxy({ config: () => config, logger: pino({ level: 'silent' }), metrics, broker, ca: () => ca });
  // The same host as a blind tunnel (allowlisted, no grant): what relaying alone costs.
  const plain = BerthConfigSchema.parse({ egress: { private_hosts: [`localhost:${port}`] } });
  const tunnelProxy = createEgressProxy({ config: () => plain, logger: pino({ level: 'silent' }), metrics });
  const tunnelPath = join(dir, 'tunnel.sock');
  const tunnelOpen = await tunnelProxy.open({
    path: tunnelPath,
    run: {
      runId: 'rt',
      project: 'bench',
      metadata: ProjectMetadataSchema.parse({ name: 'bench', egress: { allow: [`localhost:${port}`] } }),
      tenantKey: 'bench:t',
      session: 's',
      workspaceId: 'w',
      sessionsDir: join(dir, 'sessions'),
    },
    logger: pino({ level: 'silent' }),
    stopRun: () => undefined,
  });
  const socketPath = join(dir, 'egress.sock');
  const open = await proxy.open({
    path: socketPath,
    run: {
      runId: 'rb',
      project: 'bench',
      metadata: ProjectMetadataSchema.parse({ name: 'bench' }),
      tenantKey: 'bench:t',
      session: 's',
      workspaceId: 'w',
      sessionsDir: join(dir, 'sessions'),
    },
    logger: pino({ level: 'silent' }),
    stopRun: () => undefined,
  });
  const client = async (mode: 'direct' | 'proxy' | 'tunnel', kind: 'small' | 'fresh' | 'big', n: number): Promise<number[]> => {
    const args = {
      port,
      kind,
      n,
      ...(mode === 'direct'
        ? { ca: caPem, token: TOKEN }
        : mode === 'tunnel'
          ? { ca: caPem, token: TOKEN, socketPath: tunnelPath }
          : { ca: ca.certPem, socketPath }),
    };
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', PEERS, 'client', mode === 'direct' ? 'direct' : 'proxy', JSON.stringify(args)],
      { maxBuffer: 1 << 20 },
    );
    return JSON.parse(stdout) as number[];
  };
  console.error(
    `berth bench (brokered secrets): ${ROUNDS} interleaved rounds of ${PER_ROUND} requests each way, then 100 MiB downloads ...`,
  );
  const r: Record<string, number[]> = {
    direct: [],
    proxy: [],
    directFresh: [],
    proxyFresh: [],
    directBig: [],
    proxyBig: [],
    tunnelBig: [],
  };
  for (let i = 0; i < ROUNDS; i++) {
    r.direct!.push(...(await client('direct', 'small', PER_ROUND)).slice(5));
    r.proxy!.push(...(await client('proxy', 'small', PER_ROUND)).slice(5));
    r.directFresh!.push(...(await client('direct', 'fresh', PER_ROUND / 5)));
    r.proxyFresh!.push(...(await client('proxy', 'fresh', PER_ROUND / 5)));
  }
  for (let i = 0; i < 3; i++) {
    r.directBig!.push(...(await client('direct', 'big', 1)));
    r.proxyBig!.push(...(await client('proxy', 'big', 1)));
    r.tunnelBig!.push(...(await client('tunnel', 'big', 1)));
  }
  await open.close();
  await tunnelOpen.close();
  const d = summary(r.direct!);
  const p = summary(r.proxy!);
  const df = summary(r.directFresh!);
  const pf = summary(r.proxyFresh!);
  const best = (v: number[]) => Math.max(...v);
  const median = (v: number[]) => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)] as number;
  console.log('\n| HTTPS request, loopback host (token added) | p50 | p95 | p50 added by berth |');
  console.log('| --- | --- | --- | --- |');
  console.log(`| direct, token sent by the client, kept-alive connection | ${ms(d.p50)} | ${ms(d.p95)} | |`);
  console.log(`| through berth (terminated, token added), kept-alive connection | ${ms(p.p50)} | ${ms(p.p95)} | ${ms(p.p50 - d.p50)} |`);
  console.log(`| direct, a new TLS connection per request | ${ms(df.p50)} | ${ms(df.p95)} | |`);
  console.log(`| through berth, a new CONNECT and TLS per request | ${ms(pf.p50)} | ${ms(pf.p95)} | ${ms(pf.p50 - df.p50)} |`);
  console.log('\n| 100 MiB download | median | best | ÷ direct (median) |');
  console.log('| --- | --- | --- | --- |');
  console.log(`| direct | ${median(r.directBig!).toFixed(0)} MiB/s | ${best(r.directBig!).toFixed(0)} MiB/s | 1.00 |`);
  console.log(
    `| through berth, a blind tunnel (a host with no grant: relayed, not read) | ${median(r.tunnelBig!).toFixed(0)} MiB/s | ${best(r.tunnelBig!).toFixed(0)} MiB/s | ${(median(r.tunnelBig!) / median(r.directBig!)).toFixed(2)} |`,
  );
  console.log(
    `| through berth, terminated (decrypted, scanned for the token, encrypted again) | ${median(r.proxyBig!).toFixed(0)} MiB/s | ${best(r.proxyBig!).toFixed(0)} MiB/s | ${(median(r.proxyBig!) / median(r.directBig!)).toFixed(2)} |`,
  );
  console.log(
    `\nTargets: p50 added ≤ 5 ms (kept-alive: ${p.p50 - d.p50 <= 5 ? 'met' : 'missed'}); throughput ≥ 0.80 of direct (${median(r.proxyBig!) / median(r.directBig!) >= 0.8 ? 'met' : 'missed'}).`,
  );
} finally {
  upstream.kill();
  fs.rmSync(dir, { recursive: true, force: true });
}
