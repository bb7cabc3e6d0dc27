import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { receiptDigest } from '../../src/plan/receipt.js';
import { testHome, type TestHome } from '../helpers.js';

/**
 * Receipts on the real engine: a container observed at its start (runc: the host's /proc of its
 * first process; gVisor: its own kernel, read inside) matches the plan it was made from, and the
 * receipt's digest is the audit chain's.
 */
let h: TestHome;

beforeAll(() => {
  // Warm: the message is an exec into a running container, so it is observed whatever the command does.
  h = testHome({ warm: true, pool: 'off', config: 'runtimes: [runc, runsc]\n' });
  h.create({ name: 'rc', workspace_isolation: true, runtime: 'runc' });
  h.create({ name: 'rs', workspace_isolation: true, runtime: 'runsc' });
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

describe.each([
  ['runc', 'rc', 'host-proc', []],
  ['runsc', 'rs', 'inside', ['namespaces']],
] as const)('a receipt under %s', (runtime, project, kernel, unobserved) => {
  it('matches its plan, is in the run record, and its digest is in the audit chain', async () => {
    const first = await h.berth.runner.run({ project, tenantKey: 'web:alice', message: 'true', level: 'low' });
    const o = await h.berth.runner.run({ project, tenantKey: 'web:alice', message: 'true', level: 'low' });
    expect(o.warm).toBe(true);
    const receipt = o.record.receipt!;
    expect(receipt.violations).toEqual([]);
    expect(receipt.unobserved).toEqual(unobserved);
    expect(receipt.observed.runtime).toBe(runtime);
    expect(receipt.observed.seen_from).toMatchObject({
      runtime: 'engine',
      limits: 'engine',
      capabilities: kernel,
      seccomp: kernel,
      mounts: kernel,
      interfaces: kernel,
    });
    expect(receipt.observed.mounts).toEqual(receipt.planned.mounts);
    expect(receipt.observed.mounts!.find((m) => m.target === '/workspace')).toEqual({ target: '/workspace', read_only: false });
    expect(receipt.observed.interfaces).toEqual(['lo']);
    expect(receipt.policy).toEqual({ start: 'warm', folder: 'own', egress: false, allow: [], secrets: [] });
    expect(first.record.receipt!.policy.start).toBe('cold');

    const logged = h.berth.admin.listRuns(project, { limit: 1 }).runs[0]!;
    expect(logged.receipt).toEqual(receipt);
    const line = h.berth.audit.list({ kind: 'run_receipt', project, limit: 10 }).find((e) => e.target === o.runId);
    expect(line?.digest).toBe(receiptDigest(receipt));
    expect(logged.receipt_digest).toBe(line?.digest);
    expect(h.berth.audit.verify().ok).toBe(true);
  });
});

describe('a receipt of a run in a container of its own (no warm containers)', () => {
  let cold: TestHome;
  beforeAll(() => {
    cold = testHome({ warm: false, pool: 'off', config: 'runtimes: [runc, runsc]\n' });
    cold.create({ name: 'rc', workspace_isolation: true, runtime: 'runc' });
    cold.create({ name: 'rs', workspace_isolation: true, runtime: 'runsc' });
  });
  afterAll(async () => {
    await cold[Symbol.asyncDispose]();
  });

  it.each([
    ['rc', []],
    ['rs', ['namespaces']],
  ] as const)('%s: observed as it starts, alongside its command (which outlives the reading)', async (project, unobserved) => {
    const o = await cold.berth.runner.run({ project, tenantKey: 'web:bob', message: 'sleep 2', level: 'low' });
    const receipt = o.record.receipt!;
    expect(receipt.policy.start).toBe('cold');
    expect(receipt.violations).toEqual([]);
    expect(receipt.unobserved).toEqual(unobserved);
    expect(receipt.observed.mounts).toEqual(receipt.planned.mounts);
  });
});
