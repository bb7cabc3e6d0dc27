/**
 * berth's overhead per run against bare Docker, measured in the same process, interleaved, so
 * machine noise hits both alike. berth: runner.run() (workspace, plan, mount checks, attach,
 * bounded output, labels, removal). Bare: dockerode create/start/wait/remove of the same image
 * and command. Prints p50/p95 of each and the ratio; the target is p50 ratio <= 1.10.
 */
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { createBerth } from '../src/main.js';
import { bareRun, BENCH_IMAGE as IMAGE } from './bare.js';
import { fmt, summary } from './stats.js';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 30);
const WARMUP = 3;
const COMMAND = 'true';

async function main(): Promise<void> {
  const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-'));
  const berth = createBerth({ home, logLevel: 'silent' });
  const docker = new Docker();
  berth.store.create({ name: 'bench-iso', workspace_isolation: true, protected_paths: ['AGENTS.md', '.factory/'] });
  berth.store.create({ name: 'bench-shared' });
  // No level has a network: medium's container also starts berth-bridge's relays to its egress
  // proxy socket, which is what its ratio measures.
  await berth.runner.run({ project: 'bench-iso', tenantKey: 'bench:warm', message: COMMAND, level: 'medium' });
  const run = (project: string, level: 'low' | 'medium') => async () => {
    await berth.runner.run({ project, tenantKey: `bench:${level}`, message: COMMAND, level });
  };
  const variants = {
    'bare, network none': () => bareRun(docker, COMMAND),
    'berth low (isolated, 2 protected paths)': run('bench-iso', 'low'),
    'berth low (shared project)': run('bench-shared', 'low'),
    'berth medium (isolated, egress proxy)': run('bench-iso', 'medium'),
  };
  const baseline: Record<string, string> = {
    'berth low (isolated, 2 protected paths)': 'bare, network none',
    'berth low (shared project)': 'bare, network none',
    'berth medium (isolated, egress proxy)': 'bare, network none',
  };
  const samples: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  console.error(`berth bench: ${ITERATIONS} interleaved rounds of "${COMMAND}" in ${IMAGE} (+${WARMUP} warm-up) ...`);
  try {
    for (let i = 0; i < ITERATIONS + WARMUP; i++) {
      for (const [name, fn] of Object.entries(variants)) {
        const t0 = performance.now();
        await fn();
        if (i >= WARMUP) samples[name]?.push(performance.now() - t0);
      }
      if ((i + 1) % 10 === 0) console.error(`  round ${i + 1}/${ITERATIONS + WARMUP}`);
    }
  } finally {
    await berth.runner.reapLeftovers();
    fs.rmSync(home, { recursive: true, force: true });
  }
  console.log(`\n| variant | p50 | p95 | p50 ratio vs bare | p95 ratio vs bare |`);
  console.log(`| --- | --- | --- | --- | --- |`);
  for (const [name, values] of Object.entries(samples)) {
    const s = summary(values);
    const b = summary(samples[baseline[name] ?? name] ?? []);
    console.log(`| ${name} | ${fmt(s.p50)} | ${fmt(s.p95)} | ${(s.p50 / b.p50).toFixed(2)} | ${(s.p95 / b.p95).toFixed(2)} |`);
  }
  console.log(`\n(${ITERATIONS} rounds, ${os.cpus().length} cores, Node ${process.version}; target: berth p50 ratio <= 1.10)`);
}

await main();
