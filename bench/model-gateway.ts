/**
 * The model gateway's cost on a model call: the same fake Anthropic API (streaming SSE) called
 * (a) directly and (b) through a run's model.sock (berth checks upstream, model and budget, adds
 * the key, taps token usage, streams each chunk through), interleaved. Then the whole path from
 * inside a real container at level low: busybox wget → berth-bridge relay on the container's
 * loopback → model.sock → upstream, against the same wget on the host calling the fake directly.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { ProjectMetadataSchema } from '../src/config/metadata.js';
import { BerthConfigSchema } from '../src/config/berth-config-schema.js';
import { createBerth } from '../src/main.js';
import { createModelGateway } from '../src/outbound/model-gateway.js';
import { startFakeAnthropic } from '../test/fakes/anthropic-api.js';
import { summary } from './stats.js';

const N = Number(process.env.BENCH_MODEL_CALLS ?? 300);
const CONCURRENT = 8;
const KEY = 'sk-bench-key';
const BODY = JSON.stringify({
  model: 'claude-bench',
  max_tokens: 64,
  stream: true,
  messages: [{ role: 'user', content: 'REPLY: a short streamed answer' }],
});
const ms = (v: number) => `${v.toFixed(2)} ms`;

function call(target: { socketPath?: string; port?: number; path: string }): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(
      { ...target, host: '127.0.0.1', method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, agent: false },
      (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - t0) : reject(new Error(`status ${res.statusCode}`))));
      },
    );
    req.on('error', reject);
    req.end(BODY);
  });
}

const fake = await startFakeAnthropic({ apiKey: KEY });
const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-mg-'));
const config = BerthConfigSchema.parse({ models: { up: { api: 'anthropic', url: fake.url, api_key: KEY } } });
const gateway = createModelGateway({ config: () => config, logger: pino({ level: 'silent' }) });
const metadata = ProjectMetadataSchema.parse({ name: 'bench', models: { upstreams: ['up'], budget: { requests_per_hour: 1_000_000 } } });
const socketPath = join(dir, 'model.sock');
const server = await gateway.open({
  path: socketPath,
  run: {
    runId: 'rbench',
    project: 'bench',
    metadata,
    tenantKey: 'bench:t',
    session: 's',
    workspaceId: 'wbench',
    sessionsDir: join(dir, 'sessions'),
  },
  logger: pino({ level: 'silent' }),
  stopRun: () => undefined,
});
const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-mgc-'));
try {
  console.error(`berth bench (model gateway): ${N} interleaved streamed calls each ...`);
  const direct: number[] = [];
  const via: number[] = [];
  for (let i = 0; i < N + 20; i++) {
    const a = await call({ port: fake.port, path: '/v1/messages' });
    const b = await call({ socketPath, path: '/up/v1/messages' });
    if (i >= 20) (direct.push(a), via.push(b));
  }
  const sd = summary(direct);
  const sv = summary(via);
  console.log('\n| model call (streamed, fake upstream) | p50 | p95 | p50 added by berth |');
  console.log('| --- | --- | --- | --- |');
  console.log(`| direct | ${ms(sd.p50)} | ${ms(sd.p95)} | |`);
  console.log(`| through model.sock | ${ms(sv.p50)} | ${ms(sv.p95)} | ${ms(sv.p50 - sd.p50)} |`);

  // Concurrency: CONCURRENT streams at once take about as long as one (none waits for another).
  const t0 = performance.now();
  const parallel = await Promise.all(Array.from({ length: CONCURRENT }, () => call({ socketPath, path: '/up/v1/messages' })));
  console.log(
    `| ${CONCURRENT} at once through model.sock | ${ms(summary(parallel).p50)} | ${ms(summary(parallel).p95)} | all done in ${ms(performance.now() - t0)} |`,
  );

  // The whole path from a real container (level low, network none), per call, averaged over a loop.
  fs.writeFileSync(join(home, 'berth.yaml'), `models:\n  up:\n    api: anthropic\n    url: ${fake.url}\n    api_key: ${KEY}\n`);
  const berth = createBerth({ home, logLevel: 'silent' });
  berth.store.create({ name: 'bench', workspace_isolation: true, models: { upstreams: ['up'], budget: { requests_per_hour: 1_000_000 } } });
  const LOOP = 100;
  const post = `--header 'content-type: application/json' --post-data '${BODY}'`;
  const loop = (url: string, wget = 'wget') =>
    `i=0; s=$(cat /proc/uptime); while [ $i -lt ${LOOP} ]; do ${wget} -q -O /dev/null ${post} ${url} || exit 1; i=$((i+1)); done; e=$(cat /proc/uptime); echo "$s $e"`;
  const perCall = (out: string) => {
    const [s, , e] = out.trim().split(/\s+/).map(Number);
    return (((e ?? 0) - (s ?? 0)) * 1000) / LOOP;
  };
  const inside: number[] = [];
  const host: number[] = [];
  for (let r = 0; r < 5; r++) {
    const o = await berth.runner.run({
      project: 'bench',
      tenantKey: 'bench:c',
      message: loop('"$ANTHROPIC_BASE_URL/v1/messages"'),
      level: 'low',
    });
    if (o.exitCode !== 0) throw new Error(`container loop failed: ${o.stderr}`);
    inside.push(perCall(o.stdout));
    // Async: the fake upstream answers from this very process.
    host.push(
      perCall(
        (
          await promisify(execFile)(
            'busybox',
            ['sh', '-c', loop(`http://127.0.0.1:${fake.port}/v1/messages`, `busybox wget --header 'x-api-key: ${KEY}'`)],
            { encoding: 'utf8', timeout: 60_000 },
          )
        ).stdout,
      ),
    );
  }
  const si = summary(inside);
  const sh = summary(host);
  console.log(`\n| busybox wget, ${LOOP} calls in a loop (median of 5 loops) | per call | added by berth |`);
  console.log('| --- | --- | --- |');
  console.log(`| on the host, direct | ${ms(sh.p50)} | |`);
  console.log(`| in a level-low container: relay → model.sock → upstream | ${ms(si.p50)} | ${ms(si.p50 - sh.p50)} |`);
  await berth.runner.reapLeftovers();
} finally {
  await server.close();
  await fake.close();
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(home, { recursive: true, force: true });
}
