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
 * scripts/ensure-kube-node.sh has built the node): the launcher contract, the relay, the volumes
 * and the checkpoints (copy pods) suites unchanged on one real cluster per run (real kubelet, scheduler, controller-manager;
 * test/real-kube-setup.ts), plus the files that need real nodes (a chat message with its receipt,
 * two nodes). integration/kubernetes.test.ts runs on the test kubelet only: on the real node it
 * took 200 s of CI's 30 minutes and found nothing the contract and chat files do not. Serial: the
 * node's CPUs are reserved by pod requests.
 */
const KUBE_REAL_FILES = [
  'test/contract/kubernetes.test.ts',
  'test/integration/kube-relay.test.ts',
  'test/integration/kube-volumes.test.ts',
  'test/integration/kube-checkpoints.test.ts',
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
