/**
 * berth on a real Kubernetes node (issue 44's bench): a new person's first reply and a warm
 * message, both over HTTP (`POST /api/projects/:name/runs`), against the bare floor of the same
 * cluster in the same run: a bare Pod of the same image created and exec'd once (create → Running
 * → exec of `true` through the API server), and one exec into a running bare pod. Printed as
 * ratios, beside agent-sandbox's own CI gate (a claimed p50 ≤ 300 ms to a ready sandbox, from a
 * warm pool). Needs the real-node build (scripts/ensure-kube-node.sh) and root (bridge, cgroups).
 * BENCH_PEOPLE new people (default 5), BENCH_ITERATIONS warm rounds (default 20).
 */
import { PassThrough } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { CoreV1Api, Exec, type KubeConfig, type V1Status } from '@kubernetes/client-node';
import { pino } from 'pino';
import { appDepsFrom, createApp } from '../src/api/app.js';
import { testHome } from '../test/helpers.js';
import { startRealKubeCluster } from '../test/helpers/real-kube-cluster.js';
import { startRealKubeRig } from '../test/helpers/real-kube-rig.js';
import { BENCH_IMAGE } from './bare.js';
import { fmt, summary } from './stats.js';

const PEOPLE = Number(process.env.BENCH_PEOPLE ?? 5);
const ROUNDS = Number(process.env.BENCH_ITERATIONS ?? 20);
const TOKEN = 'bench-token-0123456789abcdef';
const CPUS = 0.25;

const timed = async (fn: () => Promise<unknown>) => {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
};

/** One exec of `true` through the API server (WebSocket v4, as berth's), to its status. */
function execTrue(kc: KubeConfig, namespace: string, pod: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const out = new PassThrough().resume();
    void new Exec(kc)
      .exec(namespace, pod, 'main', ['true'], out, out, null, false, (s: V1Status) =>
        s.status === 'Success' ? resolve() : reject(new Error(`exec: ${JSON.stringify(s)}`)),
      )
      .catch(reject);
  });
}

async function barePod(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name },
      spec: {
        terminationGracePeriodSeconds: 0,
        containers: [
          {
            name: 'main',
            image: BENCH_IMAGE,
            imagePullPolicy: 'IfNotPresent',
            command: ['berth-bridge', 'idle'],
            resources: { limits: { cpu: '250m', memory: '256Mi' }, requests: { cpu: '250m', memory: '256Mi' } },
          },
        ],
      },
    },
  });
  for (;;) {
    const pod = await core.readNamespacedPod({ namespace, name });
    if (pod.status?.phase === 'Running') break;
    if (pod.status?.phase === 'Failed') throw new Error(`bare pod ${name} failed`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await execTrue(kc, namespace, name);
}

const cluster = await startRealKubeCluster();
const rig = await startRealKubeRig(cluster.info);
const h = testHome({ launcher: rig.launcher, warm: true, pool: 'off', config: 'launcher: kubernetes\n' });
h.create({ name: 'kb', workspace_isolation: true, agent: 'shell', limits: { cpus: CPUS } });
const app = createApp(appDepsFrom(h.berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
await new Promise((r) => server.once('listening', r));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

async function send(user: string, mustBeWarm: boolean): Promise<void> {
  const res = await fetch(`${base}/api/projects/kb/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user, message: 'true', level: 'low' }),
  });
  const body = (await res.json()) as { warm?: boolean; exit_code?: number };
  if (res.status !== 200 || body.exit_code !== 0 || body.warm !== mustBeWarm)
    throw new Error(`a message answered ${res.status}: ${JSON.stringify(body)}`);
}

const kc = rig.cluster.kubeConfig;
const core = kc.makeApiClient(CoreV1Api);
try {
  console.error(`berth bench (real kube node): ${PEOPLE} new people and bare pods interleaved, then ${ROUNDS} warm rounds ...`);
  const first: number[] = [];
  const bareCold: number[] = [];
  for (let i = 0; i < PEOPLE; i++) {
    bareCold.push(await timed(() => barePod(kc, rig.namespace, `bare-${i}`)));
    await core.deleteNamespacedPod({ namespace: rig.namespace, name: `bare-${i}`, gracePeriodSeconds: 0 });
    first.push(await timed(() => send(`bench:new-${i}`, false)));
    // Let go of the session's pod: the node holds 2 CPUs' worth of requests.
    await h.berth.runner.releaseWarm();
  }
  await barePod(kc, rig.namespace, 'bare-warm');
  await send('bench:warm', false);
  const warm: number[] = [];
  const bareExec: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    bareExec.push(await timed(() => execTrue(kc, rig.namespace, 'bare-warm')));
    warm.push(await timed(() => send('bench:warm', true)));
  }
  const [f, bc, w, be] = [summary(first), summary(bareCold), summary(warm), summary(bareExec)];
  console.log('\n| on the real node | p50 | p95 | n | p50 ÷ bare |');
  console.log('| --- | --- | --- | --- | --- |');
  console.log(`| bare pod create → Running → exec | ${fmt(bc.p50)} | ${fmt(bc.p95)} | ${bc.n} | 1 |`);
  console.log(`| new person's first reply (HTTP) | ${fmt(f.p50)} | ${fmt(f.p95)} | ${f.n} | ${(f.p50 / bc.p50).toFixed(2)} |`);
  console.log(`| bare exec into a running pod | ${fmt(be.p50)} | ${fmt(be.p95)} | ${be.n} | 1 |`);
  console.log(`| warm message (HTTP) | ${fmt(w.p50)} | ${fmt(w.p95)} | ${w.n} | ${(w.p50 / be.p50).toFixed(2)} |`);
  console.log(
    `\nagent-sandbox's CI gate claims p50 ≤ 300 ms to a ready sandbox (from a warm pool); here a warm message is ${fmt(w.p50)} p50 end to end, a first reply ${fmt(f.p50)} (a new pod and two new volumes).`,
  );
} finally {
  server.close();
  await h.berth.runner.releaseWarm().catch(() => undefined);
  await h[Symbol.asyncDispose]();
  await rig.stop();
  await cluster.stop();
}
