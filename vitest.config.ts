import { defineConfig } from 'vitest/config';

/**
 * Two tiers. `unit` needs no engine and no build (the launcher contract runs there against the
 * in-memory fake; the CLI is called in process, MCP in memory, the API with app.request; a guard,
 * test/unit/unit-tier.test.ts, keeps it so); `integration` needs Docker and berth's images, which
 * its global setup checks loudly, and dist/ for what starts bin/berth.js.
 * Global setup belongs to the integration project alone: vitest runs a project's global setup
 * only when files of that project are selected (and always the root's, so the root has none).
 *
 * A third, `kube-real`, exists only with BERTH_TEST_KUBE=real (make test's real tier, once
 * scripts/ensure-kube-node.sh has built the node): the launcher contract and the relay suite
 * unchanged on one real cluster per run (real kubelet, scheduler, controller-manager;
 * test/real-kube-setup.ts), plus the files that need real nodes (a chat message with its receipt
 * and a checkpoint's copy pod, on both storage classes; two nodes). The other Kubernetes files run
 * on the test kubelet only: kubernetes.test.ts (200 s here), kube-volumes (76 s) and
 * kube-checkpoints (117 s) passed on the real node too, but CI has 30 minutes for everything.
 * Serial: the node's CPUs are reserved by pod requests.
 */
const KUBE_REAL_FILES = [
  'test/contract/kubernetes.test.ts',
  'test/integration/kube-relay.test.ts',
  'test/integration/kube-real-chat.test.ts',
  'test/integration/kubernetes-two-nodes.test.ts',
];
/** Files that only mean something on real nodes. */
const REAL_ONLY = ['test/integration/kube-real-chat.test.ts', 'test/integration/kubernetes-two-nodes.test.ts'];
const kubeReal = process.env.BERTH_TEST_KUBE === 'real';

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: more parallel container files only add noise and timeouts.
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/contract/fake.test.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/contract/docker.test.ts', 'test/contract/kubernetes.test.ts'],
          exclude: REAL_ONLY,
          globalSetup: ['test/global-setup.ts'],
        },
      },
      ...(kubeReal
        ? [
            {
              extends: true,
              test: {
                name: 'kube-real',
                include: KUBE_REAL_FILES,
                globalSetup: ['test/global-setup.ts', 'test/real-kube-setup.ts'],
                fileParallelism: false,
                testTimeout: 180_000,
                hookTimeout: 300_000,
              },
            },
          ]
        : []),
    ],
  },
});
