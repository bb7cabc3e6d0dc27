import { defineConfig } from 'vitest/config';

/**
 * Two tiers. `unit` needs no engine and no build (the launcher contract runs there against the
 * in-memory fake; the CLI is called in process, MCP in memory, the API with app.request; a guard,
 * test/unit/unit-tier.test.ts, keeps it so); `integration` needs Docker and berth's images, which
 * its global setup checks loudly, and dist/ for what starts bin/berth.js.
 * Global setup belongs to the integration project alone: vitest runs a project's global setup
 * only when files of that project are selected (and always the root's, so the root has none).
 */
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
          globalSetup: ['test/global-setup.ts'],
        },
      },
    ],
  },
});
