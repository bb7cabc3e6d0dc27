/**
 * The gateway's file tools (permission service + no-follow sandbox, in process) against plain
 * fs on the same files, interleaved. Prints p50 per operation and the ratio.
 */
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { createBerth } from '../src/main.js';
import { workspaceIdFor } from '../src/store/secret.js';
import { summary } from './stats.js';

const us = (ms: number) => `${Math.round(ms * 1000)} µs`;

const N = Number(process.env.BENCH_GATEWAY_OPS ?? 2000);
const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-gw-'));
const berth = createBerth({ home, logLevel: 'silent' });
berth.store.create({ name: 'gw', workspace_isolation: true });
const tenant = 'bench:user';
const g = berth.fileTools.forCaller({ project: 'gw', tenantKey: tenant }, { keepOpen: true }); // as a run's gateway socket calls it
const folderId = workspaceIdFor(berth.secret, 'gw', tenant);
g.write({ folderId, scope: 'private', path: 'docs/file.txt' }, 'x'.repeat(4096));
const plainPath = join(home, 'projects/gw/workspaces', folderId, 'docs/file.txt');
const ref = { folderId, scope: 'private' as const, path: 'docs/file.txt' };

const ops = {
  read: [() => g.read(ref), () => fs.readFileSync(plainPath, 'utf8')],
  stat: [() => g.info(ref), () => fs.statSync(plainPath)],
  write: [() => g.write(ref, 'y'.repeat(4096)), () => fs.writeFileSync(plainPath, 'y'.repeat(4096))],
} as const;

try {
  console.error(`berth bench (gateway): ${N} interleaved operations each ...`);
  console.log('\n| operation | gateway p50 | plain fs p50 | ratio |');
  console.log('| --- | --- | --- | --- |');
  for (const [name, [viaGateway, plain]] of Object.entries(ops)) {
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < N; i++) {
      let t = performance.now();
      viaGateway();
      a.push(performance.now() - t);
      t = performance.now();
      plain();
      b.push(performance.now() - t);
    }
    const sa = summary(a);
    const sb = summary(b);
    console.log(`| ${name} 4 KiB | ${us(sa.p50)} | ${us(sb.p50)} | ${(sa.p50 / sb.p50).toFixed(1)} |`);
  }
  console.log('\n(gateway = permission service + no-follow, fd-relative sandbox; writes are atomic with fsync, plain writes are not)');
} finally {
  fs.rmSync(home, { recursive: true, force: true });
}
