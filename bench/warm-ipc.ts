/**
 * Warm containers and kernel memory (issue 20, outside-attack-3 H2), against bare Docker in the
 * same run:
 * 1. what one container pins idle after the report's attack (SysV message queues) with Docker's
 *    defaults, kept as berth kept it before: the reference;
 * 2. 100 sessions of one tenant, each message leaving the worst IPC the sysctls allow (16 queues
 *    of empty messages, 64 MiB of SysV shared memory, 16 semaphore sets, a POSIX queue): host
 *    memory growth against the bound (such a container is removed);
 * 3. 100 sessions of one tenant, each leaving the most that may stay (a 30 MiB /tmp file, under
 *    the 32 MiB slack): growth against warm_per_tenant × (idle + slack);
 * 4. the cost of the checks on a warm message: the IPC check alone, the whole verdict, and a
 *    warm message (`runner.run`) against a bare exec into a running container.
 * BENCH_SESSIONS / BENCH_ITERATIONS shrink it.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { DEFAULT_WARM_PER_TENANT } from '../src/config/runs.js';
import { cgroupDir, leftoverIpc, observeLeftovers, openIpcReader, watchKeepAlive } from '../src/launch/docker/leftovers.js';
import { WARM_MEMORY_SLACK, warmVerdict } from '../src/launch/lifecycle.js';
import { createBerth, type Berth } from '../src/main.js';
import { BENCH_IMAGE, bareExec } from './bare.js';
import { fmt, summary } from './stats.js';

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 100);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 30);
const BARE = 2;
const MiB = 2 ** 20;
const docker = new Docker();
const homes: string[] = [];
const PROBE_SRC = join(import.meta.dirname, '..', 'test', 'fixtures', 'ipc-probe.c');

/** Host memory in use (MemTotal − MemAvailable): what the whole machine lost, others' work included. */
function hostUsed(): number {
  const info = fs.readFileSync('/proc/meminfo', 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(info)?.[1] ?? NaN) * 1024;
  return kb('MemTotal') - kb('MemAvailable');
}

/** The memory cgroup charge (kernel memory included) of each container. */
async function charges(ids: string[]): Promise<number[]> {
  return Promise.all(
    ids.map(async (id) => {
      const { State } = await docker.getContainer(id).inspect();
      const dir = cgroupDir(State.Pid, 'memory');
      const file = dir && [join(dir, 'memory.usage_in_bytes'), join(dir, 'memory.current')].find((f) => fs.existsSync(f));
      return file ? Number(fs.readFileSync(file, 'utf8')) : NaN;
    }),
  );
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;

function newBerth(): { berth: Berth; home: string } {
  const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-bench-warm-ipc-')));
  homes.push(home);
  fs.writeFileSync(join(home, 'berth.yaml'), 'runs: { warm_idle_seconds: 600, warm_max: 500 }\n');
  const berth = createBerth({ home, logLevel: 'silent', warm: true });
  berth.store.create({ name: 'ipc', workspace_isolation: true });
  return { berth, home };
}

const rows: string[] = [];
const bare: string[] = [];
try {
  const { berth } = newBerth();
  const tenant = 'bench:mallory';
  const message = (text: string, session: string) =>
    berth.runner.run({ project: 'ipc', tenantKey: tenant, message: text, sessionId: session, level: 'low' });
  const first = await message('true', 'upload');
  const workspace = join(berth.store.get('ipc').paths.workspacesDir, first.workspaceId);
  execFileSync('gcc', ['-static', '-O2', '-o', join(workspace, 'ipc-probe'), PROBE_SRC]);
  await berth.runner.releaseWarm();

  // 1. The reference: Docker's IPC defaults, the report's attack, the container kept.
  console.error(`berth bench (warm-ipc): ${BARE} bare containers holding the report's message queues ...`);
  const hostBeforeBare = hostUsed();
  for (let i = 0; i < BARE; i++) {
    const c = await docker.createContainer({
      Image: BENCH_IMAGE,
      Cmd: ['berth-bridge', 'idle'],
      User: '10001:10001',
      HostConfig: {
        NetworkMode: 'none',
        IpcMode: 'private',
        Memory: 512 * MiB,
        MemorySwap: 512 * MiB,
        Mounts: [{ Type: 'bind', Source: workspace, Target: '/x', ReadOnly: true }] as never,
      },
    });
    bare.push(c.id);
    await c.start();
    const exec = await c.exec({ Cmd: ['/x/ipc-probe', 'msgq', '28000'], AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({ hijack: true, stdin: false });
    await new Promise<void>((r) => {
      stream.on('end', r);
      stream.on('close', r);
      stream.resume();
    });
  }
  const bareCharges = await charges(bare);
  const bareHost = hostUsed() - hostBeforeBare;
  const barePer = sum(bareCharges) / BARE;
  await Promise.all(bare.splice(0).map((id) => docker.getContainer(id).remove({ force: true })));

  // 2. The worst IPC a message can leave, one session after another.
  console.error(`berth bench (warm-ipc): ${SESSIONS} sessions of one tenant, each leaving its worst IPC ...`);
  const worst = './ipc-probe msgq0 16 && ./ipc-probe shm 64 && ./ipc-probe sem 16 && ./ipc-probe mq /q > /dev/null';
  let host0 = hostUsed();
  let warmAfter = 0;
  let failures = 0;
  const t2 = performance.now();
  for (let i = 0; i < SESSIONS; i++) {
    await message('true', `ipc${i}`); // the session's container, kept warm
    const left = await message(worst, `ipc${i}`); // an exec into it
    if (!left.warm) failures++;
    if (left.exitCode !== 0) throw new Error(`session ${i}: exit ${left.exitCode}: ${left.stdout}${left.stderr}`);
  }
  const ipcMs = performance.now() - t2;
  await new Promise((r) => setTimeout(r, 1000)); // removals settle
  const ipcKept = await berth.runner.listContainers('ipc');
  const ipcCharges = await charges(ipcKept.map((c) => c.id));
  const ipcHost = hostUsed() - host0;
  const probed = Math.min(10, SESSIONS);
  for (let i = 0; i < probed; i++) if ((await message('true', `ipc${i}`)).warm) warmAfter++;
  await berth.runner.releaseWarm();

  // 3. The most that may stay: 30 MiB in /tmp, no IPC. The per-tenant cap keeps 4.
  console.error(`berth bench (warm-ipc): ${SESSIONS} sessions of one tenant, each leaving 30 MiB in /tmp ...`);
  host0 = hostUsed();
  for (let i = 0; i < SESSIONS; i++) {
    const o = await message('head -c 31457280 /dev/zero > /tmp/keep', `tmp${i}`);
    if (o.exitCode !== 0) throw new Error(`session ${i}: exit ${o.exitCode}`);
  }
  await new Promise((r) => setTimeout(r, 1000));
  const tmpKept = await berth.runner.listContainers('ipc');
  const tmpCharges = await charges(tmpKept.map((c) => c.id));
  const tmpHost = hostUsed() - host0;
  await berth.runner.releaseWarm();

  // 4. What the checks cost a warm message.
  console.error(`berth bench (warm-ipc): the checks on a warm message, ${ITERATIONS} rounds ...`);
  const cost = await message('true', 'cost');
  const { State } = await docker.getContainer(cost.containerId).inspect();
  const keepAlive = await watchKeepAlive(State.Pid, ['berth-bridge', 'idle']);
  const bareIdle = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['berth-bridge', 'idle'], HostConfig: { NetworkMode: 'none' } });
  bare.push(bareIdle.id);
  await bareIdle.start();
  const ipcCheck: number[] = [];
  const ipcAhead: number[] = [];
  const verdict: number[] = [];
  // One reader for the container's life, as the engine keeps one per warm container.
  const reader = openIpcReader(keepAlive);
  const warmMessage: number[] = [];
  const bareTimes: number[] = [];
  for (let i = 0; i < ITERATIONS + 2; i++) {
    let t0 = performance.now();
    if ((await leftoverIpc(keepAlive))?.length !== 0) throw new Error('the IPC check failed on a clean container');
    if (i >= 2) ipcCheck.push(performance.now() - t0);
    t0 = performance.now();
    if ((await reader.read())?.length !== 0) throw new Error('the IPC check failed on a clean container');
    if (i >= 2) ipcAhead.push(performance.now() - t0);
    t0 = performance.now();
    const why = warmVerdict(await observeLeftovers(keepAlive, [], reader));
    if (why !== undefined) throw new Error(`a clean container judged not clean: ${why}`);
    if (i >= 2) verdict.push(performance.now() - t0);
    t0 = performance.now();
    if (!(await message('true', 'cost')).warm) throw new Error('the warm message was not warm');
    if (i >= 2) warmMessage.push(performance.now() - t0);
    t0 = performance.now();
    await bareExec(bareIdle);
    if (i >= 2) bareTimes.push(performance.now() - t0);
  }
  reader.close();
  await berth.runner.releaseWarm();
  const ic = summary(ipcCheck);
  const ia = summary(ipcAhead);
  const v = summary(verdict);
  const wm = summary(warmMessage);
  const be = summary(bareTimes);

  const bound = DEFAULT_WARM_PER_TENANT * (1 * MiB + WARM_MEMORY_SLACK);
  rows.push(`\n| measure | value | against bare / the bound |`, `| --- | --- | --- |`);
  rows.push(
    `| bare Docker container (512 MiB limit, IPC defaults) after \`msgq 28000\`, kept idle: cgroup charge | ${mib(barePer)} each (host used +${mib(bareHost / BARE)} each, mean of ${BARE}) | 1.00 |`,
  );
  rows.push(`| the same × ${SESSIONS} sessions, as berth kept them before | ${mib(barePer * SESSIONS)} (extrapolated) | |`);
  rows.push(
    `| ${SESSIONS} sessions of one tenant, each leaving 16 queues of empty messages + 64 MiB SysV shm + 16 semaphore sets + a POSIX queue (${(ipcMs / 1000).toFixed(0)} s) | kept after: ${ipcKept.length} containers, ${mib(sum(ipcCharges))}; host used ${ipcHost >= 0 ? '+' : ''}${mib(ipcHost)}; next message warm in ${warmAfter} of ${probed} tried | ${(sum(ipcCharges) / (barePer * SESSIONS)).toFixed(4)} of bare; bound ${mib(bound)} |`,
  );
  rows.push(
    `| ${SESSIONS} sessions of one tenant, each leaving 30 MiB in /tmp (under the slack) | kept after: ${tmpKept.length} containers (warm_per_tenant ${DEFAULT_WARM_PER_TENANT}), ${mib(sum(tmpCharges))}; host used ${tmpHost >= 0 ? '+' : ''}${mib(tmpHost)} | bound ${mib(bound)} |`,
  );
  rows.push(
    `| IPC check on a clean warm container, started cold (nsenter + sh reading /proc/sysvipc/*, readdir /dev/mqueue) | p50 ${fmt(ic.p50)}, p95 ${fmt(ic.p95)} | ${(ic.p50 / be.p50).toFixed(2)} of a bare exec |`,
  );
  rows.push(
    `| the same, through the reader that lives as long as the container (what a warm message pays after the exec) | p50 ${fmt(ia.p50)}, p95 ${fmt(ia.p95)} | ${(ia.p50 / be.p50).toFixed(2)} of a bare exec |`,
  );
  rows.push(
    `| the whole verdict after an exec (processes frozen and read, keep-alive states, IPC, memory) | p50 ${fmt(v.p50)}, p95 ${fmt(v.p95)} | ${(v.p50 / be.p50).toFixed(2)} of a bare exec |`,
  );
  rows.push(`| bare dockerode exec into a running container (\`true\`) | p50 ${fmt(be.p50)}, p95 ${fmt(be.p95)} | 1.00 |`);
  rows.push(
    `| warm message, \`runner.run()\` (\`true\`, level low), every check included | p50 ${fmt(wm.p50)}, p95 ${fmt(wm.p95)} | ${(wm.p50 / be.p50).toFixed(2)} (p50; target ≤ 1.2) |`,
  );
  if (failures) rows.push(`\n${failures} sessions' second message was not warm`);
  console.log(rows.join('\n'));
} finally {
  await Promise.all(
    bare.map((id) =>
      docker
        .getContainer(id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
  for (const home of homes) {
    const b: Berth = createBerth({ home, logLevel: 'silent' });
    await b.runner.reapLeftovers();
    fs.rmSync(home, { recursive: true, force: true });
  }
}
