import { afterEach, describe, expect, it } from 'vitest';
import { receiptDigest } from '../../src/plan/receipt.js';
import { testHome, type TestHome } from '../helpers.js';
import { createFakeLauncher } from '../helpers/fake-launcher.js';
import { main } from '../../src/cli/berth.js';

async function cli(home: string, ...args: string[]) {
  let out = '';
  const code = await main(['--home', home, ...args], {}, { out: (s) => void (out += s), err: () => undefined });
  return { code, out };
}

/** The runner takes a receipt of every run: in its record, its digest in the audit chain, and a launcher that drops a setting caught. */
let h: TestHome | undefined;
afterEach(async () => {
  await h?.[Symbol.asyncDispose]();
  h = undefined;
});

describe("a run's receipt", () => {
  it('a launcher that keeps the plan: a receipt with no violation, its digest audited', async () => {
    h = testHome({ warm: false, launcher: createFakeLauncher() });
    h.create({ name: 'p', workspace_isolation: true });
    const o = await h.run('p', 'web:alice', 'echo hi', 'medium');
    const receipt = o.record.receipt!;
    expect(receipt).toMatchObject({
      violations: [],
      unobserved: [],
      policy: { start: 'cold', folder: 'own', egress: true, allow: [], secrets: [] },
    });
    expect(receipt.observed.mounts).toEqual(receipt.planned.mounts);
    const [line] = h.berth.audit.list({ kind: 'run_receipt', limit: 5 });
    expect(line).toMatchObject({ action: 'run.receipt', project: 'p', target: o.runId, outcome: 'ok', digest: receiptDigest(receipt) });
    expect(h.berth.audit.list({ kind: 'sandbox_violation', limit: 5 })).toEqual([]);
  });

  it('a launcher that drops a read-only flag and adds a capability fails loudly: violations in the record, the audit log and the metrics', async () => {
    const launcher = createFakeLauncher({
      observed: (seen) => ({
        ...seen,
        mounts: seen.mounts!.map((m) => ({ ...m, read_only: false })),
        capabilities: { effective: ['sys_admin'], bounding: ['sys_admin'] },
      }),
    });
    h = testHome({ warm: false, launcher });
    h.create({ name: 'p', workspace_isolation: true });
    const o = await h.run('p', 'web:alice', 'echo hi', 'medium');
    expect(o.record.receipt!.violations).toEqual([
      'effective capabilities sys_admin (planned none) [engine]',
      'bounding capabilities sys_admin (planned none) [engine]',
      'mount /memory is writable (planned read-only) [engine]',
      'mount /run/berth is writable (planned read-only) [engine]',
    ]);
    expect(h.berth.admin.listRuns('p', { limit: 1 }).runs[0]!.receipt).toEqual(o.record.receipt);
    expect(h.berth.audit.list({ kind: 'run_receipt', limit: 5 })[0]).toMatchObject({ outcome: 'error', digest: o.record.receipt_digest });
    expect(h.berth.audit.list({ kind: 'sandbox_violation', limit: 5 }).map((e) => [e.action, e.target, e.code])).toEqual(
      o.record.receipt!.violations.map((v) => ['run.receipt.violation', `${o.runId}: ${v}`, 'RECEIPT_VIOLATION']).reverse(),
    );
    expect((await h.berth.metrics.render()).body).toContain('berth_receipt_violations_total{project="p"} 1\n');
    expect(h.berth.audit.verify().ok).toBe(true);

    // The operator's whole view: every fact planned beside observed, the differences, a failing exit.
    const text = await cli(h.home, 'runs', 'p', '--receipt');
    expect(text.code).toBe(1);
    expect(text.out).toContain(`run ${o.runId}  `);
    expect(text.out).toContain(
      '  capabilities    planned effective none; bounding none  |  observed effective sys_admin; bounding sys_admin [engine]\n',
    );
    expect(text.out).toContain('    /memory                  planned read-only observed writable\n');
    expect(text.out).toContain('  violations      \n    effective capabilities sys_admin (planned none) [engine]\n');
    expect(text.out).toContain(`  digest          ${o.record.receipt_digest} `);
    const json = await cli(h.home, 'runs', 'p', '--receipt', '--json');
    expect(JSON.parse(json.out)).toEqual({
      runs: [{ run: o.runId, finished_at: o.record.finished_at, receipt: o.record.receipt, receipt_digest: o.record.receipt_digest }],
    });
  });
});
