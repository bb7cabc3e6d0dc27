import type { Logger } from 'pino';
import type { Metrics } from '../base/metrics.js';
import type { Launcher } from '../launch/launcher.js';
import type { AuditEvent } from '../store/audit.js';
import { plannedBoundary, receiptOf, type CredentialUse, type Observed, type Policy, type Receipt } from '../plan/receipt.js';
import type { RunPlan } from '../plan/run-plan.js';

/**
 * One run's receipt as it is taken: the container is observed as soon as it runs the plan
 * (`onStarted`: a new container's start, or the exec into a warm one), alongside the run, and
 * compared with the plan when the run has ended. Nothing observed (a launcher that cannot, a run
 * over before it could be read): every fact is listed as unobserved, never as held.
 */
export interface ReceiptWatch {
  /** Observe it now; settles once read (never rejects). */
  onStarted(containerId: string): Promise<void>;
  receipt(policy: Policy, uses?: { kept: CredentialUse[]; more: number }): Promise<Receipt>;
}

const NOTHING: Observed = { seen_from: {} };

export function watchReceipt(
  launcher: Pick<Launcher, 'observe' | 'planned'>,
  plan: RunPlan,
  onError: (err: unknown) => void,
): ReceiptWatch {
  let observed: Promise<Observed> | undefined;
  return {
    onStarted(containerId) {
      // The last container the run started is the one it ran in (a warm one gone gives way to a new one).
      const current = launcher.observe
        ? launcher.observe(containerId).catch((err: unknown) => {
            onError(err);
            return NOTHING;
          })
        : Promise.resolve(NOTHING);
      observed = current;
      return current.then(() => undefined);
    },
    async receipt(policy, uses) {
      return receiptOf(launcher.planned?.(plan) ?? plannedBoundary(plan), (await observed) ?? NOTHING, policy, uses);
    },
  };
}

/** Settles once the line is on disk (never rejects: a line that could not be written is logged). */
export type ReceiptAudit = (event: Omit<AuditEvent, 'actor' | 'request_id'> & { actor: string }) => Promise<void>;

/** Violations audited per run (one line each); the receipt in the run record holds them all. */
const AUDITED_VIOLATIONS = 8;

/**
 * The receipt's digest into the audit chain; each difference from the plan an audit line, and the
 * run a metric and an error log line. Settles once the lines are on disk.
 */
export async function noteReceipt(
  out: { audit?: ReceiptAudit; metrics: Metrics; log: Logger },
  project: string,
  record: { run: string; session: string; receipt: Receipt; receipt_digest: string },
): Promise<void> {
  const { receipt, receipt_digest: digest } = record;
  const run = { project, session: record.session, run: record.run };
  const actor = `session:${run.project}/${run.session}`;
  const line = out.audit?.({
    kind: 'run_receipt',
    action: 'run.receipt',
    actor,
    project: run.project,
    target: run.run,
    outcome: receipt.violations.length ? 'error' : 'ok',
    digest,
  });
  if (!receipt.violations.length) return line;
  out.metrics.receiptViolation(run.project);
  out.log.error({ violations: receipt.violations }, "the run's container differed from its plan");
  const lines = [line];
  for (const v of receipt.violations.slice(0, AUDITED_VIOLATIONS)) {
    lines.push(
      out.audit?.({
        kind: 'sandbox_violation',
        action: 'run.receipt.violation',
        actor,
        project: run.project,
        target: `${run.run}: ${v}`,
        outcome: 'error',
        code: 'RECEIPT_VIOLATION',
      }),
    );
  }
  await Promise.all(lines);
}
