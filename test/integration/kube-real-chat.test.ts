import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { listCheckpoints } from '../../src/store/checkpoints.js';
import { testHome, type TestHome } from '../helpers.js';
import type { KubeRig } from '../helpers/kube-rig.js';
import { HOSTPATH_CLASS } from '../helpers/real-kube-cluster.js';
import { startRealKubeRig } from '../helpers/real-kube-rig.js';

/**
 * A person's chat message end to end on the real node (real tier only): over HTTP to berth's run
 * API, through the runner to a Sandbox, a pod the real scheduler placed and the real kubelet ran
 * (dockershim, CNI bridge), its volumes bound by the real controller-manager, the answer back.
 * Twice: on the default `local` StorageClass (static local PVs; the kubelet applies fsGroup on a
 * first mount) and on `hostpath` (the controller-manager's in-tree provisioner, which never applies
 * fsGroup: a 0750 root:root directory). On the first the agent writes /workspace; on the second no
 * agent could, and the person's first message fails at once, naming the StorageClass at fault.
 * The warm message's receipt is the real pod's, observed as planned, and before it a copy pod kept
 * a checkpoint of the workspace (docs/checkpoints.md).
 */

const TOKEN = 'real-chat-token-0123456789abcdef';

for (const storage of ['local', HOSTPATH_CLASS]) {
  describe(`a chat message on the real node, storage class ${storage}`, () => {
    let rig: KubeRig;
    let h: TestHome;
    let base = '';
    let close = () => undefined as unknown;

    beforeAll(async () => {
      const info = inject('realKube');
      if (!info) throw new Error('kube-real-chat runs on the real tier only (BERTH_TEST_KUBE=real, project kube-real)');
      rig = await startRealKubeRig(info, storage === 'local' ? {} : { storageClass: storage });
      h = testHome({ launcher: rig.launcher, warm: true, pool: 'off', config: 'launcher: kubernetes\n' });
      h.create({ name: 'chat', workspace_isolation: true, agent: 'shell' });
      const app = createApp(appDepsFrom(h.berth, { token: TOKEN, logger: pino({ level: 'silent' }) }));
      const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
      await new Promise((r) => server.once('listening', r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      close = () => server.close();
    }, 300_000);

    afterAll(async () => {
      close();
      await h?.berth.runner.releaseWarm().catch(() => undefined);
      await h?.[Symbol.asyncDispose]();
      await rig?.stop();
    });

    const send = async (user: string, message: string) => {
      const res = await fetch(`${base}/api/projects/chat/runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user, message, level: 'medium' }),
      });
      return {
        status: res.status,
        body: (await res.json()) as { exit_code?: number; stdout?: string; warm?: boolean; error?: { code: string; message: string } },
      };
    };

    if (storage === HOSTPATH_CLASS) {
      it('refuses a first message at once, in words naming the StorageClass that does not apply fsGroup (VOLUME_UNWRITABLE)', async () => {
        const first = await send('web:nina', 'echo hello > /workspace/hello.txt');
        expect(first.status, JSON.stringify(first.body)).toBe(500);
        expect(first.body.error?.code).toBe('VOLUME_UNWRITABLE');
        expect(first.body.error?.message).toContain(`StorageClass "${HOSTPATH_CLASS}" does not apply the pod's fsGroup`);
      });
      return;
    }

    it("answers a new person's first message from a new pod, and the next one from the same pod (warm), the workspace written by the agent", async () => {
      const t0 = performance.now();
      const first = await send('web:nina', 'id -u; echo hello > /workspace/hello.txt && cat /workspace/hello.txt');
      const firstMs = performance.now() - t0;
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      expect(first.body).toMatchObject({ exit_code: 0, stdout: '10001\nhello\n', warm: false });
      const t1 = performance.now();
      const second = await send('web:nina', 'cat /workspace/hello.txt');
      const warmMs = performance.now() - t1;
      expect(second.body).toMatchObject({ exit_code: 0, stdout: 'hello\n', warm: true });
      // Before the second message a copy pod on the real kubelet kept the workspace as the first left it.
      const kept = listCheckpoints(h.berth.store.get('chat'), 'web:nina');
      expect(kept).toHaveLength(2);
      expect(kept.find((c) => c.files > 0)?.owned_bytes).toBeGreaterThan(0);
      // The run's receipt, observed on the real kubelet's pod: as planned; only the pod's CNI interfaces unobserved.
      const receipt = h.berth.admin.listRuns('chat', { user: 'web:nina', limit: 1 }).runs[0]?.receipt;
      expect(receipt?.violations, JSON.stringify(receipt)).toEqual([]);
      expect(receipt?.unobserved).toEqual(['interfaces']);
      expect(receipt?.observed.mounts?.find((m) => m.target === '/workspace')).toEqual({ target: '/workspace', read_only: false });
      console.info(`real node (${storage}): first reply ${Math.round(firstMs)} ms, warm ${Math.round(warmMs)} ms`);
    });
  });
}
