/**
 * The real Claude Code CLI (berth/agent image) against a fake Anthropic API that answers at once
 * (issue 24 item 2c): from the message to its first tool call visible, i.e. berth's first
 * `running` step of the Bash call the model asked for,
 * - for a new person (their first message: a pre-started container, runs.pool 2),
 * - for the same person again (their warm container; Claude Code continues the conversation),
 * against a bare `docker exec` of the same `claude -p … --output-format stream-json` into a
 * running container of the same image (host network, the fake's URL and key in its environment)
 * to its first stdout line with that tool_use, measured in the same run, interleaved.
 */
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { createBerth } from '../src/main.js';
import { startFakeAnthropic } from '../test/fakes/anthropic-api.js';
import { fmt, summary } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ITERATIONS ?? 10);
const IMAGE = 'berth/agent:latest';
const KEY = 'sk-ant-api03-bench-0123456789';
const PROMPT = 'BASH: echo first-step';
const docker = new Docker();

const fake = await startFakeAnthropic({ apiKey: KEY });
const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-agent-'));
fs.writeFileSync(
  join(home, 'berth.yaml'),
  ['runs: { pool: 2 }', 'models:', '  anthropic:', '    api: anthropic', `    url: ${fake.url}`, `    api_key: ${KEY}`, ''].join('\n'),
);
const berth = createBerth({ home, logLevel: 'silent', warm: true });
berth.store.create({
  name: 'bench',
  workspace_isolation: true,
  agent: 'claude',
  models: { upstreams: ['anthropic'], allow: ['claude-*'] },
});

// The bare baseline: the same CLI and argv in a plain container of the same image.
const bare = await docker.createContainer({
  Image: IMAGE,
  Entrypoint: ['sleep'],
  Cmd: ['3600'],
  Env: [`ANTHROPIC_BASE_URL=${fake.url}`, `ANTHROPIC_API_KEY=${KEY}`, 'HOME=/tmp/home'],
  HostConfig: { NetworkMode: 'host' },
});
await bare.start();

/** ms from the exec's start to the first stdout line carrying the model's tool_use. */
async function bareFirstToolUse(): Promise<number> {
  const exec = await bare.exec({
    Cmd: ['claude', '-p', '--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions', '--', PROMPT],
    AttachStdout: true,
    AttachStderr: true,
  });
  const t0 = performance.now();
  const stream = await exec.start({ hijack: true, stdin: false });
  let first: number | undefined;
  let seen = '';
  await new Promise<void>((resolve) => {
    stream.on('data', (chunk: Buffer) => {
      seen = (seen + chunk.toString('latin1')).slice(-65536);
      if (first === undefined && seen.includes('"tool_use"')) first = performance.now() - t0;
    });
    stream.on('end', resolve);
    stream.on('close', resolve);
  });
  if (first === undefined) throw new Error(`the bare claude showed no tool_use: ${seen.slice(-400)}`);
  return first;
}

/** ms from berth's run() to its first running step. */
async function berthFirstStep(user: string): Promise<number> {
  let first: number | undefined;
  const t0 = performance.now();
  const out = await berth.runner.run({
    project: 'bench',
    tenantKey: user,
    message: PROMPT,
    level: 'low',
    onProgress: (u) => {
      if (first === undefined && u.type === 'step' && u.step.state === 'running') first = performance.now() - t0;
    },
  });
  if (out.exitCode !== 0 || first === undefined)
    throw new Error(
      `berth's claude run ended ${out.exitCode} with ${first === undefined ? 'no step' : 'a step'}: ${out.stderr.slice(-400)}`,
    );
  return first;
}

try {
  console.error(
    `berth bench (real Claude Code, first tool call): ${ROUNDS} rounds of a new person, the same person again, and a bare exec ...`,
  );
  await bareFirstToolUse(); // the CLI's first start in the bare container (its caches)
  await berthFirstStep('bench:seed'); // teaches the pool the shape
  const t = { fresh: [] as number[], again: [] as number[], bare: [] as number[] };
  for (let i = 0; i < ROUNDS; i++) {
    t.fresh.push(await berthFirstStep(`bench:person-${i}`));
    t.again.push(await berthFirstStep(`bench:person-${i}`));
    t.bare.push(await bareFirstToolUse());
    await new Promise((r) => setTimeout(r, 500)); // the pool refills
  }
  const b = summary(t.bare);
  const row = (what: string, v: number[]) => {
    const s = summary(v);
    return `| ${what} | ${fmt(s.p50)} | ${fmt(s.p95)} | ${(s.p50 / b.p50).toFixed(2)} |`;
  };
  console.log(`\n| real Claude Code: message → first tool call visible (${ROUNDS} rounds) | p50 | p95 | ÷ bare exec (p50) |`);
  console.log('| --- | --- | --- | --- |');
  console.log(row('bare `docker exec` of the same claude -p, to its tool_use line', t.bare));
  console.log(row('berth, a new person (pool of 2)', t.fresh));
  console.log(row('berth, the same person again (warm container, --continue)', t.again));
} finally {
  await berth.runner.drain(5000);
  await berth.runner.reapLeftovers();
  await bare.remove({ force: true });
  await fake.close();
  fs.rmSync(home, { recursive: true, force: true });
}
